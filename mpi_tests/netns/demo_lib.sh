# demo_lib.sh - what the kvx-demo tests over namespace hosts share
# (t_demo_cut.sh, t_demo_partial.sh); sourced after setting H (hosts.sh) and
# demo (the kvx-demo binary).
#
#   demo_cut_run OUT NHOSTS PER_HOST LAYOUT FAULT...
#                              brings up NHOSTS hosts (set $KVXN_ID, deleted
#                              at exit), runs 4000 requests of kvx-demo on
#                              PER_HOST ranks per host with MPI on the data
#                              link too, applies `hosts.sh fault FAULT...` 3 s
#                              after the header, waits; sets rc (mpirun's) and
#                              after (seconds from the fault to the end) and
#                              prints the end of the output
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

demo_cut_run() {
    c_out=$1 c_hosts=$2 c_per=$3 c_layout=$4
    shift 4
    "$H" up "$c_hosts" || exit $?
    trap '"$H" down >/dev/null 2>&1' EXIT
    KVXN_MPI_NET=data0 "$H" mpirun -N "$c_per" -t 120 -x KVX_LAYOUT="$c_layout" \
        --enable-recovery --mca async_mpi_finalize 1 \
        "$demo" --requests "${KVXT_CUT_REQUESTS:-4000}" --prompt-tokens 64:512 \
        --progress lines --time-limit 100 --end-timeout 5 >"$c_out" 2>&1 &
    c_pid=$!
    demo_wait_header "$c_out" $c_pid
    sleep 3
    c_cut=$(date +%s.%N)
    "$H" fault "$@"
    echo "cut (hosts.sh fault $*) at $(date -u +%T.%N | cut -c1-12)"
    wait $c_pid
    rc=$?
    after=$(awk "BEGIN { printf \"%.2f\", $(date +%s.%N) - $c_cut }")
    grep -v "FAILED at\|mpool.c\|UCX may still\|refused: room" "$c_out" | tail -50
    echo "mpirun exited $rc, ${after} s after the cut"
}

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
