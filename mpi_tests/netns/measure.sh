#!/bin/sh
# measure.sh - numbers for the notes, between two namespace hosts (not part of
# make check; needs root; takes about 5 minutes):
#
#   0. what Open MPI and UCX need of a "host": t_ucp_put with 2 ranks per host
#      (so Open MPI's vader runs inside each host) with each per-host piece of
#      hosts.sh taken away in turn (KVXN_SPLIT): the lanes UCX chose and how it ended.
#   1. ucx_perftest -t ucp_put_bw -s 2097152 from h0 to h1 over data0 (UCX picks
#      TCP: shared memory is unreachable across hosts), and for scale the same
#      with UCX's shared memory when the hosts share an IPC namespace.
#   2. how long UCX over TCP takes to notice that h1's data0 lost every packet
#      (nftables drop) or went down, for the rank in h1 and its peer in h0, with
#      and without UCP_ERR_HANDLING_MODE_PEER; a flush still pending after 35 s
#      counts as "not noticed".
#   3. kvx between the hosts against UCX itself over the same data0, side by
#      side, interleaved, 3 runs each: t_rooms with prefill:1x1 on h0 and
#      decode:1x1 on h1 moving big contiguous rooms (16 rooms of 128 MiB:
#      64 pages of 256 tokens x 8 heads x 128 x bf16, 2 layers, K and V; no
#      pattern computed or checked), pages as data messages (KVX_WRITES=message,
#      what kvx picks over TCP) and as UCX puts (KVX_WRITES=put, emulated by UCX
#      over TCP); ucx_perftest ucp_put_bw and ucp_am_bw with 2 MiB messages.
#   4. kvx's own answer to a silent network: t_partition cut (the test of
#      t_kvx_netfault.sh) with h1's data0 taken down, and with every packet
#      dropped, 3 runs each, default settings: per rank, the time from the
#      fault to the first FAILED room, locally and agreed by its instance.
#
#   mpi_tests/netns/measure.sh [BUILDDIR [SECTION...]]
#       BUILDDIR (default build) holds mpi_tests/t_ucp_put, t_rooms and
#       t_partition; SECTIONs (default: all) pick among 0-4.
set -u
H=$(cd "$(dirname "$0")" && pwd)/hosts.sh
build=${1:-build}
[ $# -gt 0 ] && shift
sections=${*:-0 1 2 3 4}
b=$(cd "$build" && pwd)
prog=$b/mpi_tests/t_ucp_put
KVXN_ID=km$$
export KVXN_ID
work=$(mktemp -d) || exit 1
trap '"$H" down; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
"$H" up 2 || exit $?

want() {
    case " $sections " in
    *" $1 "*) return 0 ;;
    esac
    return 1
}

perftest() {
    "$H" run -t 90 h1 env UCX_NET_DEVICES=data0 ucx_perftest >"$work/srv.out" 2>&1 &
    sleep 1
    "$H" run -t 90 h0 env UCX_NET_DEVICES=data0 \
        ucx_perftest h1 -t ucp_put_bw -s 2097152 -n 2000 -w 100 2>&1 | tail -4
    wait
}

want 0 && echo "# 0. per-host pieces (KVXN_SPLIT) -> mpirun status, lanes between hosts, first error"
want 0 && for sp in "uts ipc shm tmp" "uts shm tmp" "uts ipc" "ipc shm tmp" "ipc shm" "ipc tmp"; do
    KVXN_SPLIT=$sp "$H" mpirun -N 2 -t 30 "$prog" -s 1048576 -n 20 >"$work/s.out" 2>&1
    rc=$?
    printf '## %-16s rc %3d  lanes %s\n' "$sp" $rc \
        "$(sed -n 's/^rank 1 .*lanes //p' "$work/s.out")"
    grep -m1 -E 'Segmentation|unlink|ORTE_ERROR|error|FAIL' "$work/s.out" | cut -c1-110 |
        sed 's/^/     /'
done

