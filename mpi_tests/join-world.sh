#!/bin/sh
# join-world.sh JOINED - beside a job whose decode[0], of its own world, dies
# (join_world.mpi): once it has (its killed_at in $KVXT_OUT, at most 60 s),
# a replacement joins and takes decode[0] again, generation 2, and JOINED
# rooms (mpi_tests/join-run.sh; its results in $KVXT_OUT/replacement).
set -u
here=$(dirname "$0")
joined=${1:?usage: join-world.sh JOINED}
i=0
while [ ! -s "$KVXT_OUT/killed_at" ]; do
    i=$((i + 1))
    [ $i -gt 600 ] && { echo "join-world: decode[0] did not die within 60 s"; exit 1; }
    sleep 0.1
done
echo "join-world: decode[0] died; a replacement takes its place"
KVXT_JOINER=replacement sh "$here/join-run.sh" 1 mpi_tests/t_join joiner "$joined" 0
