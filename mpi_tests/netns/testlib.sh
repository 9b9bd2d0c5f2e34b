# testlib.sh - what the tests over network-namespace hosts share; sourced
# (. "$top_srcdir/mpi_tests/netns/testlib.sh") after setting NAME (the prefix
# of every line the test prints) and H (the path of hosts.sh).
#
#   say TEXT / fail TEXT       a line of the test / FAIL and exit 1
#   now                        the wall clock, seconds with nanoseconds
#   hosts_start N [nft]        skips (77, with the reason) without mpirun or
#                              where namespaces cannot be made; fails without
#                              nft when asked for; makes $work and hosts h0..
#                              h(N-1) of set $KVXN_ID, which the EXIT trap
#                              deletes (killing what is left in them) with $work
#   counters HOST IF           sets rx and tx (bytes) of IF in HOST
#   bytes_mark                 remembers data0's and lo's counters of h0, h1
#   bytes_moved HOST           since bytes_mark: sets d_rx, d_tx (data0), l_rx (lo)

say() {
    echo "$NAME: $*"
}
fail() {
    say "FAIL: $*"
    exit 1
}
now() {
    date +%s.%N
}

hosts_start() {
    if ! command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1; then
        say "SKIP: no mpirun"
        exit 77
    fi
    if [ "${2:-}" = nft ]; then
        command -v nft >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
        command -v nft >/dev/null 2>&1 ||
            fail "nft is missing: install nftables (launch/quickstart.sh does)"
    fi
    work=$(mktemp -d "${TMPDIR:-/tmp}/kvxt-$NAME.XXXXXX") || exit 99
    trap '"$H" down >/dev/null 2>&1; rm -rf "$work"' EXIT
    trap 'exit 130' INT TERM
    "$H" up "$1"
    rc=$?
    [ $rc -eq 77 ] && exit 77
    [ $rc -ne 0 ] && fail "hosts.sh up $1 exited $rc"
    say "hosts h0..h$(($1 - 1)) up (set $KVXN_ID)"
}

counters() {
    set -- $("$H" bytes "$1" "$2")
    rx=$1
    tx=$2
}

bytes_mark() {
    for h in h0 h1; do
        for i in data0 lo; do
            counters $h $i
            eval "b_${h}_$i=\"$rx $tx\""
        done
    done
}

bytes_moved() {
    eval "set -- \$b_${1}_data0 \$b_${1}_lo $1"
    counters "$5" data0
    d_rx=$((rx - $1))
    d_tx=$((tx - $2))
    counters "$5" lo
    l_rx=$((rx - $3))
}
