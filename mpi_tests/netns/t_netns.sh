#!/bin/sh
# t_netns.sh - proves the multi-host test infrastructure (mpi_tests/netns/hosts.sh)
# with plain MPI + UCP (mpi_tests/t_ucp_put) on two network-namespace hosts:
#
#   1. launch: with h1's data0 dark (nftables drops all of it), mpirun in h0
#      still starts the daemon and the ranks of h1 through the rsh agent: the
#      launcher only needs ctl0, whose byte counters move.
#   2. data path: two ranks, one per host, put 4 x 8 MiB to each other, every
#      byte checked; every lane of their endpoints is tcp/data0
#      (ucp_ep_print_info: not shared memory, not lo), and data0's byte counters
#      in both hosts rise by at least the bytes put while lo's stay put.
#   3. data fault: while the ranks put in a loop, h1's data0 drops everything; the
#      ranks see their flushes stall, agree on it over MPI (ctl0) and end cleanly;
#      nothing is left in any host.
#   4. launcher cut off: the same, with h1's ctl0 dropped too; mpirun is stopped
#      by its timeout and cannot reach h1, whose daemon and rank stay behind;
#      `down` kills them and deletes every namespace.
#
# Exit 77 (skip) only where network namespaces cannot be created (not root, no
# CAP_SYS_ADMIN) or there is no mpirun; takes about 20 s.
set -u
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
H=$top_srcdir/mpi_tests/netns/hosts.sh
prog=$top_builddir/mpi_tests/t_ucp_put
KVXN_ID=kt$$
export KVXN_ID
mib8=8388608
iters=4

NAME=t_netns
. "$top_srcdir/mpi_tests/netns/testlib.sh"

[ -x "$prog" ] || fail "$prog is not built (make check builds it)"
t0=$(date +%s)
hosts_start 2 nft

# ---- 1. launch over the control link alone -----------------------------
"$H" fault h1 drop || fail "cannot drop h1's data0"
counters h1 ctl0
c_rx=$rx
"$H" mpirun -N 2 -t 20 hostname >"$work/launch.out" 2>&1 ||
    fail "launch with h1's data0 dark: $(cat "$work/launch.out")"
[ "$(sort "$work/launch.out" | tr '\n' ' ')" = "h0 h0 h1 h1 " ] ||
    fail "expected hostnames h0 h0 h1 h1, got: $(cat "$work/launch.out")"
counters h1 ctl0
[ "$rx" -gt "$c_rx" ] || fail "h1's ctl0 received nothing during the launch"
"$H" fault h1 undrop
say "1. launch: 2 ranks on h0 and 2 on h1 through the rsh agent with h1's data0 dark;" \
    "h1's ctl0 received $((rx - c_rx)) bytes"

# ---- 2. UCX puts cross over TCP on data0 -------------------------------
bytes_mark
"$H" mpirun -N 1 -t 30 "$prog" -s $mib8 -n $iters -l data0 >"$work/put.out" 2>&1
rc=$?
sed 's/^/    /' "$work/put.out"
[ $rc -eq 0 ] || fail "t_ucp_put exited $rc"
[ "$(grep -c 'lanes tcp/data0' "$work/put.out")" -eq 2 ] ||
    fail "expected both endpoints on tcp/data0"
need=$((mib8 * iters))
for h in h0 h1; do
    bytes_moved $h
    [ $d_rx -ge $need ] && [ $d_tx -ge $need ] ||
        fail "$h data0 moved rx $d_rx tx $d_tx bytes, less than the $need put each way"
    [ $l_rx -lt $((need / 16)) ] || fail "$h lo moved $l_rx bytes: puts went over lo?"
    say "2. data path: $h data0 rx $d_rx tx $d_tx bytes (>= $need put each way), lo rx $l_rx"
done

# ---- 3. a data fault mid-run, agreed over MPI --------------------------
# wait_marker FILE PID: until rank 0 says the puts flow (or mpirun ended).
wait_marker() {
    n=0
    while [ ! -e "$1" ] && kill -0 "$2" 2>/dev/null && [ $n -lt 200 ]; do
        sleep 0.1
        n=$((n + 1))
    done
    [ -e "$1" ] || fail "the puts never started: $(cat "$work"/*.out)"
}
"$H" mpirun -N 1 -t 30 "$prog" -s 1048576 -n 0 -T 20 -d 3 -m "$work/m3" -x \
    >"$work/fault.out" 2>&1 &
pid=$!
wait_marker "$work/m3" $pid
tf=$(now)
"$H" fault h1 drop || fail "cannot drop h1's data0"
wait $pid
rc=$?
sed 's/^/    /' "$work/fault.out"
[ $rc -eq 0 ] || fail "t_ucp_put -x exited $rc: the ranks did not agree on the fault"
grep -q 'agreed over MPI by all 2 ranks' "$work/fault.out" || fail "no agreement"
for r in $(sed -n 's/^rank \([0-9]*\): data path failed at \([0-9.]*\),.*/\1:\2/p' "$work/fault.out"); do
    say "3. data fault: rank ${r%%:*} gave up $(awk "BEGIN { printf \"%.2f\", ${r#*:} - $tf }") s after the drop"
done
left=$("$H" pids)
[ -z "$left" ] || fail "processes left after a clean end: $left"
say "3. data fault: mpirun ended by itself, nothing left in h0 or h1"

# ---- 4. the launcher cut off from h1 -----------------------------------
"$H" fault h1 undrop
"$H" mpirun -N 1 -t 6 "$prog" -s 1048576 -n 0 -T 60 -d 30 -m "$work/m4" -x \
    >"$work/cut.out" 2>&1 &
pid=$!
wait_marker "$work/m4" $pid
"$H" fault -I ctl0 h1 drop && "$H" fault h1 drop || fail "cannot cut h1 off"
wait $pid
rc=$?
[ $rc -eq 124 ] || [ $rc -eq 137 ] || fail "mpirun cut off from h1 exited $rc, not by its timeout"
left=$("$H" pids)
echo "$left" | sed 's/^/    left: /'
echo "$left" | grep -q '^h1 .*t_ucp_put' || fail "expected h1's rank to outlive mpirun"
"$H" down 2>&1 | sed 's/^/    /'
# A killed process may still be exiting for a moment after it left its
# namespaces, and one whose parent is gone lingers as a zombie until init reaps
# it: only one still alive after a second counts.
alive() {
    [ -r /proc/"$1"/status ] && awk '/^State:/ { exit $2 == "Z" }' /proc/"$1"/status 2>/dev/null
}
for p in $(echo "$left" | cut -d' ' -f2); do
    n=0
    while alive "$p" && [ $n -lt 10 ]; do
        sleep 0.1
        n=$((n + 1))
    done
    alive "$p" && fail "process $p survived down: $(grep State /proc/"$p"/status)"
done
ip netns list | grep -q "^$KVXN_ID-" && fail "namespaces left: $(ip netns list)"
[ ! -e "${KVXN_ROOT:-/run/kvx-netns}/$KVXN_ID" ] || fail "state of $KVXN_ID left"
say "4. launcher cut off: mpirun timed out ($rc); down killed $(echo "$left" | wc -l)" \
    "processes it left and deleted every namespace"
say "PASS in $(($(date +%s) - t0)) s"
exit 0
