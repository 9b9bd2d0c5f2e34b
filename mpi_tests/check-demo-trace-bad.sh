#!/bin/sh
# check-demo-trace-bad.sh RANKS TRACE:LINE REASON - the post step of the
# bad-trace cases: every one of RANKS ranks exited 2 (refused, none went on
# to serve), rank 0 said "kvx-demo: .../TRACE:LINE: REASON..." (REASON a
# grep -F string), and no rank printed a summary.
set -u
ranks=${1:?usage: check-demo-trace-bad.sh RANKS TRACE:LINE REASON}
where=${2:?usage: check-demo-trace-bad.sh RANKS TRACE:LINE REASON}
reason=${3:?usage: check-demo-trace-bad.sh RANKS TRACE:LINE REASON}
bad=0
r=0
while [ $r -lt "$ranks" ]; do
    rc=$(cat "$KVXT_OUT/rank$r.rc" 2>/dev/null)
    [ "$rc" = 2 ] || { echo "FAIL: rank $r exited '${rc:-?}', not 2"; bad=1; }
    if grep -q '^rooms:' "$KVXT_OUT/rank$r.out" 2>/dev/null; then
        echo "FAIL: rank $r printed a summary"
        bad=1
    fi
    r=$((r + 1))
done
line=$(grep -F "/$where: " "$KVXT_OUT/rank0.out")
case $line in
"kvx-demo: "*"/$where: $reason"*) echo "ok: rank 0 said: $line" ;;
*)
    echo "FAIL: rank 0 did not say '.../$where: $reason...'; it said:"
    cat "$KVXT_OUT/rank0.out"
    bad=1
    ;;
esac
[ $bad -eq 0 ] && echo "PASS: every rank refused the trace, rank 0 said where and why"
exit $bad
