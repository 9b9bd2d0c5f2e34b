#!/bin/sh
# mpi_tests/gpu/run.sh OUTDIR - the CUDA check of issue 12, prepared for a
# machine with a GPU: builds kvx, runs the CUDA tests and a short CUDA
# bandwidth benchmark, and writes every log into OUTDIR, all in under 5
# minutes (each step gets what is left of KVXGPU_BUDGET seconds, default 280).
#
#   OUTDIR/summary.txt   one line per step, the verdict last (also printed)
#   OUTDIR/env.txt       GPU, driver, topology, UCX and its CUDA support
#   OUTDIR/build.log     configure and make
#   OUTDIR/info.txt      kvx-info -v -p: versions, the memory path and why
#   OUTDIR/tests.log     make check of the CUDA tests; OUTDIR/tests/*.log each case
#   OUTDIR/bench.txt     GB/s of host and CUDA pools, TP 1->1 and 1->2
#
# Steps: build in KVXGPU_BUILD (default build-gpu in the tree; an existing
# one is only remade) with --enable-werror and --with-cuda=$CUDA_HOME
# (default /usr/local/cuda); run tests/test_copier and every CUDA case
# (cuda_* on the GPU, cuda_fake_*, *_cuda_fake* and badinput_events on the
# stand-in runtime, host_staged_*);
# then t_rooms --no-verify (200 rooms of 64 contiguous pages, 16.8 MB each:
# 3.4 GB per run) with host pools (direct, then KVX_MEM_PATH=staged) and CUDA
# pools (the path UCX allows, then KVX_MEM_PATH=staged).
#
# Exit: 0 everything ran on a GPU and passed; 77 no usable GPU here (the
# CUDA cases skipped: the reason is in the summary), the rest passed;
# 1 a build step or a test failed, or time ran out.
set -u

out=${1:?usage: mpi_tests/gpu/run.sh OUTDIR}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${KVXGPU_BUILD:-$src/build-gpu}
cuda=${CUDA_HOME:-/usr/local/cuda}
budget=${KVXGPU_BUDGET:-280}
start=$(date +%s)
jobs=$(nproc 2>/dev/null || echo 2)
failed=0
: >"$out/summary.txt"

say() {
    echo "$*" | tee -a "$out/summary.txt"
}

# Seconds left of the budget, at most $1.
left() {
    l=$((budget - ($(date +%s) - start)))
    [ "$l" -gt "$1" ] && l=$1
    echo "$l"
}

# Every process below $1, parents first.
descendants() {
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$c"
        descendants "$c"
    done
}

# Ends $1 and every process below it: TERM (run-mpi.sh cleans up), then KILL.
kill_tree() {
    pids="$1 $(descendants "$1")"
    kill -TERM $pids 2>/dev/null
    sleep 3
    kill -KILL $pids 2>/dev/null
}

# bounded LIMIT LOG COMMAND...: runs COMMAND, output appended to LOG; after
# LIMIT seconds it and everything it started (make's sub-makes, mpirun and
# its ranks, which timeout(1) alone would leave behind) are ended, and the
# status is 124.
bounded() {
    b_limit=$1 b_log=$2
    shift 2
    "$@" >>"$b_log" 2>&1 &
    b_pid=$!
    rm -f "$out/.timed-out"
    (sleep "$b_limit" && : >"$out/.timed-out" && kill_tree "$b_pid") &
    b_watch=$!
    wait "$b_pid"
    b_rc=$?
    kill $(descendants "$b_watch") "$b_watch" 2>/dev/null
    wait "$b_watch" 2>/dev/null
    if [ -f "$out/.timed-out" ]; then
        rm -f "$out/.timed-out"
        return 124
    fi
    return "$b_rc"
}

# step NAME LIMIT LOG COMMAND...: runs COMMAND bounded by LIMIT and the budget.
step() {
    name=$1 limit=$(left "$2") log=$3
    shift 3
    if [ "$limit" -lt 5 ]; then
        say "$name: not run, the ${budget} s budget is spent"
        failed=1
        return 1
    fi
    t0=$(date +%s)
    bounded "$limit" "$log" "$@"
    rc=$?
    t=$(($(date +%s) - t0))
    if [ "$rc" -eq 124 ]; then
        say "$name: TIMEOUT after $t s (limit $limit s), see $(basename "$log")"
        failed=1
    elif [ "$rc" -ne 0 ]; then
        say "$name: FAILED (exit $rc) after $t s, see $(basename "$log")"
        failed=1
    else
        say "$name: ok in $t s"
    fi
    return "$rc"
}

say "kvx GPU run: $(date -u '+%Y-%m-%dT%H:%M:%SZ') on $(hostname), tree $src, build $build"

# ---- the machine ------------------------------------------------------------
{
    echo "# uname"; uname -a
    echo "# cores: $jobs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# git"; git -C "$src" log --oneline -1 2>/dev/null
    echo "# nvidia-smi -L"; nvidia-smi -L 2>&1
    echo "# nvidia-smi"; nvidia-smi 2>&1
    echo "# nvidia-smi topo -m"; nvidia-smi topo -m 2>&1
    echo "# CUDA toolkit $cuda"; ls "$cuda"/lib64/libcudart.so* "$cuda"/lib/libcudart.so* 2>&1
    echo "# ucx_info -v"; ucx_info -v 2>&1
    echo "# UCX transports and memory types (cuda, cuda_copy, cuda_ipc, gdr_copy)"
    ucx_info -d 2>&1 | grep -Ei 'transport|memory types|cuda|gdr' | sort | uniq -c
} >"$out/env.txt" 2>&1
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>&1 | head -n 8)
    say "GPUs: ${gpus:-none listed by nvidia-smi}"
