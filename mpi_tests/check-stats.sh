#!/bin/sh
# check-stats.sh N - the post step of mpi_tests/cases/stats_*.mpi: N ranks
# wrote an OK result and each of them a metrics file (at destroy; a killed
# rank's last periodic one stays beside them); every metrics file is valid
# Prometheus text, and together they hold what each rank expected
# ($KVXT_OUT/expect.*), checked by tests/check-prom.py.
set -u
want=${1:?usage: check-stats.sh RANKS}
sh "$top_srcdir/mpi_tests/check-results.sh" "$want" || exit 1
for r in "$KVXT_OUT"/result.*; do
    rank=${r##*.}
    if [ ! -f "$KVXT_OUT/metrics.$rank.prom" ]; then
        echo "FAIL: rank $rank wrote no metrics file"
        ls -l "$KVXT_OUT"
        exit 1
    fi
done
cat "$KVXT_OUT"/expect.* > "$KVXT_OUT/expect.all"
/usr/bin/python3 "$top_srcdir/tests/check-prom.py" --labels role,instance,tp,rank,host \
    --expect "$KVXT_OUT/expect.all" "$KVXT_OUT"/metrics.*.prom
[ $? -eq 0 ] || exit 1
# The job-wide view, judged at the newest file's time (survivors write theirs
# together at destroy; a killed rank's last one is older): valid text, and
# what the ranks expected of it ($KVXT_OUT/expect-job.*).
newest=$(grep -h '^kvx_metrics_timestamp_seconds' "$KVXT_OUT"/metrics.*.prom | awk '{print $2}' |
         sort -g | tail -1)
"${top_builddir:-.}/tools/kvx-metrics" --now "$newest" -o "$KVXT_OUT/job.txt" \
    "$KVXT_OUT"/metrics.*.prom || exit 1
set -- "$KVXT_OUT/job.txt"
if ls "$KVXT_OUT"/expect-job.* >/dev/null 2>&1; then
    cat "$KVXT_OUT"/expect-job.* > "$KVXT_OUT/expect-job.all"
    set -- --expect "$KVXT_OUT/expect-job.all" "$@"
fi
/usr/bin/python3 "$top_srcdir/tests/check-prom.py" "$@"
