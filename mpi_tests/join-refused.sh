#!/bin/sh
# join-refused.sh - beside a running job that takes joiners (join_refused.mpi):
# joiners it must refuse, each costing the job only a log line, then one it
# takes (mpi_tests/join-run.sh). Each refused joiner is a real kvx_ctx_create()
# in its own mpirun, or a raw TCP client for what no kvx joiner sends.
set -u
here=$(dirname "$0")
addr_file=$KVXT_OUT/join-address
i=0
while [ ! -s "$addr_file" ]; do
    i=$((i + 1))
    [ $i -gt 600 ] && { echo "join-refused: no address in $addr_file after 60 s"; exit 1; }
    sleep 0.1
done
addr=$(cat "$addr_file")
host=${addr%:*}
port=${addr##*:}
fail=0

# refuse NAME NP STATUS TEXT [PAGE_SIZE] (with the environment given before)
refuse() {
    name=$1 np=$2
    shift 2
    out=$KVXT_OUT/refused-$name
    mkdir -p "$out"
    echo "join-refused: $name: $*"
    KVXT_OUT=$out KVX_JOIN=$addr KVX_LAYOUT=decode:1x$np \
        $KVXT_MPIRUN -np "$np" ${KVXT_WRAPPER:-} mpi_tests/t_join refused "$@"
    grep -q '^OK ' "$out/result.0" || { echo "FAIL: joiner $name was not refused as wanted"; fail=1; }
}

# A key that is not the job's.
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$KVXT_OUT/wrong.key")
KVX_JOIN_KEY_FILE=$KVXT_OUT/wrong.key \
    refuse wrong-key 1 KVX_ERR_PROTOCOL "refused: the joiner did not prove it holds the job key"
# The job's key in a file others may read.
cp "$KVX_JOIN_KEY_FILE" "$KVXT_OUT/open.key" && chmod 644 "$KVXT_OUT/open.key"
KVX_JOIN_KEY_FILE=$KVXT_OUT/open.key \
    refuse open-key 1 KVX_ERR_CONFIG "readable by no one else (it is uid"
# Another page size than the job's decode instances: both values named.
refuse page-size 1 KVX_ERR_KV_MISMATCH \
    "page size mismatch: prefill[0] has page_size=4, decode[1] has page_size=8" 8
# Another TP size.
refuse tp-size 2 KVX_ERR_LAYOUT "this job takes decode instances of TP 1, not a decode instance of TP 2"

# A slow joiner that reads the challenge and then says nothing (the job's
# KVX_JOIN_TIMEOUT is 2 s), and one that sends garbage: the door closes both.
/usr/bin/python3 - "$host" "$port" <<'EOF' || fail=1
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
slow = socket.create_connection((host, port), timeout=30)
slow.recv(44)
t0 = time.time()
slow.settimeout(30)
gone = slow.recv(1) == b""
print("join-refused: slow joiner closed by the door after %.1f s" % (time.time() - t0))
bad = socket.create_connection((host, port), timeout=30)
bad.sendall(b"GET / HTTP/1.1\r\n\r\n")
got = b""
while True:
    b = bad.recv(4096)
    if not b:
        break
    got += b
print("join-refused: garbage answered with %d bytes: %r" % (len(got), got[56:]))
sys.exit(0 if gone and b"not a kvx join frame" in got else 1)
EOF

# Then a joiner the job takes.
sh "$here/join-run.sh" 1 mpi_tests/t_join joiner 20 || fail=1
exit $fail
