#!/bin/sh
# check-layers-selftest.sh - tests/check-layers.sh fails where it should:
# on a copy of src/ it must pass as it is, and fail on each planted fault
# (an upward include, a stale line of tests/layers-known.txt, a file on no
# floor, a core header named without its floor, src/util including core).
set -u
top=${top_srcdir:-$(dirname "$0")/..}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tests" || exit 99
cp -R "$top/src" "$tmp/src" || exit 99
cp "$top/tests/check-layers.sh" "$top/tests/layers-known.txt" "$tmp/tests/" || exit 99
chmod -R u+w "$tmp"
cp -R "$tmp/src" "$tmp/src.orig" || exit 99
cp "$tmp/tests/layers-known.txt" "$tmp/known.orig" || exit 99
bad=0

run() {
    top_srcdir="$tmp" sh "$tmp/tests/check-layers.sh" >"$tmp/out" 2>&1
}
restore() {
    rm -rf "$tmp/src" && cp -R "$tmp/src.orig" "$tmp/src" && cp "$tmp/known.orig" "$tmp/tests/layers-known.txt"
}
# expect WHAT PATTERN: the check fails, saying PATTERN.
expect() {
    if run; then
        echo "FAIL: $1: the check passed"
        bad=1
    elif ! grep -q -- "$2" "$tmp/out"; then
        echo "FAIL: $1: the check failed without saying '$2':"
        sed 's/^/    /' "$tmp/out"
        bad=1
    else
        echo "ok: $1: $(grep -m1 -- "$2" "$tmp/out")"
    fi
    restore
}

if ! run; then
    echo "FAIL: the check fails on the tree as it is:"
    cat "$tmp/out"
    exit 1
fi
echo "ok: the tree as it is passes"

# A base file including a room header (room is higher than base).
printf '#include "core/room/room.h"\n' >>"$tmp/src/core/base/plan.c"
expect "planted upward include" "upward include src/core/base/plan.c -> core/room/room.h"

# A line of the known list whose include is gone.
printf 'src/core/base/msg.c -> core/api/none.h  planted\n' >>"$tmp/tests/layers-known.txt"
expect "stale known line" "lists src/core/base/msg.c -> core/api/none.h, which is gone"

# An upward include the known list names passes; without its line it fails.
printf '#include "core/agree/agree.h"\n' >>"$tmp/src/core/room/room.c"
printf 'src/core/room/room.c -> core/agree/agree.h  planted\n' >>"$tmp/tests/layers-known.txt"
if run; then
    echo "ok: a listed upward include passes"
else
    echo "FAIL: a listed upward include fails the check:"
    sed 's/^/    /' "$tmp/out"
    bad=1
fi
cp "$tmp/known.orig" "$tmp/tests/layers-known.txt"
expect "known edge not listed" "upward include src/core/room/room.c -> core/agree/agree.h"

# A file directly in src/core.
printf '/* stray */\n' >"$tmp/src/core/stray.c"
expect "file on no floor" "src/core/stray.c is on no floor"

# A core header named without its floor.
printf '#include "room.h"\n' >>"$tmp/src/core/room/sender.c"
expect "include without floor" 'src/core/room/sender.c includes "room.h"'

# The layers outside src/core: src/util must not include core.
printf '#include "core/ctx/ctx.h"\n' >>"$tmp/src/util/hmap.c"
expect "util includes core" "src/util/hmap.c includes a higher layer"

[ $bad -eq 0 ] && echo "ok: tests/check-layers.sh fails on each planted violation"
exit $bad
