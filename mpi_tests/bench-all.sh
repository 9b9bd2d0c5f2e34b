#!/bin/sh
# bench-all.sh [OUTDIR] - runs every kvx-bench subcommand as docs/perf/README.md
# records it, from the build directory: ../mpi_tests/bench-all.sh /tmp/bench
#
# Each report goes to OUTDIR/SUB.txt, its rows to OUTDIR/SUB.json and its plot
# to OUTDIR/SUB.png (when gnuplot is installed); the load average is
# printed before and after each run. One run at a time, each bounded by
# timeout (BENCH_TIMEOUT seconds, 900). Sizes are cut to what two shared
# cores finish in minutes; docs/perf/README.md records the command lines.
set -u
out=${1:-bench-results}
[ -x tools/kvx-bench ] || { echo "run from the build directory"; exit 2; }
mkdir -p "$out" || exit 1
mpirun="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && mpirun="$mpirun --allow-run-as-root"
export KVX_LOG_LEVEL=error KVX_PEER_TIMEOUT=10s
# Ranks that fit the cores are bound a core each: unbound, the kernel moves
# two spinning ranks around and a run reads anything between the modes the
# host gives (docs/perf/notes/2026-12-07-landing.md); more ranks than cores
# run unbound.
cores=$(nproc)
run() {
    sub=$1
    np=$2
    shift 2
    if [ "$np" -le "$cores" ]; then bind="--bind-to core --map-by core"; else bind="--bind-to none"; fi
    echo "== kvx-bench $sub: load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "   $mpirun $bind -np $np tools/kvx-bench $sub $* --json $out/$sub.json --plot $out/$sub.png"
    timeout -k 10 "${BENCH_TIMEOUT:-900}" $mpirun $bind -np "$np" tools/kvx-bench "$sub" "$@" --json "$out/$sub.json" --plot "$out/$sub.png" \
        > "$out/$sub.txt" 2> "$out/$sub.err"
    echo "   exit $?; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    grep -v '^# [a-z]' "$out/$sub.txt" | grep -v '^#$'
}
run put 2 --min 64k --max 64M --total 128M --reps 3
run pages 2 --rooms 8 --reps 3
run hetero 6 --rooms 8 --reps 3
run agree 16 --rooms 1,16,256,1024,4096 --reps 3
# A killed rank: the survivors go on only under --enable-recovery, and
# MPI_Finalize's fence must not wait for the dead one.
mpirun="$mpirun --enable-recovery --mca async_mpi_finalize 1"
run fault 4 --reps 5
