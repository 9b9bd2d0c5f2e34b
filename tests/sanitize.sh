#!/bin/sh
# sanitize.sh [asan] [tsan] - kvx built with sanitizers, each in its own
# build tree beside build/ (build-asan/, build-tsan/), and its tests run
# there. Both by default; launch/quickstart.sh check runs it after make check.
#
#   asan  --enable-asan: AddressSanitizer, LeakSanitizer and UBSan over
#         every unit test and every multi-rank case (SANITIZE_ASAN_TESTS)
#   tsan  --enable-tsan: ThreadSanitizer over the multi-rank cases, where
#         the progress thread runs against the application's API calls
#         (SANITIZE_TSAN_TESTS). The unit tests are single-threaded, and
#         criterion cannot start under TSan (its shared arena wants an
#         address TSan reserves).
#
# Every process (criterion workers, MPI ranks) writes its reports to
# BUILD/sanitizer-reports/; a report fails the run even when its test
# passed (a leak found in a criterion worker does not change its exit
# status). Suppressions, for foreign libraries only, each saying why:
# tests/supp/lsan.supp and tests/supp/tsan.supp. Cases expected to fail
# under a sanitizer (an open finding only it sees) are named by
# SANITIZE_ASAN_XFAIL and SANITIZE_TSAN_XFAIL in Makefile.am; such a case
# keeps its reports in its own directory. About 2 minutes each on
# 2 cores. KVX_SANITIZE_CONFIGURE adds configure flags; KVX_SANITIZE_JOBS
# sets make's -j for the build and the tests (default: the cores).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
kinds=${*:-asan tsan}
jobs=${KVX_SANITIZE_JOBS:-$(nproc)}

# Runs one kind; returns non-zero when a test failed or anything reported.
sanitize_one() {
    kind=$1
    dir=$top/build-$kind
    reports=$dir/sanitizer-reports
    start=$(date +%s)
    mkdir -p "$dir" && cd "$dir" || return 1
    if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
        # shellcheck disable=SC2086
        "$top/configure" --enable-"$kind" --enable-werror ${KVX_SANITIZE_CONFIGURE:-} \
            >configure.out 2>&1 || {
            tail -30 configure.out
            return 1
        }
    fi
    make -j"$jobs" >make.out 2>&1 || {
        tail -30 make.out
        return 1
    }
    rm -rf "$reports"
    mkdir -p "$reports"
    # Sanitized ranks are slower: a peer is lost only after 10 s of silence.
    KVX_PEER_TIMEOUT=${KVX_PEER_TIMEOUT:-10s}
    # and every case gets three times its bound; the soak (agree_soak.mpi)
    # runs 5,000 rooms instead of 20,000 (its 2-minute bound is the plain
    # build's), and t_rooms at most 40 rooms per page layout (the six-rank
    # heterogeneous TP cases ran 500 for 2-7 minutes under TSan on a loaded
    # CI machine, and at 100 the sanitizer runs took 8-10 minutes each here;
    # a sanitizer finds what the paths do, not the volume: 40 rooms of 1..64
    # pages in 1..8 chunks walk every one).
    KVXT_TIMEOUT_SCALE=${KVXT_TIMEOUT_SCALE:-3}
    KVXT_SOAK_ROOMS=${KVXT_SOAK_ROOMS:-5000}
    KVXT_ROOMS_MAX=${KVXT_ROOMS_MAX:-40}
    export KVX_PEER_TIMEOUT KVXT_TIMEOUT_SCALE KVXT_SOAK_ROOMS KVXT_ROOMS_MAX
    case $kind in
    asan)
        # fast_unwind_on_malloc=0: full allocation stacks, so that the LSan
        # suppressions can name Open MPI's and hwloc's functions behind
        # frames of plugins that are unloaded before the leak check.
        ASAN_OPTIONS="log_path=$reports/asan:fast_unwind_on_malloc=0:malloc_context_size=40"
        ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
        # intercept_tls_get_addr=0: GCC 12's runtime (as LLVM's up to 16)
        # takes a dynamic TLS block whose address is 16 past a page
        # boundary for a glibc 2.19 block with a header, reads a start and
        # a size from the two words before it, and LeakSanitizer's tracer
        # then dies scanning that range at exit ("Tracer caught signal 11",
        # no leak named): a malloc'd block lands there by chance, so it
        # reads as a flake (CI once, in cuda_fake_msgs, whose stand-in CUDA
        # runtime and Open MPI's plugins are dlopen'ed libraries with TLS).
        # Without the interceptor no dynamic TLS range is guessed; the
        # blocks are still reached through each thread's DTV.
        ASAN_OPTIONS="$ASAN_OPTIONS:intercept_tls_get_addr=0"
        LSAN_OPTIONS="suppressions=$top/tests/supp/lsan.supp:print_suppressions=0"
        UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
        # Cases that kill a rank add tests/supp/lsan-deadpeer.supp (it says
        # why) through KVXT_LSAN_DEADPEER.
        cat "$top/tests/supp/lsan.supp" "$top/tests/supp/lsan-deadpeer.supp" \
            >"$dir/lsan-deadpeer.supp"
        KVXT_LSAN_DEADPEER="suppressions=$dir/lsan-deadpeer.supp:print_suppressions=0"
        export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS KVXT_LSAN_DEADPEER
        tests='$(SANITIZE_ASAN_TESTS)'
        xfail='$(SANITIZE_ASAN_XFAIL)'
        ;;
    tsan)
        TSAN_OPTIONS="log_path=$reports/tsan:suppressions=$top/tests/supp/tsan.supp"
        TSAN_OPTIONS="$TSAN_OPTIONS:second_deadlock_stack=1"
        # UCX's memory hooks (ucm) patch mmap/munmap/brk under TSan's own
        # interceptors and the ranks crash in UCX's init: kvx needs no
        # memory events (they keep UCX's registration cache coherent).
        UCX_MEM_EVENTS=no
        export TSAN_OPTIONS UCX_MEM_EVENTS
        tests='$(SANITIZE_TSAN_TESTS)'
        xfail='$(SANITIZE_TSAN_XFAIL)'
        ;;
    esac
    make -j"$jobs" check TESTS="$tests" XFAIL_TESTS="$xfail" >check.out 2>&1
    rc=$?
    grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):' check.out | sed "s/^/sanitize: $kind: /"
    if [ $rc -ne 0 ]; then
        echo "sanitize: $kind: a test failed (logs in $dir, summary in $dir/test-suite.log)"
    fi
    for r in "$reports"/*; do
        [ -f "$r" ] || continue
        echo "sanitize: $kind: report $r:"
        head -80 "$r" | sed 's/^/    | /'
        rc=1
    done
    echo "sanitize: $kind: $([ $rc -eq 0 ] && echo clean || echo FAILED) after $(($(date +%s) - start)) s"
    return $rc
}

status=0
for kind in $kinds; do
    case $kind in
    asan | tsan) (sanitize_one "$kind") || status=1 ;;
    *)
        echo "usage: $0 [asan] [tsan]" >&2
        exit 2
        ;;
    esac
done
exit $status