if want 1; then
    echo "# 1. ucx_perftest -t ucp_put_bw -s 2097152 -n 2000, h0 -> h1 (OOB over ctl0)"
    echo "## over data0 (TCP), default UCX_TLS"
    perftest
    echo "## the same with the hosts in one IPC namespace (UCX uses shared memory)"
    KVXN_SPLIT="uts shm tmp" perftest
fi

# wait_file FILE PID: until FILE exists or PID ended.
wait_file() {
    while [ ! -e "$1" ] && kill -0 "$2" 2>/dev/null; do
        sleep 0.05
    done
}

# restore KIND: undoes fault KIND on h1's data0.
restore() {
    case $1 in
    drop) "$H" fault h1 undrop ;;
    link-down) "$H" fault h1 link-up ;;
    esac
}

# fault KIND PROGARGS...: puts in a loop, KIND on h1's data0, prints when each
# rank noticed, relative to the fault.
fault() {
    kind=$1
    shift
    rm -f "$work/m"
    "$H" mpirun -N 1 -t 60 "$prog" -s 1048576 -n 0 -T 45 -d 35 -m "$work/m" "$@" \
        >"$work/f.out" 2>&1 &
    pid=$!
    wait_file "$work/m" $pid
    sleep 1
    tf=$(date +%s.%N)
    "$H" fault h1 "$kind"
    wait $pid
    awk -v tf="$tf" '
        /data path failed at|error handler called at/ {
            t = $0; sub(/.* at /, "", t); t += 0
            how = $0; sub(/.*: /, "", how); r = $2; sub(/:/, "", r)
            what = /error handler/ ? "error handler: " how : how
            printf "   rank %s (h%s) after %6.2f s: %s\n", r, r, t - tf, what }' "$work/f.out"
    restore "$kind"
}

want 2 && echo "# 2. time to notice a fault of h1's data0 (rank 0 in h0, rank 1 in h1; stall = 35 s)"
want 2 && for kind in drop link-down; do
    echo "## $kind, UCP_ERR_HANDLING_MODE_PEER"
    fault $kind -p
    echo "## $kind, UCP_ERR_HANDLING_MODE_NONE"
    fault $kind
done

# ---- 3. kvx against ucx_perftest over data0 -------------------------------

# kvx_bw WRITES: MB/s (10^6 B/s) of one t_rooms run, prefill on h0, decode on h1.
kvx_bw() {
    "$H" mpirun -N 1 -t 120 -x KVX_LAYOUT=prefill:1x1,decode:1x1 -x KVX_WRITES="$1" \
        -x KVX_PEER_TIMEOUT=10s "$b/mpi_tests/t_rooms" --rooms 16 --pages 64:64 \
        --page-size 256 --head-dim 128 --kv-heads 8 --layers 2 --no-verify --contiguous \
        --concurrency 4 >"$work/kvx.out" 2>&1
    sed -n 's/^t_rooms: .* SUCCESS, .* (\([0-9.]*\) GB\/s)$/\1/p' "$work/kvx.out" |
        awk '{ printf "%.0f", $1 * 1000 } END { if (NR == 0) printf "failed" }'
}

# ucx_bw TEST: MB/s (10^6 B/s) of ucx_perftest TEST with 2 MiB messages, h0 -> h1,
# its overall bandwidth
# (ucx_perftest's own MB are 2^20 bytes).
ucx_bw() {
    "$H" run -t 120 h1 env UCX_NET_DEVICES=data0 ucx_perftest >"$work/srv.out" 2>&1 &
    sleep 1
    "$H" run -t 120 h0 env UCX_NET_DEVICES=data0 \
        ucx_perftest h1 -t "$1" -s 2097152 -n 1000 -w 50 >"$work/cli.out" 2>&1
    wait
    awk '/^Final:/ { printf "%.0f", $7 * 1.048576; ok = 1 } END { if (!ok) printf "failed" }' \
        "$work/cli.out"
}

median3() {
    echo "$@" | tr ' ' '\n' | sort -n | sed -n 2p
}

