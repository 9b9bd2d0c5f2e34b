#!/bin/sh
# memcheck.sh - what tests/memcheck-unit.sh and mpi_tests/memcheck.sh share:
# sourced, it defines
#   memcheck_init NAME   skips (77) without valgrind; sets $memcheck_logs
#                        (a fresh directory in the build tree) and
#                        $memcheck_cmd (valgrind and kvx's options; every
#                        process writes $memcheck_logs/TAG.vg.PID, TAG
#                        being $KVXT_MEMCHECK_TAG, NAME by default)
#   memcheck_verdict     prints each process's error summary; fails (1) if
#                        any process had an error that no suppression in
#                        tests/supp/valgrind.supp covers, or wrote no summary
# Leaks count as errors when definite or indirect; --trace-children follows
# criterion's test workers, which it starts by exec.
memcheck_init() {
    memcheck_name=$1
    if [ -n "${KVXT_MEMCHECK_SKIP:-}" ]; then
        echo "SKIP: valgrind cannot run the binaries of a $KVXT_MEMCHECK_SKIP"
        exit 77
    fi
    vg=${VALGRIND:-$(command -v valgrind)}
    if [ -z "$vg" ] || [ ! -x "$vg" ]; then
        echo "SKIP: valgrind is not installed (Debian: apt-get install valgrind)"
        exit 77
    fi
    memcheck_logs=${top_builddir:-.}/memcheck-logs/$memcheck_name
    rm -rf "$memcheck_logs"
    mkdir -p "$memcheck_logs" || exit 99
    memcheck_cmd="$vg --tool=memcheck --trace-children=yes --child-silent-after-fork=yes \
--leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
--num-callers=40 --suppressions=${top_srcdir:-.}/tests/supp/valgrind.supp \
--log-file=$memcheck_logs/%q{KVXT_MEMCHECK_TAG}.vg.%p"
    KVXT_MEMCHECK_TAG=$memcheck_name
    export KVXT_MEMCHECK_TAG
}

memcheck_verdict() {
    n=0
    bad=0
    for log in "$memcheck_logs"/*.vg.*; do
        [ -f "$log" ] || continue
        n=$((n + 1))
        summary=$(grep 'ERROR SUMMARY:' "$log" | tail -1)
        case $summary in
        *"ERROR SUMMARY: 0 errors"*) ;;
        "")
            echo "memcheck: $log has no error summary (the process died?):"
            sed 's/^/    | /' "$log"
            bad=1
            ;;
        *)
            echo "memcheck: errors in $log:"
            sed 's/^/    | /' "$log"
            bad=1
            ;;
        esac
    done
    echo "memcheck: $memcheck_name: $n processes checked, logs in $memcheck_logs"
    return $bad
}
