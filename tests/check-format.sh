#!/bin/sh
# check-format.sh - every C file is formatted with the checked-in .clang-format.
# clang-format versions format differently, so this runs only with the
# version the tree was formatted with (Debian 12's clang-format 14).
set -u
top=${top_srcdir:-$(dirname "$0")/..}
cd "$top" || exit 99
if ! command -v clang-format >/dev/null 2>&1; then
    echo "SKIP: clang-format is not installed"
    exit 77
fi
if ! clang-format --version | grep -q 'version 14\.'; then
    echo "SKIP: clang-format is not version 14 ($(clang-format --version))"
    exit 77
fi
files=$(find src include tools examples mpi_tests tests python -name '*.[ch]' 2>/dev/null | sort)
bad=0
for f in $files; do
    if ! clang-format --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (run: make format)"
        bad=1
    fi
done
[ $bad -eq 0 ] && echo "ok: $(echo "$files" | wc -w) files formatted"
exit $bad
