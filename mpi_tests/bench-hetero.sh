#!/bin/sh
# bench-hetero.sh [N] - throughput at equal bytes of TP 1->1, 2->1 and 1->2,
# interleaved, N times (default 5), every page layout; from the build
# directory: ../mpi_tests/bench-hetero.sh 5
#
# Each job moves 200 rooms of 1024 tokens x 4 layers x K,V x 8 KV heads x
# 128 x bf16 = 3.36 GB over consecutive pages, without computing or checking
# the pattern (t_rooms --no-verify), through mpi_tests/run-mpi.sh. Prints
# every job's GB/s, then the median and range per ratio and layout.
set -u
n=${1:-5}
[ -x mpi_tests/run-mpi.sh ] || [ -r mpi_tests/run-mpi.sh ] || { echo "run from the build directory"; exit 2; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
args="--rooms 200 --pages 64:64 --chunks 1 --concurrency 8 --layers 4 --page-size 16"
args="$args --kv-heads 8 --head-dim 128 --contiguous --no-verify --page-layout hnd,nhd,head"
for rep in $(seq "$n"); do
    for pd in 1:1 2:1 1:2; do
        p=${pd%:*} d=${pd#*:}
        cat > "$tmp/bench.mpi" <<CASE
np $((p + d))
timeout 300
env KVX_LAYOUT=prefill:1x$p,decode:1x$d
env KVX_PEER_TIMEOUT=10s
run mpi_tests/t_rooms $args
CASE
        sh mpi_tests/run-mpi.sh "$tmp/bench.mpi" 2>&1 | grep 'GB/s)' | sed "s/^/$p->$d /" |
            tee -a "$tmp/out"
    done
done
echo "# GB/s, median (range) of $n; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '{ g = $(NF - 1); gsub(/\(/, "", g); print $1, $3, g }' "$tmp/out" | sort -k1,2 -k3n |
    awk '{ k = $1 " " $2; v[k] = v[k] " " $3; c[k]++ }
         END { for (k in v) { split(substr(v[k], 2), a, " "); m = a[int((c[k] + 1) / 2)];
               printf "%-6s %-12s %6s (%s-%s)\n", substr(k, 1, index(k, " ") - 1),
                      substr(k, index(k, " ") + 1), m, a[1], a[c[k]] } }' | sort
