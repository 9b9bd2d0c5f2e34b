#!/bin/sh
# demo-trace-run TRACE [ARGS...] - one rank of kvx-demo --trace for the
# mpi_tests/cases/demo_trace_*.mpi cases. TRACE names a file under
# tests/data/traces/ of the source tree ($top_srcdir, set by make check).
# The summary goes to $KVXT_OUT/demo.json and the plot to
# $KVXT_OUT/trace.png; this rank's output and exit status to
# $KVXT_OUT/rankN.out and rankN.rc, which the post step reads (a bad trace
# must be refused on every rank, with its file:line on rank 0).
# make copies it to mpi_tests/demo-trace-run in the build tree.
here=$(dirname "$0")
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
trace=${top_srcdir:?top_srcdir is not set}/tests/data/traces/${1:?usage: demo-trace-run TRACE [ARGS...]}
shift
"$here/../examples/kvx-demo" --trace "$trace" --json "$KVXT_OUT/demo.json" \
    --plot "$KVXT_OUT/trace.png" --progress none "$@" >"$KVXT_OUT/rank$rank.out" 2>&1
rc=$?
cat "$KVXT_OUT/rank$rank.out"
echo "$rc" >"$KVXT_OUT/rank$rank.rc"
exit $rc