else
    say "GPUs: no nvidia-smi on this machine"
fi

# ---- build --------------------------------------------------------------------
# The build's commands, kept in OUTDIR (an existing build is only remade).
cat >"$out/build.sh" <<EOF
set -ex
cd "$src"
[ -x configure ] || autoreconf -fi
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$src/configure" --enable-werror --with-cuda="$cuda"
make -j$jobs
make -j$jobs check TESTS=
EOF
if ! step build 200 "$out/build.log" sh "$out/build.sh"; then
    say "verdict: FAIL (the build failed; nothing was tested)"
    exit 1
fi
cd "$build" || exit 1
grep -h -m 1 '^  CUDA  *: ' "$out/build.log" config.log 2>/dev/null | head -n 1 |
    sed 's/^  CUDA  *: /CUDA build: /' | while IFS= read -r l; do say "$l"; done

# ---- what kvx sees ------------------------------------------------------------
tools/kvx-info -v -p >"$out/info.txt" 2>&1
tools/kvx-topo >>"$out/info.txt" 2>&1
sed -n 's/^path   /path: /p' "$out/info.txt" | while IFS= read -r l; do say "$l"; done

# ---- tests --------------------------------------------------------------------
cases=$(cd "$src" && ls mpi_tests/cases/cuda_*.mpi mpi_tests/cases/*_cuda_fake*.mpi \
    mpi_tests/cases/badinput_events.mpi mpi_tests/cases/host_staged_*.mpi | tr '\n' ' ')
# tests/test_copier needs criterion: built by the build step when found.
unit=
[ -x tests/test_copier ] && unit=tests/test_copier
[ -n "$unit" ] || say "tests: no criterion here, tests/test_copier is not built"
step tests 150 "$out/tests.log" make -j"$(((jobs + 1) / 2))" check TESTS="$unit $cases"
mkdir -p "$out/tests"
for f in tests/test_copier.log $(echo "$cases" | sed 's/\.mpi/.log/g'); do
    [ -f "$f" ] && cp "$f" "$out/tests/"
done
grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):' "$out/tests.log" | sort >"$out/tests/results.txt"
say "results: $(cut -d: -f1 "$out/tests/results.txt" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
nogpu=
if grep -q '^SKIP: mpi_tests/cases/cuda_rooms.mpi' "$out/tests/results.txt"; then
    nogpu=$(grep -h -m 1 '^SKIP: t_rooms' "$out/tests/cuda_rooms.log" 2>/dev/null |
        sed 's/^SKIP: t_rooms: //')
    say "no usable GPU: ${nogpu:-see tests/cuda_rooms.log}"
fi

# ---- bandwidth ----------------------------------------------------------------
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
args="--rooms 200 --pages 64:64 --chunks 1 --concurrency 8 --layers 4 --page-size 16"
args="$args --kv-heads 8 --head-dim 128 --contiguous --no-verify --page-layout hnd"
: >"$out/bench.txt"
echo "# t_rooms $args; GB/s of bytes the prefill ranks sent" >>"$out/bench.txt"
for run in "host direct|" "host staged|KVX_MEM_PATH=staged" "cuda auto|" \
    "cuda staged|KVX_MEM_PATH=staged"; do
    what=${run%%|*} env=${run#*|}
    mem=${what%% *}
    for pd in 1:1 1:2; do
        p=${pd%:*} d=${pd#*:}
        {
            echo "np $((p + d))"
            echo "timeout 60"
            echo "env KVX_LAYOUT=prefill:1x$p,decode:1x$d KVX_PEER_TIMEOUT=10s $env"
            echo "run mpi_tests/t_rooms $args --mem $mem"
        } >"$tmp/bench.mpi"
        log="$out/bench-$(echo "$what" | tr ' ' '-')-$p-$d.log"
        if [ "$(left 60)" -lt 10 ]; then
            echo "$what $p->$d: not run, the budget is spent" | tee -a "$out/bench.txt"
            continue
        fi
        : >"$log"
        bounded "$(left 70)" "$log" sh mpi_tests/run-mpi.sh "$tmp/bench.mpi"
        rc=$?
        [ "$rc" -eq 124 ] && echo "run.sh: ended after the time left of the budget" >>"$log"
        gbs=$(sed -n 's/.*(\([0-9.]*\) GB\/s)$/\1/p' "$log" | head -n 1)
        pth=$(sed -n 's/^t_rooms: memory path \([a-z]*\):.*/\1/p' "$log" | head -n 1)
        if [ "$rc" -eq 77 ]; then
            line="skipped: $(grep -m 1 '^SKIP: t_rooms' "$log" | sed 's/^SKIP: t_rooms: //')"
        elif [ "$rc" -ne 0 ] || [ -z "$gbs" ]; then
            line="FAILED (exit $rc), see $(basename "$log")"
            failed=1
        else
            line="$gbs GB/s${pth:+ (path $pth)}"
        fi
        printf '%-12s %s  %s\n' "$what" "$p->$d" "$line" | tee -a "$out/bench.txt"
    done
done
say "bench: $(grep -c '[0-9] GB/s' "$out/bench.txt") of 8 runs measured, in bench.txt"
say "time: $(($(date +%s) - start)) s of the ${budget} s budget"

if [ "$failed" -ne 0 ]; then
    say "verdict: FAIL"
    exit 1
fi
if [ -n "$nogpu" ] || grep -q '^SKIP: mpi_tests/cases/cuda_rooms.mpi' "$out/tests/results.txt"; then
    say "verdict: NO GPU (exit 77): the CUDA cases skipped; everything else passed"
    exit 77
fi
say "verdict: PASS"
exit 0
