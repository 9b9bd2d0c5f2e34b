#!/bin/sh
# join-kill.sh KILLED JOINED - beside a running job (join_kill.mpi): a joiner
# that takes KILLED rooms as decode[1] and then dies (SIGKILL, as a crash),
# then a second joiner that takes its place back as decode[1], generation 2,
# and JOINED rooms.
set -u
here=$(dirname "$0")
killed=${1:?usage: join-kill.sh KILLED JOINED}
joined=${2:?usage: join-kill.sh KILLED JOINED}
KVXT_JOINER=joiner-1 sh "$here/join-run.sh" 1 mpi_tests/t_join joiner "$killed" 1 die
if [ ! -s "$KVXT_OUT/joiner-1/killed_at" ]; then
    echo "join-kill: the first joiner did not reach its death"
    exit 1
fi
echo "join-kill: decode[1] killed itself as planned; the next joiner takes its place"
KVXT_JOINER=joiner-2 sh "$here/join-run.sh" 1 mpi_tests/t_join joiner "$joined" 1
