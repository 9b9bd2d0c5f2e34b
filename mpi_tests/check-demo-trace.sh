#!/bin/sh
# check-demo-trace.sh TRACE LIMIT SPEED CAP PAGE TOKEN_BYTES - the post step
# of the mpi_tests/cases/demo_trace_*.mpi replays: kvx-demo's --json summary
# ($KVXT_OUT/demo.json) against what jq works out here, on its own, from the
# first LIMIT rows of TRACE (under tests/data/traces/): the request count,
# every request succeeded, the offered load (requests/s and KV GB/s over the
# span of the arrivals / SPEED), how many prompts were longer than CAP
# tokens, and the KV bytes (whole pages of PAGE tokens, TOKEN_BYTES a token)
# that the decode ranks verified as landed (kvx's own count of the bytes it
# moved, .bytes, is at least that: it includes the aux rows). Latency from arrival is ordered,
# the last SUCCESS is no earlier than the last arrival, and the plot was drawn
# where gnuplot is installed.
set -u
usage="usage: check-demo-trace.sh TRACE LIMIT SPEED CAP PAGE TOKEN_BYTES"
trace=$top_srcdir/tests/data/traces/${1:?$usage}
limit=${2:?$usage} speed=${3:?$usage} cap=${4:?$usage} page=${5:?$usage} tb=${6:?$usage}
json=$KVXT_OUT/demo.json

if ! command -v jq >/dev/null 2>&1; then
    echo "SKIP: jq is not installed (apt-get install jq; launch/quickstart.sh does)"
    exit 77
fi
# The rows as [ms, prompt tokens], from either format.
case $trace in
*.jsonl) rows=$(jq -c -s --argjson n "$limit" '.[:$n] | map([.timestamp, .input_length])' "$trace") ;;
*.csv)
    rows=$(jq -c -R -s --argjson n "$limit" '
        split("\n") | .[1:] | map(select(length > 0) | sub("\r$"; "") | split(",")) | .[:$n] |
        map([((.[0][0:19] | strptime("%Y-%m-%d %H:%M:%S") | mktime) +
              ("0" + .[0][19:] | tonumber)) * 1000, (.[1] | tonumber)])' "$trace")
    ;;
*)
    echo "FAIL: $trace is neither .jsonl nor .csv"
    exit 1
    ;;
esac
want=$(echo "$rows" | jq -c --argjson speed "$speed" --argjson cap "$cap" --argjson page "$page" \
    --argjson tb "$tb" '
    ((.[-1][0] - .[0][0]) / 1000 / $speed) as $span |
    (map(([.[1], $cap] | min) as $k | (($k + $page - 1) / $page | floor) * $page * $tb) | add)
      as $bytes |
    {requests: length, span: $span, rps: (length / $span), bytes: $bytes, gbps: ($bytes / $span / 1e9),
     capped: map(select(.[1] > $cap)) | length}')
echo "worked out from $trace: $want"
jq . "$json" || { echo "FAIL: $json is missing or not JSON"; exit 1; }
bad=0
check() {
    if jq -e --argjson w "$want" --argjson limit "$limit" "$2" "$json" >/dev/null; then
        echo "ok: $1"
    else
        echo "FAIL: $1: jq '$2' is not true"
        bad=1
    fi
}
close='def close($a; $b): ($a - $b | fabs) <= 1e-4 * ([($a | fabs), ($b | fabs), 1e-9] | max);'
check "$limit requests replayed, every one agreed SUCCESS" \
    '.trace.requests == $limit and $w.requests == $limit and .rooms_success == $limit and
     .trace.achieved.requests == $limit and .ok'
check "the span of the arrivals, scaled by the speed" "$close"' close(.trace.span_s; $w.span)'
check "offered requests/s as the trace has them" "$close"' close(.trace.offered.rps; $w.rps)'
check "offered KV bytes and GB/s as the trace has them" \
    "$close"' close(.trace.offered.bytes; $w.bytes) and close(.trace.offered.gbps; $w.gbps)'
check "the prompts longer than the cap were capped, and counted" '.trace.capped == $w.capped'
check "the KV bytes the decode ranks saw land are the offered ones; kvx moved them (and aux rows)" \
    '.bytes_verified == $w.bytes and .trace.achieved.bytes == $w.bytes and .bytes >= .bytes_verified'
check "the last SUCCESS is no earlier than the last arrival" \
    '.trace.achieved.seconds >= .trace.span_s and .trace.achieved.rps > 0'
check "latency from arrival: 0 < min <= p50 <= p90 <= p99 <= max (none began before it arrived)" \
    '.trace.latency_from_arrival_ms as $l | $l.min > 0 and $l.min <= $l.p50 and $l.p50 <= $l.p90 and
     $l.p90 <= $l.p99 and $l.p99 <= $l.max'
if command -v gnuplot >/dev/null 2>&1; then
    if [ -s "$KVXT_OUT/trace.png" ]; then echo "ok: the plot was drawn"; else
        echo "FAIL: gnuplot is installed but no plot was drawn"
        bad=1
    fi
fi
[ $bad -eq 0 ] && echo "PASS: the replay's summary matches the trace"
exit $bad
