#!/bin/sh
# check-getenv.sh - no code outside the configuration module reads KVX_*
# variables: every KVX_* variable is a row of src/util/cfg.c's table, so
# kvx-info -c lists them all and a misspelling is warned about.
#
# Fails on any getenv()/secure_getenv() whose argument is a "KVX_..." literal
# or is not a literal at all (a computed name could be a KVX_ one), in C
# sources outside src/util/cfg.c.
set -u
top=${top_srcdir:-$(dirname "$0")/..}
cd "$top" || exit 99
bad=$(grep -rnE '(secure_)?getenv[[:space:]]*\(' --include='*.c' --include='*.h' \
          src tools examples mpi_tests tests 2>/dev/null |
      grep -v '^src/util/cfg\.c:' |
      grep -E 'getenv[[:space:]]*\([[:space:]]*("KVX_|[^"[:space:]])')
if [ -n "$bad" ]; then
    echo "KVX_* variables (or computed names) read outside src/util/cfg.c:"
    echo "$bad"
    exit 1
fi
n=$(grep -c '^    { "KVX_' src/util/cfg.c)
echo "ok: only src/util/cfg.c reads KVX_* variables ($n rows in its table)"
exit 0
