#!/bin/sh
# bench-check.sh SUB ROWS - the post step of a kvx-bench smoke case: rank 0
# wrote $KVXT_OUT/SUB.json (mpi_tests/bench-run.sh) with ROWS rows, every
# row passed its correctness check ("ok": true), every row has the members
# the JSON format promises, and the plot was drawn when gnuplot is here.
# No timing is asserted.
set -u
sub=${1:?usage: bench-check.sh SUB ROWS}
want=${2:?usage: bench-check.sh SUB ROWS}
f=$KVXT_OUT/$sub.json
fail() {
    echo "FAIL: kvx-bench $sub: $*"
    exit 1
}
[ -s "$f" ] || fail "no $f was written"
cat "$f"
jq -e . "$f" >/dev/null || fail "$f is not JSON"
[ "$(jq -r .bench "$f")" = "$sub" ] || fail "the JSON does not name the benchmark"
[ "$(jq .ok "$f")" = true ] || fail "a correctness check failed"
case $sub in
put) keys="bytes kvx_gbps raw_gbps ratio" ;;
pages) keys="scatter_pct gbps puts_per_room ratio" ;;
hetero) keys="layout gbps ratio" ;;
agree) keys="rooms tp failed_pct kvx_us decode_us allreduce_us ratio" ;;
fault) keys="kind ms" ;;
verify) keys="bytes pages off_gbps sample_gbps full_gbps sample_over_off full_over_off" ;;
layerwise) keys="pages layers balance end_tail_us layerwise_tail_us tail_end_over_layerwise end_whole_us layerwise_whole_us layerwise_send_calls_us" ;;
*) fail "unknown subcommand" ;;
esac
rows=$(jq '[.rows[] | select(.check == "OK")] | length' "$f")
[ "$rows" -eq "$want" ] || fail "$rows rows passed, $want expected"
for k in $keys; do
    n=$(jq --arg k "$k" '[.rows[] | select(has($k))] | length' "$f")
    [ "$n" -eq "$rows" ] || fail "member $k is in $n of $rows rows"
done
if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$KVXT_OUT/$sub.png" ] || fail "gnuplot is installed but no plot was drawn"
fi
echo "PASS: kvx-bench $sub: $rows rows OK, JSON members $keys"
