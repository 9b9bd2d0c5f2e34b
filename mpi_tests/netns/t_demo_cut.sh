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
"$H" up 2 || exit $?
trap '"$H" down >/dev/null 2>&1' EXIT
out=${TMPDIR:-/tmp}/t_demo_cut.$$.out
KVXN_MPI_NET=data0 "$H" mpirun -N 2 -t 120 -x KVX_LAYOUT=prefill:1x2,decode:1x2 \
    --enable-recovery --mca async_mpi_finalize 1 \
    "$demo" --requests "${KVXT_CUT_REQUESTS:-4000}" --prompt-tokens 64:512 --progress lines \
    --time-limit 100 --end-timeout 5 >"$out" 2>&1 &
pid=$!
demo_wait_header "$out" $pid
sleep 3
t_cut=$(date +%s.%N)
"$H" fault h1 ${KVXT_CUT_FAULT:-link-down}
echo "cut h1's data0 (${KVXT_CUT_FAULT:-link-down}) at $(date -u +%T.%N | cut -c1-12)"
wait $pid
rc=$?
t_end=$(date +%s.%N)
after=$(awk "BEGIN { printf \"%.2f\", $t_end - $t_cut }")
grep -v "FAILED at\|mpool.c\|UCX may still\|refused: room" "$out" | tail -60
echo "mpirun exited $rc, ${after} s after the cut"
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
