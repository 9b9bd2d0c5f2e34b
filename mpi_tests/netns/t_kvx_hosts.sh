#!/bin/sh
# t_kvx_hosts.sh - kvx between two network-namespace hosts (mpi_tests/netns/hosts.sh):
# the prefill instance (TP 2) on h0, the decode instance (TP 2) on h1.
#
#   1. data path: mpi_tests/t_rooms moves 500 rooms byte-exact; the pages
#      crossed over TCP on data0: kvx's own log names tcp/data0 (and nothing
#      else) for the data and control endpoints of every peer on the other
#      host, data0's byte counters rise by at least the bytes the prefill
#      sent (h0 sends them, h1 receives them) and lo's stay put.
#   2. injected failures: a put failure injected on prefill[0].tp1 for one
#      room (mpi_tests/t_agree inject): all 4 ranks agree FAILED with its
#      origin, stage and text, the decode within 100 ms; then 1000 rooms with
#      random injected failures at every stage (t_agree soak): every room
#      concluded identically on all 4 ranks, every failure the injected one
#      with its origin, 0 mismatched bytes.
#   3. launch/kvx-run --hosts h0:2,h1:2 --split-roles, started in h0 with the
#      rsh agent and control-network settings as launcher options: prefill
#      ranks 0-1 run on h0, decode ranks 2-3 on h1 (kvx's log says where each
#      rank runs), and their rooms arrive byte-exact over tcp/data0; then the
#      same with --hostfile listing h1 first: prefill on h1, decode on h0.
#   4. without UCX_NET_DEVICES, UCX chooses: every peer across the hosts is
#      reached over TCP on one of the hosts' real interfaces, never lo.
#
# The runs here are about bytes and agreement, not about silence: they set
# KVX_PEER_TIMEOUT=10s so that a stall of this busy machine (all hosts share its
# cores) cannot pass for a lost peer; t_kvx_netfault.sh tests the default.
#
# Exit 77 (skip) only where network namespaces cannot be created or there is
# no mpirun; takes about 20-30 s.
set -u
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
H=$(cd "$top_srcdir/mpi_tests/netns" && pwd)/hosts.sh
b=$(cd "$top_builddir" && pwd)
KVXN_ID=kh$$
export KVXN_ID
layout=prefill:1x2,decode:1x2
same=-x\ KVX_LAYOUT=$layout\ -x\ KVX_PEER_TIMEOUT=10s

