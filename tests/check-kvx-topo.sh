#!/bin/sh
# check-kvx-topo.sh - kvx-topo as a user runs it: this machine, another
# machine's XML (table and JSON), and a missing file.
set -u
top=${top_srcdir:-$(dirname "$0")/..}
build=${top_builddir:-.}
tool=$build/tools/kvx-topo
p5=$top/tests/data/topologies/aws-p5.48xlarge.xml
bad=0
fail() {
    echo "FAIL: $1"
    bad=1
}

out=$("$tool") || fail "kvx-topo on this machine exited $?"
echo "$out" | tail -n 1 | grep -qx '# OK' || fail "kvx-topo on this machine does not end with # OK"

out=$("$tool" --xml "$p5") || fail "kvx-topo --xml exited $?"
echo "$out" | grep -q '^  GPU0   0000:53:00.0  0     0-47             PIX   yes  rdmap79s0:1,rdmap80s0:1,rdmap81s0:1,rdmap82s0:1$' ||
    fail "kvx-topo --xml: GPU0 row"

gpu0='{"gpus":[{"busid":"0000:53:00.0","numa":0,"cpuset":"0-47","nics":[{"name":"rdmap79s0","port":1,"path":"PIX"},{"name":"rdmap80s0","port":1,"path":"PIX"},{"name":"rdmap81s0","port":1,"path":"PIX"},{"name":"rdmap82s0","port":1,"path":"PIX"}],"ucx_net_devices":"rdmap79s0:1,rdmap80s0:1,rdmap81s0:1,rdmap82s0:1","path":"PIX","gdr_advised":true,'
out=$("$tool" --xml "$p5" --json) || fail "kvx-topo --json exited $?"
case $out in
"$gpu0"*) ;;
*) fail "kvx-topo --json: GPU 0 is not as expected" ;;
esac

err=$("$tool" --xml /nonexistent.xml 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "kvx-topo on a missing file exited $rc, not 1"
echo "$err" | grep -q "^kvx-topo: KVX_ERR_TOPO at init .*cannot read the topology file '/nonexistent.xml': No such file or directory$" ||
    fail "kvx-topo on a missing file: $err"

"$tool" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "kvx-topo --bogus does not exit 2"

[ $bad -eq 0 ] && echo "ok: kvx-topo"
exit $bad
