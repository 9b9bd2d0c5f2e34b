#!/bin/sh
# t_kvx_join.sh - an instance on another host joins a running job, over two
# network-namespace hosts (mpi_tests/netns/hosts.sh): the job,
# prefill:1x1,decode:1x1, runs in h0 with its door on data0 (KVX_JOIN_LISTEN
# names the interface: the door listens at 10.201.0.1, not on loopback); a
# decode instance started by an mpirun of its own in h1 joins it as decode[1]
# and takes 20 rooms, each checked byte by byte. Its peers across the hosts
# are reached over tcp/data0 alone (kvx's log), and the door's address is
# data0's.
#
# Exit 77 (skip) only where network namespaces cannot be created or there is
# no mpirun; takes about 10 s.
set -u
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
H=$(cd "$top_srcdir/mpi_tests/netns" && pwd)/hosts.sh
b=$(cd "$top_builddir" && pwd)
KVXN_ID=kj$$
export KVXN_ID

NAME=t_kvx_join
. "$top_srcdir/mpi_tests/netns/testlib.sh"
hosts_start 2

mkdir -p "$work/job" "$work/joiner"
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/job.key")
common="-x KVX_JOIN_KEY_FILE=$work/job.key -x KVX_PEER_TIMEOUT=10s -x KVX_LOG_LEVEL=info"

say "the job in h0, its door on data0"
# shellcheck disable=SC2086
"$H" mpirun -H h0 -N 2 -t 120 $common -x KVX_LAYOUT=prefill:1x1,decode:1x1 \
    -x KVX_JOIN_LISTEN=data0 -x KVX_JOIN_ADDRESS_FILE="$work/addr" -x KVXT_OUT="$work/job" \
    "$b/mpi_tests/t_join" job 40 20 >"$work/job.out" 2>&1 &
job=$!
i=0
while [ ! -s "$work/addr" ]; do
    i=$((i + 1))
    [ $i -gt 600 ] && { sed 's/^/    /' "$work/job.out"; fail "no join address after 60 s"; }
    sleep 0.1
done
addr=$(cat "$work/addr")
say "the job takes joiners at $addr"
case $addr in
10.201.0.1:*) ;;
*) fail "the door listens at $addr, not on h0's data0 (10.201.0.1)" ;;
esac

say "a decode instance in h1 joins it"
# shellcheck disable=SC2086
"$H" mpirun -H h1 -N 1 -t 90 $common -x KVX_LAYOUT=decode:1x1 -x KVX_JOIN="$addr" \
    -x KVXT_OUT="$work/joiner" "$b/mpi_tests/t_join" joiner 20 >"$work/joiner.out" 2>&1
jrc=$?
wait $job
rc=$?
grep -v ' info ' "$work/job.out" | sed 's/^/    job | /'
grep -v ' info ' "$work/joiner.out" | sed 's/^/    joiner | /'
[ $rc -eq 0 ] || fail "the job's mpirun exited $rc"
[ $jrc -eq 0 ] || fail "the joiner's mpirun exited $jrc"
for f in "$work/job/result.0" "$work/job/result.1" "$work/joiner/result.0"; do
    grep -q '^OK ' "$f" 2>/dev/null || fail "no OK result in $f"
done
grep -E "^\[[^ ]* h1:[0-9]+ r2 decode\[1\]\.tp0\] info peer prefill\[0\]\.tp0 \(rank 0\): data over" \
    "$work/joiner.out" >"$work/lanes" || fail "the joiner's log does not say how it reaches prefill[0].tp0"
sed 's/^/    /' "$work/lanes"
grep -qE 'data over tcp/data0\.[0-9]+ .*control over tcp/data0\.[0-9]+;' "$work/lanes" ||
    fail "the joiner does not reach the prefill over tcp/data0 alone"
grep -q "welcomed 10.201.0.2:" "$work/job.out" || fail "the door did not log the joiner's h1 address"
say "PASS: decode[1] in h1 joined the job in h0 over data0 and took 20 rooms byte-exact"