NAME=t_kvx_hosts
. "$top_srcdir/mpi_tests/netns/testlib.sh"
show() {
    grep -v ' info ' "$1" | sed 's/^/    /'
}
# check_lanes LOG [PHOST DHOST]: every rank's line about its peer on the
# other host (prefill ranks in PHOST, default h0, about decode peers, decode
# ranks in DHOST, default h1, about prefill peers) names tcp/data0, and
# nothing else, for data and control.
check_lanes() {
    {
        grep -E "^\[[^ ]* ${2:-h0}:[0-9]+ r[0-9]+ prefill\[0\]\.tp[01]\] info peer decode[^:]*: data over" "$1"
        grep -E "^\[[^ ]* ${3:-h1}:[0-9]+ r[0-9]+ decode\[0\]\.tp[01]\] info peer prefill[^:]*: data over" "$1"
    } >"$work/lanes"
    sed 's/^/    /' "$work/lanes"
    [ "$(wc -l <"$work/lanes")" -eq 4 ] ||
        fail "expected 4 log lines about peers across the hosts (one per rank)"
    good='data over tcp/data0\.[0-9]+ \(pages as data messages\); control over tcp/data0\.[0-9]+;'
    if grep -vE "$good" "$work/lanes"; then
        fail "a peer across the hosts is not reached over tcp/data0 alone"
    fi
}
# kvx_run PHOST DHOST PLACEMENT...: launch/kvx-run, started in h0 with the rsh
# agent and control-network settings as launcher options (what hosts.sh mpirun
# adds), runs 50 rooms with PLACEMENT (--hosts or --hostfile, --split-roles):
# the prefill ranks 0-1 must run on PHOST, the decode ranks 2-3 on DHOST, and
# their rooms arrive byte-exact over tcp/data0.
kvx_run() {
    ph=$1
    dh=$2
    shift 2
    KVX_LOG_LEVEL=info KVX_PEER_TIMEOUT=10s "$H" run -t 90 h0 "$top_srcdir/launch/kvx-run" \
        --layout $layout "$@" -- \
        --bind-to none --mca plm_rsh_agent "$H agent" \
        --mca oob_tcp_if_include ctl0 --mca btl_tcp_if_include ctl0 \
        --mca pml ob1 --mca btl self,vader,tcp -x UCX_NET_DEVICES=data0 -- \
        "$b/mpi_tests/t_rooms" --rooms 50 --kv-heads 4 >"$work/run.out" 2>&1
    rc=$?
    show "$work/run.out"
    [ $rc -eq 0 ] || fail "kvx-run $* exited $rc"
    grep -q "^kvx-run: placement: prefill\[0\] ranks 0-1 on $ph\$" "$work/run.out" &&
        grep -q "^kvx-run: placement: decode\[0\] ranks 2-3 on $dh\$" "$work/run.out" ||
        fail "kvx-run $* did not place prefill on $ph and decode on $dh"
    where=$(sed -n 's/^\[[^ ]* \(h[01]\):[0-9]* r\([0-3]\) \([a-z]*\)\[0\]\.tp[01]\] info context ready.*/r\2:\1:\3/p' \
        "$work/run.out" | sort | tr '\n' ' ')
    [ "$where" = "r0:$ph:prefill r1:$ph:prefill r2:$dh:decode r3:$dh:decode " ] ||
        fail "ranks ran at '$where', not prefill on $ph and decode on $dh"
    grep -q '^t_rooms: HND: 50 rooms, 200 room-ends on 4 ranks, 200 SUCCESS, 0 mismatched bytes' \
        "$work/run.out" || fail "kvx-run's rooms did not all arrive byte-exact"
    check_lanes "$work/run.out" "$ph" "$dh"
    say "3. kvx-run $*: $where"
}

for p in t_rooms t_agree; do
    [ -x "$b/mpi_tests/$p" ] || fail "$b/mpi_tests/$p is not built (make check builds it)"
done
t0=$(date +%s)
hosts_start 2

# ---- 1. 500 rooms over tcp/data0 ----------------------------------------
bytes_mark
"$H" mpirun -N 2 -t 90 $same -x KVX_LOG_LEVEL=info "$b/mpi_tests/t_rooms" --rooms 500 \
    --pages 1:64 --chunks 8 --kv-heads 4 >"$work/rooms.out" 2>&1
rc=$?
show "$work/rooms.out"
[ $rc -eq 0 ] || fail "t_rooms exited $rc"
grep -q '^t_rooms: HND: 500 rooms, 2000 room-ends on 4 ranks, 2000 SUCCESS, 0 mismatched bytes' \
    "$work/rooms.out" || fail "not 500 rooms SUCCESS byte-exact on all 4 ranks"
sent=$(sed -n 's/^t_rooms: \([0-9]*\) bytes sent by the prefill ranks$/\1/p' "$work/rooms.out")
[ -n "$sent" ] && [ "$sent" -gt 0 ] || fail "t_rooms did not say how many bytes it sent"
check_lanes "$work/rooms.out"
for h in h0 h1; do
    bytes_moved $h
    moved=$d_tx
    [ $h = h1 ] && moved=$d_rx
    [ "$moved" -ge "$sent" ] ||
        fail "$h data0 moved $moved bytes the pages' way, less than the $sent bytes sent"
    [ $l_rx -lt $((sent / 16)) ] || fail "$h lo received $l_rx bytes: pages went over lo?"
    say "1. data path: $h data0 rx $d_rx tx $d_tx bytes (pages: $sent bytes h0 -> h1), lo rx $l_rx"
