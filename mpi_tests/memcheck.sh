#!/bin/sh
# memcheck.sh - multi-rank tests under valgrind's memcheck, every rank:
# a 2-rank data path (mpi_tests/memcheck/rooms_1x1.mpi: 200 rooms, the
# progress thread against the API) and context creation with every kind of
# invalid input and KV layout mismatch (mpi_tests/cases/create.mpi, 5 ranks:
# the cleanup paths). Each runs through mpi_tests/run-mpi.sh with
# KVXT_WRAPPER set to valgrind, bounded by its case's timeout; about 30 s.
# Skipped (77) without valgrind or mpirun.
set -u
top=${top_srcdir:-$(dirname "$0")/..}
build=${top_builddir:-.}
. "$top/tests/memcheck.sh"

memcheck_init mpi
# valgrind slows every rank: peers are declared lost only after a minute
# of silence (the cases may raise it further).
KVX_PEER_TIMEOUT=${KVX_PEER_TIMEOUT:-60s}
KVX_KEEPALIVE_INTERVAL=${KVX_KEEPALIVE_INTERVAL:-1s}
KVXT_WRAPPER=$memcheck_cmd
export KVX_PEER_TIMEOUT KVX_KEEPALIVE_INTERVAL KVXT_WRAPPER
rc=0
for c in mpi_tests/memcheck/rooms_1x1.mpi mpi_tests/cases/create.mpi; do
    KVXT_MEMCHECK_TAG=$(basename "$c" .mpi)
    export KVXT_MEMCHECK_TAG
    sh "$build/mpi_tests/run-mpi.sh" "$top/$c"
    st=$?
    [ $st -eq 77 ] && exit 77
    [ $st -ne 0 ] && rc=1
done
memcheck_verdict || rc=1
exit $rc
