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
#
#   mpi_tests/netns/measure.sh [BUILDDIR]     (BUILDDIR holds mpi_tests/t_ucp_put)
set -u
H=$(cd "$(dirname "$0")" && pwd)/hosts.sh
build=${1:-build}
prog=$(cd "$build" && pwd)/mpi_tests/t_ucp_put
KVXN_ID=km$$
export KVXN_ID
work=$(mktemp -d) || exit 1
trap '"$H" down; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
"$H" up 2 || exit $?

perftest() {
    "$H" run -t 90 h1 env UCX_NET_DEVICES=data0 ucx_perftest >"$work/srv.out" 2>&1 &
    sleep 1
    "$H" run -t 90 h0 env UCX_NET_DEVICES=data0 \
        ucx_perftest h1 -t ucp_put_bw -s 2097152 -n 2000 -w 100 2>&1 | tail -4
    wait
}

echo "# 0. per-host pieces (KVXN_SPLIT) -> mpirun status, lanes between hosts, first error"
for sp in "uts ipc shm tmp" "uts shm tmp" "uts ipc" "ipc shm tmp" "ipc shm" "ipc tmp"; do
    KVXN_SPLIT=$sp "$H" mpirun -N 2 -t 30 "$prog" -s 1048576 -n 20 >"$work/s.out" 2>&1
    rc=$?
    printf '## %-16s rc %3d  lanes %s\n' "$sp" $rc \
        "$(sed -n 's/^rank 1 .*lanes //p' "$work/s.out")"
    grep -m1 -E 'Segmentation|unlink|ORTE_ERROR|error|FAIL' "$work/s.out" | cut -c1-110 |
        sed 's/^/     /'
done

echo "# 1. ucx_perftest -t ucp_put_bw -s 2097152 -n 2000, h0 -> h1 (OOB over ctl0)"
echo "## over data0 (TCP), default UCX_TLS"
perftest
echo "## the same with the hosts in one IPC namespace (UCX uses shared memory)"
KVXN_SPLIT="uts shm tmp" perftest

# fault KIND PROGARGS...: puts in a loop, KIND on h1's data0, prints when each
# rank noticed, relative to the fault.
fault() {
    kind=$1
    shift
    rm -f "$work/m"
    "$H" mpirun -N 1 -t 60 "$prog" -s 1048576 -n 0 -T 45 -d 35 -m "$work/m" "$@" \
        >"$work/f.out" 2>&1 &
    pid=$!
    while [ ! -e "$work/m" ] && kill -0 $pid 2>/dev/null; do
        sleep 0.1
    done
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
    case $kind in
    drop) "$H" fault h1 undrop ;;
    link-down) "$H" fault h1 link-up ;;
    esac
}

echo "# 2. time to notice a fault of h1's data0 (rank 0 in h0, rank 1 in h1; stall = 35 s)"
for kind in drop link-down; do
    echo "## $kind, UCP_ERR_HANDLING_MODE_PEER"
    fault $kind -p
    echo "## $kind, UCP_ERR_HANDLING_MODE_NONE"
    fault $kind
done
