#!/bin/sh
# bench-run SUB [ARGS...] - runs kvx-bench SUB ARGS on one rank, writing its
# rows to $KVXT_OUT/SUB.json and its plot to $KVXT_OUT/SUB.png, for the post
# step of the mpi_tests/cases/bench_*.mpi smoke cases
# (mpi_tests/bench-check.sh): under mpirun --enable-recovery mpirun exits 0
# whatever the ranks did, so the result is read from the file.
# make copies it to mpi_tests/bench-run in the build tree; the cases run it
# from there.
here=$(dirname "$0")
exec "$here/../tools/kvx-bench" "$@" --json "$KVXT_OUT/$1.json" --plot "$KVXT_OUT/$1.png"
