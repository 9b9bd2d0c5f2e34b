#!/bin/sh
# join-run.sh NP PROGRAM [ARGS...] - a case's joiner, started beside its job
# (run-mpi.sh's "alongside"): waits, at most 60 s, for the job's address in
# $KVXT_OUT/join-address (KVX_JOIN_ADDRESS_FILE of the job's world rank 0),
# then runs PROGRAM on NP ranks in an mpirun of its own with KVX_JOIN set to
# it and KVX_LAYOUT=decode:1xNP. The joiner's results go to
# $KVXT_OUT/$KVXT_JOINER (default joiner).
set -u
np=${1:?usage: join-run.sh NP PROGRAM [ARGS...]}
shift
addr_file=$KVXT_OUT/join-address
i=0
while [ ! -s "$addr_file" ]; do
    i=$((i + 1))
    if [ $i -gt 600 ]; then
        echo "join-run: no address in $addr_file after 60 s"
        exit 1
    fi
    sleep 0.1
done
out=$KVXT_OUT/${KVXT_JOINER:-joiner}
mkdir -p "$out"
addr=$(cat "$addr_file")
echo "join-run: joining the job at $addr with $np rank(s): $*"
KVXT_OUT=$out KVX_JOIN=$addr KVX_LAYOUT=decode:1x$np \
    $KVXT_MPIRUN -np "$np" ${KVXT_WRAPPER:-} "$@"
rc=$?
echo "join-run: the joiner's mpirun exited $rc"
[ $rc -eq 0 ] || exit $rc
# mpirun exits 0 for a rank that wrote no result: the joiner's own word.
grep -q '^OK ' "$out/result.0" || {
    echo "join-run: the joiner reported no OK result"
    exit 1
}
