#!/bin/sh
# memcheck-unit.sh - every criterion unit test binary under valgrind's
# memcheck: no invalid access, no use of uninitialised memory, no definite
# or indirect leak (tests/supp/valgrind.supp names the foreign libraries'
# own). KVXT_MEMCHECK_JOBS binaries at a time (default: the cores), each
# bounded by KVXT_MEMCHECK_TIMEOUT seconds (default 300); about 2 minutes
# on 2 cores. The binaries come from KVXT_UNIT_TESTS (set by Makefile.am);
# skipped (77) without valgrind or criterion.
set -u
top=${top_srcdir:-$(dirname "$0")/..}
build=${top_builddir:-.}
. "$top/tests/memcheck.sh"

if [ -z "${KVXT_UNIT_TESTS:-}" ]; then
    echo "SKIP: no unit tests were built (criterion is missing)"
    exit 77
fi
memcheck_init unit

# Runs one binary; leaves its exit status and duration in NAME.result.
memcheck_one() {
    name=$(basename "$1")
    start=$(date +%s)
    KVXT_MEMCHECK_TAG=$name timeout -k 10 "${KVXT_MEMCHECK_TIMEOUT:-300}" \
        $memcheck_cmd "$build/$1" --ascii >"$memcheck_logs/$name.out" 2>&1
    echo "$? $(($(date +%s) - start))" >"$memcheck_logs/$name.result"
}

jobs=${KVXT_MEMCHECK_JOBS:-$(nproc)}
n=0
for t in $KVXT_UNIT_TESTS; do
    memcheck_one "$t" &
    n=$((n + 1))
    [ $((n % jobs)) -eq 0 ] && wait
done
wait
rc=0
for t in $KVXT_UNIT_TESTS; do
    name=$(basename "$t")
    read -r st secs <"$memcheck_logs/$name.result"
    echo "memcheck-unit: $name exited $st after $secs s"
    if [ "$st" -ne 0 ]; then
        echo "FAIL: $name failed under valgrind:"
        tail -20 "$memcheck_logs/$name.out" | sed 's/^/    | /'
        rc=1
    fi
done
memcheck_verdict || rc=1
exit $rc