done
say "1. data path: 500 rooms byte-exact, every peer across the hosts on tcp/data0"

# ---- 2. injected failures, agreed across the hosts ----------------------
"$H" mpirun -N 2 -t 60 $same \
    -x KVX_FAULT=stage=post,role=prefill,instance=0,tp=1,room=107,effect=fail \
    "$b/mpi_tests/t_agree" inject >"$work/inject.out" 2>&1
rc=$?
show "$work/inject.out"
[ $rc -eq 0 ] || fail "t_agree inject exited $rc"
grep -q '^root cause on every rank: room 107 FAILED at post on prefill\[0\]\.tp1 (rank 1): injected failure' \
    "$work/inject.out" || fail "the 4 ranks did not agree on the injected root cause"
"$H" mpirun -N 2 -t 90 $same -x KVX_FAULT=stage=any,prob=0.02,seed=7,effect=fail \
    -x KVX_DRAIN_TIMEOUT=30s "$b/mpi_tests/t_agree" soak 1000 >"$work/soak.out" 2>&1
rc=$?
show "$work/soak.out" | grep -v 'warn room'
[ $rc -eq 0 ] || fail "t_agree soak exited $rc"
grep -qE '^soak: 1000 rooms .*: [1-9][0-9]* FAILED \(all injected\), .* agreed identically on all 4 ranks, 0 mismatched bytes' \
    "$work/soak.out" || fail "soak: not every room agreed identically with its injected failure"
say "2. injected failures: one room and 1000 rooms agreed on all 4 ranks with the injected cause"

# ---- 3. kvx-run places the roles on the hosts ---------------------------
kvx_run h0 h1 --hosts h0:2,h1:2 --split-roles
# A hostfile that lists h1 first: the prefill goes where the hostfile begins.
printf '# the namespace hosts\nh1 slots=2\nh0 slots=2\n' >"$work/hostfile"
kvx_run h1 h0 --hostfile "$work/hostfile" --split-roles

# ---- 4. UCX_NET_DEVICES unset: a real interface, never lo ---------------
KVXN_NET= "$H" mpirun -N 2 -t 90 $same -x KVX_LOG_LEVEL=info "$b/mpi_tests/t_rooms" --rooms 20 \
    --kv-heads 4 >"$work/nodev.out" 2>&1
rc=$?
show "$work/nodev.out"
[ $rc -eq 0 ] || fail "t_rooms without UCX_NET_DEVICES exited $rc"
grep -q '^t_rooms: HND: 20 rooms, 80 room-ends on 4 ranks, 80 SUCCESS, 0 mismatched bytes' \
    "$work/nodev.out" || fail "without UCX_NET_DEVICES: not 20 rooms byte-exact"
grep -E 'info peer (decode|prefill)[^:]*: data over' "$work/nodev.out" |
    grep -E ' h0:[0-9]+ r[01] .* peer decode| h1:[0-9]+ r[23] .* peer prefill' >"$work/lanes"
sed 's/^/    /' "$work/lanes"
[ "$(wc -l <"$work/lanes")" -eq 4 ] || fail "expected 4 transport lines across the hosts"
if grep -vE 'data over tcp/(data0|ctl0)\.[0-9]+ \(pages as data messages\); control over tcp/(data0|ctl0)\.[0-9]+;' \
    "$work/lanes"; then
    fail "without UCX_NET_DEVICES a peer across the hosts is reached over something else than tcp on data0 or ctl0"
fi
say "4. UCX_NET_DEVICES unset: every peer across the hosts over $(sed -n 's/.*data over \(tcp\/[a-z0-9]*\).*/\1/p' "$work/lanes" | sort -u | tr '\n' ' ')(never lo)"

left=$("$H" pids)
[ -z "$left" ] || fail "processes left in the hosts: $left"
say "PASS in $(($(date +%s) - t0)) s"
exit 0
