#!/bin/sh
# t_demo_partial.sh - kvx-demo across a partial partition: prefill TP 2 with
# tp0 on h0 and tp1 on h1, the decode (TP 1) on h2 (mpi_tests/netns/hosts.sh,
# one rank per host), kvx's default settings, MPI's own traffic on the data
# link too (KVXN_MPI_NET=data0). About 3 s into a long run every packet
# between h0 and h2 is dropped, both ways, while h1 still reaches both: one
# prefill rank loses the decode, its sibling does not, and at the end rank 1
# can reach ranks 0 and 2 that cannot reach each other. Every room the cut
# touches fails with the loss, rank 0's summary names the decode rank it
# could not reach and says OK, no rank aborts, and the job ends within 30 s
# of the cut: no exchange at the end, and no kvx_ctx_destroy, waits for a
# rank it cannot reach -- nor for one it can reach that waits on another
# (the case that first took 68 s: rank 1 sat in a receive whose sender had
# gone on into kvx_ctx_destroy, which waited 60 s for rank 1's goodbye).
#
# Exit 77 (skip) where network namespaces cannot be made.
set -u
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
H=$(cd "$top_srcdir/mpi_tests/netns" && pwd)/hosts.sh
. "$top_srcdir/mpi_tests/netns/demo_lib.sh"
demo=$(cd "$top_builddir" && pwd)/examples/kvx-demo
KVXN_ID=dp$$
export KVXN_ID
out=${TMPDIR:-/tmp}/t_demo_partial.$$.out
demo_cut_run "$out" 3 1 prefill:1x2,decode:1x1 h2 cut-from h0
fail=
grep -q "peer decode\[0\].tp0 (rank 2) lost" "$out" || fail="$fail; rank 0 did not lose rank 2"
grep -q "unavailable: decode\[0\].tp0 (not heard" "$out" ||
    fail="$fail; rank 0's summary does not name the decode rank"
! grep -q "did not all say goodbye" "$out" || fail="$fail; kvx_ctx_destroy waited for a goodbye"
demo_verdict "$out" "$rc" "$after" "$fail"
