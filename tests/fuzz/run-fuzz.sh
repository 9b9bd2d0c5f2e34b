#!/bin/sh
# run-fuzz.sh - fuzzes the decoders of what others send, for a bounded time:
# msg_decode() (src/core/base/msg.c), every message a peer sends, and the
# join handshake's decoders (src/core/base/join.c), what whoever connects to
# a job's rendezvous sends and what a joiner reads back.
#
# First the checked-in seeds of msg_decode (tests/fuzz/corpus/msg/) must
# still be valid messages of every type (msg_corpus check; this part needs
# no clang). Then each libFuzzer target (clang, ASan + UBSan) runs for
# KVXT_FUZZ_SECONDS seconds (default 60 for fuzz_msg, half that for
# fuzz_join), starting from its seeds (tests/fuzz/corpus/TARGET/) and the
# inputs earlier runs found (tests/fuzz/TARGET-corpus/ in the build tree).
# A crash, sanitizer report or broken property leaves its input as
# tests/fuzz/crash-* in the build tree; the log says how to replay it.
# Exit 77 (skip) when configure found no clang that links libFuzzer.
set -u
top=${top_srcdir:-$(dirname "$0")/../..}
build=${top_builddir:-.}
secs=${KVXT_FUZZ_SECONDS:-60}

"$build/tests/fuzz/msg_corpus" check "$top/tests/fuzz/corpus/msg" || exit 1
if [ ! -x "$build/tests/fuzz/fuzz_msg" ] || [ ! -x "$build/tests/fuzz/fuzz_join" ]; then
    echo "SKIP: no fuzz targets: configure found no clang that links -fsanitize=fuzzer"
    echo "      (Debian: apt-get install clang libclang-rt-14-dev, then configure again)"
    exit 77
fi

# fuzz TARGET SECONDS
fuzz() {
    fuzzer=$build/tests/fuzz/fuzz_$1
    seeds=$top/tests/fuzz/corpus/$1
    work=$build/tests/fuzz/$1-corpus
    mkdir -p "$work"
    # libFuzzer's own exit code for a finding is 77, which automake reads as
    # a skip: findings and timeouts exit 1 instead. New inputs go to $work only.
    echo "run-fuzz: $fuzzer for $2 s from $seeds and $work"
    start=$(date +%s)
    "$fuzzer" -max_total_time="$2" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
        -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
        -artifact_prefix="$build/tests/fuzz/" "$work" "$seeds" 2>&1
    rc=$?
    echo "run-fuzz: libFuzzer exited $rc after $(($(date +%s) - start)) s; $(ls "$work" | wc -l) inputs in $work"
    if [ $rc -ne 0 ]; then
        for a in "$build"/tests/fuzz/crash-* "$build"/tests/fuzz/leak-* \
            "$build"/tests/fuzz/timeout-* "$build"/tests/fuzz/oom-*; do
            [ -e "$a" ] && echo "FAIL: replay with: $fuzzer $a"
        done
        return 1
    fi
}

fuzz msg "$secs" || exit 1
fuzz join "$(((secs + 1) / 2))" || exit 1
exit 0
