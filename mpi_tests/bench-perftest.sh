#!/bin/sh
# bench-perftest.sh [OUTDIR] - kvx moving 1 GiB in 2 MiB contiguous runs next to
# ucx_perftest -t ucp_put_bw -s 2097152 -n 512 between two processes of this
# host, one right after the other, on shared memory (UCX's default transports)
# and on TCP over loopback (UCX_TLS=tcp,self UCX_NET_DEVICES=lo). Run from the
# build directory: ../mpi_tests/bench-perftest.sh /tmp/perftest
#
# kvx-bench put --min 4M --max 4M --total 1G: 256 rooms of one layer's K and
# V, 2 MiB each, so 512 puts of 2 MiB (the same bytes and put size as the
# perftest's 512 iterations of 2 MiB); the kvx clock stops when the decode
# sees its last room SUCCESS. ucx_perftest prints MB/s with MB = 2^20 bytes;
# the summary converts it to GB/s (10^9). The load average is printed before
# every measurement; over TCP kvx-bench measures one repetition (1 GiB each
# for kvx and the raw baseline); perftest runs with the UCX defaults (v1 protocols on UCX
# 1.13) and, as kvx sets them, with UCX_PROTO_ENABLE=y. On shared memory kvx
# runs twice: with its default pool (page-aligned memory of the process) and
# with KVX_POOL_ALLOC=ucx (memory UCX allocates, as perftest's buffers).
set -u
out=${1:-perftest-results}
[ -x tools/kvx-bench ] || { echo "run from the build directory"; exit 2; }
command -v ucx_perftest >/dev/null || { echo "ucx_perftest is not installed (ucx-utils)"; exit 2; }
mkdir -p "$out" || exit 1
mpirun="mpirun --bind-to none --oversubscribe"
[ "$(id -u)" = 0 ] && mpirun="$mpirun --allow-run-as-root"
export KVX_LOG_LEVEL=error
port=$((20000 + $$ % 20000))
load() { cut -d' ' -f1-3 /proc/loadavg; }

kvx() { # NAME REPS ENV...
    name=$1
    reps=$2
    shift 2
    echo "== $(date -u +%T) load $(load): $* kvx-bench put --min 4M --max 4M --total 1G --reps $reps"
    env "$@" timeout 300 $mpirun -np 2 $(for v in "$@"; do printf -- '-x %s ' "${v%%=*}"; done) \
        tools/kvx-bench put --min 4M --max 4M --total 1G --reps "$reps" \
        --json "$out/$name.json" > "$out/$name.txt" 2>&1
    echo "   exit $?"
    grep -E '^ +[0-9]|UCX transports' "$out/$name.txt"
}

perftest() { # NAME ENV...
    name=$1
    shift
    port=$((port + 1))
    echo "== $(date -u +%T) load $(load): $* ucx_perftest -t ucp_put_bw -s 2097152 -n 512"
    env "$@" timeout 60 ucx_perftest -p $port -t ucp_put_bw -s 2097152 -n 512 \
        > "$out/$name.server.txt" 2>&1 &
    sleep 1
    env "$@" timeout 60 ucx_perftest -p $port localhost -t ucp_put_bw -s 2097152 -n 512 \
        > "$out/$name.txt" 2>&1
    echo "   exit $?"
    wait
    awk '/^Final:/ { printf "   Final: %s MB/s (2^20) = %.3f GB/s\n", $7, $7 * 1048576 / 1e9 }' \
        "$out/$name.txt"
}

kvx kvx-shm 3
kvx kvx-shm-ucxpool 3 KVX_POOL_ALLOC=ucx
perftest perftest-shm
perftest perftest-shm-v2 UCX_PROTO_ENABLE=y
kvx kvx-tcp 1 UCX_TLS=tcp,self UCX_NET_DEVICES=lo
perftest perftest-tcp UCX_TLS=tcp,self UCX_NET_DEVICES=lo
perftest perftest-tcp-v2 UCX_TLS=tcp,self UCX_NET_DEVICES=lo UCX_PROTO_ENABLE=y
echo "== $(date -u +%T) load $(load): done"
