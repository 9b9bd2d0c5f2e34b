#!/bin/sh
# t_demo_cut.sh - kvx-demo across a cut link: the prefill instance (TP 2) on
# h0, the decode instance (TP 2) on h1 (mpi_tests/netns/hosts.sh), kvx's
# default settings, and MPI's own traffic on the data link too
# (KVXN_MPI_NET=data0; only mpirun's daemons stay on ctl0). h1's data0 goes
# down about 3 s into a long run: 3 s after the demo printed its header
# (every rank has its kvx context then), never while the ranks are still
# starting (a cut during MPI_Init or kvx_ctx_create, which are collective,
# would hang the job until mpirun's -t). Every rank must notice the loss ("peer ... lost:
# silent for 1.5 s"), fail every room in flight, end its exchanges with the
# ranks it can no longer reach within --end-timeout, name them, and exit:
# the whole job ends within 30 s of the cut (not at --time-limit).
#
# Prints the summary rank 0 (h0) wrote and how long the job took after the
# cut. Exit 77 (skip) where network namespaces cannot be made.
# KVXT_CUT_REQUESTS (default 4000): the run's requests. KVXT_CUT_FAULT
# (default link-down): the hosts.sh fault on h1's data0, e.g. drop-in (h1
# receives nothing from h0, h0 still receives what h1 sends: a one-way
# partition).
set -u
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
H=$(cd "$top_srcdir/mpi_tests/netns" && pwd)/hosts.sh
. "$top_srcdir/mpi_tests/netns/demo_lib.sh"
demo=$(cd "$top_builddir" && pwd)/examples/kvx-demo
KVXN_ID=dc$$
export KVXN_ID
out=${TMPDIR:-/tmp}/t_demo_cut.$$.out
demo_cut_run "$out" 2 2 prefill:1x2,decode:1x2 h1 "${KVXT_CUT_FAULT:-link-down}"
# Each side of the partition prints its own summary (rank 0 on h0, rank 2 on
# h1), names the ranks it could not reach, and says OK: every room that could
# succeed did. No rank may abort (UCX asserting in kvx_ctx_destroy, say).
fail=
grep -q "unavailable: prefill\[0\].tp0, prefill\[0\].tp1 (not heard" "$out" ||
    fail="$fail; h1's summary does not name the prefill ranks"
grep -q "unavailable: decode\[0\].tp0, decode\[0\].tp1 (not heard" "$out" ||
    fail="$fail; h0's summary does not name the decode ranks"
oks=$(grep -c "^kvx-demo: OK" "$out")
[ "$oks" = 2 ] || fail="$fail; $oks summaries say OK, not 2"
demo_verdict "$out" "$rc" "$after" "$fail"
