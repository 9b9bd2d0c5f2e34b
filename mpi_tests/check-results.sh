#!/bin/sh
# check-results.sh N - the post step of tests whose ranks cannot meet at the
# end (a rank was killed): N survivors must each have written an OK result.
set -u
want=${1:?usage: check-results.sh SURVIVORS}
n=0
for f in "$KVXT_OUT"/result.*; do
    [ -f "$f" ] || continue
    cat "$f"
    grep -q '^OK ' "$f" && n=$((n + 1))
done
if [ "$n" -ne "$want" ]; then
    echo "FAIL: $n of $want survivors reported OK"
    exit 1
fi
echo "PASS: all $want survivors reported OK"
