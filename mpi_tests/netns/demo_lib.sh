# demo_lib.sh - what the kvx-demo tests over namespace hosts share
# (t_demo_cut.sh, t_demo_partial.sh); sourced.
#
#   demo_wait_header OUT PID   until kvx-demo printed its header to OUT (every
#                              rank has its kvx context: a cut before would hit
#                              collectives); FAIL and exit 1 after 60 s or when
#                              PID ended first
#   demo_verdict OUT RC AFTER FAILS
#                              the checks every such run must pass -- no rank
#                              aborted, a summary says OK, none FAILED, mpirun
#                              exited 0, the job ended within 30 s of the cut --
#                              added to FAILS ("; what" each); removes OUT and
#                              prints PASS, or FAIL and exits 1

demo_wait_header() {
    i=0
    while ! grep -q "^# chunked prefill" "$1" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 "$2" 2>/dev/null; then
            cat "$1"
            echo "FAIL: the demo did not start within 60 s"
            rm -f "$1"
            exit 1
        fi
        sleep 0.1
    done
}

demo_verdict() {
    v_fail=$4
    v_aborted=$(grep -c "Assertion\|Signal: Aborted\|Segmentation" "$1")
    [ "$v_aborted" = 0 ] || v_fail="$v_fail; a rank aborted ($v_aborted lines)"
    grep -q "^kvx-demo: OK" "$1" || v_fail="$v_fail; no summary says OK"
    ! grep -q "^kvx-demo: FAILED" "$1" || v_fail="$v_fail; a summary says FAILED"
    [ "$2" = 0 ] || v_fail="$v_fail; mpirun exited $2"
    [ "$(awk "BEGIN { print ($3 < 30) }")" = 1 ] || v_fail="$v_fail; the job took $3 s after the cut"
    rm -f "$1"
    [ -z "$v_fail" ] || { echo "FAIL:${v_fail#;}"; exit 1; }
    echo "PASS: the job ended $3 s after the cut"
}