if want 3; then
    echo "# 3. h0 -> h1 over data0 (TCP), MB/s = 10^6 B/s; 3 runs each, interleaved"
    echo "## kvx: mpi_tests/t_rooms --rooms 16 --pages 64:64 --page-size 256 --head-dim 128" \
        "--kv-heads 8 --layers 2 --no-verify --contiguous --concurrency 4"
    echo "##      (KVX_LAYOUT=prefill:1x1,decode:1x1, hosts.sh mpirun -N 1; 2 GiB per run)"
    echo "## ucx_perftest h1 -t TEST -s 2097152 -n 1000 -w 50 (UCX_NET_DEVICES=data0; 2 GiB per run)"
    r1= r2= r3= r4=
    for i in 1 2 3; do
        r1="$r1 $(kvx_bw message)"
        r2="$r2 $(kvx_bw put)"
        r3="$r3 $(ucx_bw ucp_put_bw)"
        r4="$r4 $(ucx_bw ucp_am_bw)"
    done
    printf '%-44s %8s  %s\n' "# what" "median" "runs (MB/s)"
    printf '%-44s %8s  %s\n' "kvx, pages as data messages (KVX_WRITES=message)" \
        "$(median3 $r1)" "$r1"
    printf '%-44s %8s  %s\n' "kvx, pages as UCX puts (KVX_WRITES=put)" "$(median3 $r2)" "$r2"
    printf '%-44s %8s  %s\n' "ucx_perftest -t ucp_put_bw -s 2097152" "$(median3 $r3)" "$r3"
    printf '%-44s %8s  %s\n' "ucx_perftest -t ucp_am_bw -s 2097152" "$(median3 $r4)" "$r4"
fi

# ---- 4. fault -> agreed FAILED, kvx defaults -------------------------------

# cut_run KIND: one t_partition cut run with KIND on h1's data0 once rooms flow;
# prints its per-rank table.
cut_run() {
    d=$work/cut
    rm -rf "$d" && mkdir -p "$d"
    "$H" mpirun -N 2 -t 60 -x KVX_LAYOUT=prefill:1x2,decode:1x2 "$b/mpi_tests/t_partition" \
        cut "$d" >"$work/cut.out" 2>&1 &
    pid=$!
    wait_file "$d/flowing" $pid
    sleep 0.2
    t0=$(date +%s.%N)
    "$H" fault h1 "$1"
    echo "$t0 $(date +%s.%N)" >"$d/fault"
    wait $pid
    t2=$(date +%s.%N)
    grep -E '^# fault command ran|^  [0-9]' "$work/cut.out"
    # The slowest rank's fault->agreed FAILED, in ms, for the summary.
    grep -E '^  [0-9]' "$work/cut.out" |
        sed -n 's/.* \(-\{0,1\}[0-9.]*\)s *\(-\{0,1\}[0-9.]*\)s  .*/\2/p' |
        awk -v ok="$(grep -c '^PASS$' "$work/cut.out")" '
            { if ($1 > m) m = $1 } END { if (NR && ok) printf " %.0f", m * 1000 }' >>"$work/agreed.$1"
    grep 'check failed' "$work/cut.out" | sort -u | head -4
    grep -E '^(PASS|FAIL)$' "$work/cut.out" | sed "s/\$/; mpirun ended $(awk "BEGIN { printf \"%.2f\", $t2 - $t0 }") s after the fault/"
    restore "$1"
}

if want 4; then
    echo "# 4. fault of h1's data0 -> first FAILED room (fault->F) and agreed FAILED (->agreed)"
    echo "##  per rank, t_partition cut, prefill:1x2 on h0, decode:1x2 on h1, kvx defaults"
    echo "##  (KVX_PEER_TIMEOUT 1.5 s, KVX_KEEPALIVE_INTERVAL 100 ms); times from just before"
    echo "##  the fault command"
    for kind in link-down drop; do
        for i in 1 2 3; do
            echo "## $kind, run $i"
            echo "# rank host instance         waves SUCCESS FAILED in flight of them S  fault->F  ->agreed  root cause"
            cut_run $kind
        done
    done
    for kind in link-down drop; do
        echo "## $kind: slowest rank's fault -> agreed FAILED per passing run (ms):" \
            "$(cat "$work/agreed.$kind" 2>/dev/null)"
    done
fi
