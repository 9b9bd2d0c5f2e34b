#!/bin/sh
# run-fuzz.sh - fuzzes msg_decode() (src/core/base/msg.c), the decoder of every
# message a peer sends, for a bounded time.
#
# First the checked-in seeds (tests/fuzz/corpus/msg/) must still be valid
# messages of every type (msg_corpus check; this part needs no clang). Then
# the libFuzzer target tests/fuzz/fuzz_msg (clang, ASan + UBSan) runs for
# KVXT_FUZZ_SECONDS seconds (default 60), starting from those seeds and the
# inputs earlier runs found (tests/fuzz/msg-corpus/ in the build tree).
# A crash, sanitizer report or broken property leaves its input as
# tests/fuzz/crash-* in the build tree; the log says how to replay it.
# Exit 77 (skip) when configure found no clang that links libFuzzer.
set -u
top=${top_srcdir:-$(dirname "$0")/../..}
build=${top_builddir:-.}
seeds=$top/tests/fuzz/corpus/msg
secs=${KVXT_FUZZ_SECONDS:-60}

"$build/tests/fuzz/msg_corpus" check "$seeds" || exit 1
fuzzer=$build/tests/fuzz/fuzz_msg
if [ ! -x "$fuzzer" ]; then
    echo "SKIP: no fuzz target: configure found no clang that links -fsanitize=fuzzer"
    echo "      (Debian: apt-get install clang libclang-rt-14-dev, then configure again)"
    exit 77
fi
work=$build/tests/fuzz/msg-corpus
mkdir -p "$work"
# libFuzzer's own exit code for a finding is 77, which automake reads as
# a skip: findings and timeouts exit 1 instead. New inputs go to $work only.
echo "run-fuzz: $fuzzer for $secs s from $seeds and $work"
start=$(date +%s)
"$fuzzer" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
    -artifact_prefix="$build/tests/fuzz/" "$work" "$seeds" 2>&1
rc=$?
echo "run-fuzz: libFuzzer exited $rc after $(($(date +%s) - start)) s; $(ls "$work" | wc -l) inputs in $work"
if [ $rc -ne 0 ]; then
    for a in "$build"/tests/fuzz/crash-* "$build"/tests/fuzz/leak-* "$build"/tests/fuzz/timeout-* \
        "$build"/tests/fuzz/oom-*; do
        [ -e "$a" ] && echo "FAIL: replay with: $fuzzer $a"
    done
    exit 1
fi
exit 0
