#!/bin/sh
# hosts.sh - turns network namespaces into "hosts" for multi-host MPI/UCX tests.
#
#   hosts.sh [-i ID] up N                  make hosts h0..h(N-1); exit 77 + reason when
#                                          network namespaces cannot be created here
#   hosts.sh [-i ID] down                  kill everything left in every host, delete them
#   hosts.sh [-i ID] run [-t SEC] HOST CMD...       run CMD inside HOST (bounded)
#   hosts.sh [-i ID] mpirun [-N PER_HOST] [-H h0,h1] [-t SEC] [MPIRUN ARGS] PROG ARGS...
#                                          mpirun in the first host, daemons in the others
#   hosts.sh [-i ID] fault [-I IF] HOST link-down|link-up|drop [PCT]|undrop
#   hosts.sh [-i ID] bytes HOST [IF]       "RX_BYTES TX_BYTES" of IF (default data0)
#   hosts.sh [-i ID] pids [HOST...]        "HOST PID COMM" of every process left in them
#   hosts.sh [-i ID] reap                  kill every process in every host
#   hosts.sh list                          the sets of hosts that are up on this machine
#   hosts.sh agent HOST CMD...             the rsh agent mpirun calls (not for people)
#
# ID (or $KVXN_ID, default "kvxn"; letters, digits, '_') names one set of hosts, so
# several tests can run at once: use a fresh one per test (e.g. "kt$$") and clean up
# with   trap '"$H" down' EXIT   right after `up`. `down` works on a half-made set
# and after a crash, so it is always safe to call. Needs root (CAP_SYS_ADMIN),
# iproute2, util-linux (unshare, nsenter) and nftables (for `fault drop`).
#
# What a host is. For host hK of set ID:
#   - network namespace "ID-hK" (ip netns) with lo, data0 = 10.201.0.(K+1)/24 for
#     UCX (UCX_NET_DEVICES=data0 names it in every host) and ctl0 = 10.202.0.(K+1)/24
#     for mpirun's daemons and MPI itself. Each interface is one end of a veth pair
#     whose other end is a port of a bridge ("bdata" for data, "bctl" for control) in a
#     switch namespace "ID-sw", so any number of hosts share two L2 segments and a
#     fault on one host's data0 leaves the control network alone. The addresses exist
#     only inside these namespaces; IPv6 is off there (no DAD, no stray packets in the
#     byte counters). /etc/netns/ID-hK/hosts (bind-mounted by `ip netns exec`) maps
#     every hK to its ctl0 address.
#   - its own UTS namespace (hostname hK) and IPC namespace, kept alive without a
#     process: unshare(1) bind-mounts them onto files in /run/kvx-netns/ID/hK/, and
#     every command enters them with nsenter(1).
#   - its own /dev/shm (a directory /run/kvx-netns/ID/hK/shm bind-mounted over it)
#     and its own TMPDIR (/run/kvx-netns/ID/hK/tmp), on a tmpfs mounted on
#     /run/kvx-netns/ID; both go away with `down`.
#   - every command runs as  nsenter --uts --ipc -- ip netns exec ID-hK sh -c 'mount
#     --bind shm /dev/shm; exec CMD'. `ip netns exec` gives it a fresh mount namespace
#     with /sys remounted for the host's network namespace, which UCX needs: it lists
#     network devices from /sys/class/net, and a process that only setns()'d into the
#     network namespace would see the devices of the machine instead.
#   The machine's filesystem, users and PID namespace stay shared: a path in /tmp or
#   the build tree means the same thing on every host, and `ip netns pids` (hence
#   `reap` and `down`) finds every process a host holds.
#
# What Open MPI 4.1 and UCX 1.13 need, found by taking each per-host piece away
# (KVXN_SPLIT; section 0 of mpi_tests/netns/measure.sh replays it):
#   - An IPC namespace per host, or UCX talks shared memory across "hosts": with
#     only the hostname, /dev/shm and TMPDIR split, the lanes between ranks on h0
#     and h1 were sysv/memory + posix/memory, not tcp/data0 (UCX's shared-memory
#     transports call a peer reachable when it runs on the same machine in the same
#     IPC namespace; a private /dev/shm does not stop posix, which opens the
#     peer's segment through /proc/PID/fd). cma never became an RMA lane.
#   - A hostname per host (UTS), or a private /dev/shm: Open MPI's vader names its
#     segments /dev/shm/vader_segment.HOSTNAME.JOBID.LOCALRANK, so with one
#     hostname and one /dev/shm the ranks of two hosts map each other's segments
#     and crash (SIGSEGV in mca_btl_vader_poll_handle_frag, or "unlink(2)
#     /dev/shm/vader_segment... No such file"). With hostnames split, nothing
#     else was needed (a shared /dev/shm and TMPDIR worked); hosts.sh splits both
#     anyway, so what a host leaves behind stays in it. Without the UTS split
#     mpirun still found itself in h0, by resolving h0 (/etc/netns hosts file)
#     to one of its own addresses, but every rank's hostname was the machine's.
#   - mpirun: --host h0:N,h1:N, the rsh agent below (--mca plm_rsh_agent), daemons
#     and MPI on ctl0 (--mca oob_tcp_if_include ctl0 --mca btl_tcp_if_include ctl0
#     --mca pml ob1 --mca btl self,vader,tcp, so MPI is not carried by UCX over
#     data0 and survives a data fault), always --bind-to none (each daemon thinks it
#     owns the machine and would bind every rank to core 0), --oversubscribe, and
#     -x UCX_NET_DEVICES=data0. `hosts.sh mpirun` adds all of these (KVXN_NET
#     names other devices for UCX_NET_DEVICES; KVXN_NET= set empty adds none;
#     KVXN_MPI_NET=data0 puts MPI's own traffic on the data link too, as on a
#     cluster where both share the fabric, while the daemons stay on ctl0).
#   - UCX over TCP moves a put only while the target progresses its worker: a
#     passive target must keep calling ucp_worker_progress().
#
# The rsh agent. mpirun calls `AGENT HOST CMD...` with the words of one shell
# command line in which quote characters are literal; the agent joins the words and
# runs them with `sh -c` inside HOST, as ssh would. It runs in the first host (it is
# mpirun's child) and enters the other host from there.
#
# Faults act on one host's interface (-I IF, default data0): link-down/link-up set it
# down/up; drop [PCT] adds nftables netdev ingress+egress rules on it that drop PCT %
# (default 100) of its packets in both directions (this kernel has no tc netem);
# drop-in [PCT] drops only what it receives (a one-way partition: the host
# still sends); cut-from HOST drops only the packets between the two hosts
# (the others still reach both: a partial partition); undrop removes them. Neither is noticed quickly by TCP: after a 100 % drop the
# rank in the faulted host saw ETIMEDOUT after ~8 s (with UCP_ERR_HANDLING_MODE_PEER),
# its peer nothing within 35-65 s; after link-down neither side within 35 s (numbers
# in the README, from measure.sh). A test bounds its own waits.
#
# KVXN_TIMEOUT (default 120) bounds `run` and `mpirun` (timeout -k 5); -t overrides,
# 0 means unbounded. KVXN_ROOT (default /run/kvx-netns) holds the state.
# KVXN_SPLIT (default "uts ipc shm tmp") lists the per-host pieces to make, for the
# experiments above only.
set -u
PATH=$PATH:/usr/sbin:/sbin
export PATH

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
root=${KVXN_ROOT:-/run/kvx-netns}
id=${KVXN_ID:-kvxn}
split=${KVXN_SPLIT:-uts ipc shm tmp}
tmo=${KVXN_TIMEOUT:-120}
me="hosts.sh"

die() {
    code=$1
    shift
    echo "$me: $*" >&2
    exit "$code"
}

usage() {
    sed -n '2,16s/^# \{0,1\}//p' "$self" >&2
    exit 2
}

has_split() {
    case " $split " in
    *" $1 "*) return 0 ;;
    esac
    return 1
}

# ---- state -------------------------------------------------------------

state() {
    echo "$root/$id"
}

nhosts() {
    cat "$(state)/nhosts" 2>/dev/null || echo 0
}

check_host() {
    case $1 in
    h[0-9] | h[0-9][0-9] | h[0-9][0-9][0-9]) ;;
    *) die 2 "'$1' is not a host name (h0, h1, ...)" ;;
    esac
    [ "${1#h}" -lt "$(nhosts)" ] || die 2 "no host $1 in set $id (up $(nhosts))"
}

# Every network namespace of this set, hosts and switch, including those of a
# half-made or crashed set.
set_namespaces() {
    ip netns list 2>/dev/null | awk -v p="$id-" 'index($1, p) == 1 { print $1 }'
}

# ---- entering a host ---------------------------------------------------

# enter HOST CMD...: becomes CMD in HOST's namespaces (see the header): every
# command that enters a host ends with it, and nothing of hosts.sh stays behind
# as a parent (nsenter and ip netns exec exec too).
enter() {
    h=$1
    shift
    d=$(state)/$h
    set -- ip netns exec "$id-$h" sh -c '
        if [ -n "$1" ]; then mount --bind "$1" /dev/shm || exit 99; fi
        if [ -n "$2" ]; then TMPDIR=$2; export TMPDIR; fi
        shift 2; exec "$@"' kvxn-enter \
        "$(has_split shm && echo "$d/shm")" "$(has_split tmp && echo "$d/tmp")" "$@"
    has_split ipc && set -- --ipc="$d/ipc" "$@"
    has_split uts && set -- --uts="$d/uts" "$@"
    if has_split uts || has_split ipc; then
        set -- nsenter "$@"
    fi
    exec "$@"
}

# ---- up / down ---------------------------------------------------------

# make_host K: one host, its two veth pairs and its persistent UTS/IPC namespaces.
make_host() {
    k=$1
    h=h$k
    n=$id-$h
    d=$(state)/$h
    ip netns add "$n" || return 1
    ip -n "$id-sw" link add "${h}d" type veth peer name data0 netns "$n" || return 1
    ip -n "$id-sw" link add "${h}c" type veth peer name ctl0 netns "$n" || return 1
    ip -n "$id-sw" link set "${h}d" master bdata up || return 1
    ip -n "$id-sw" link set "${h}c" master bctl up || return 1
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1 || return 1
    ip -n "$n" addr add "10.201.0.$((k + 1))/24" dev data0 || return 1
    ip -n "$n" addr add "10.202.0.$((k + 1))/24" dev ctl0 || return 1
    for i in lo data0 ctl0; do
        ip -n "$n" link set "$i" up || return 1
    done
    mkdir -p "$d/shm" "$d/tmp" /etc/netns/"$n" || return 1
    chmod 1777 "$d/shm" "$d/tmp"
    touch "$d/uts" "$d/ipc"
    if has_split uts || has_split ipc; then
        unshare --uts="$d/uts" --ipc="$d/ipc" hostname "$h" || return 1
    fi
    {
        echo "127.0.0.1 localhost"
        j=0
        while [ $j -lt "$2" ]; do
            echo "10.202.0.$((j + 1)) h$j"
            j=$((j + 1))
        done
    } >/etc/netns/"$n"/hosts
}

cmd_up() {
    [ $# -eq 1 ] || usage
    nh=$1
    case $nh in
    [1-9] | [1-9][0-9] | 1[0-9][0-9] | 2[0-4][0-9]) ;;
    *) die 2 "up: N must be 1..249, not '$nh'" ;;
    esac
    [ -e "$(state)" ] && die 1 "set $id is already up (hosts.sh -i $id down)"
    [ -n "$(set_namespaces)" ] && die 1 "namespaces $id-* exist (hosts.sh -i $id down)"
    err=$(ip netns add "$id-sw" 2>&1) ||
        die 77 "SKIP: cannot create network namespaces here (ip netns add: $err)"
    # The state lives on its own tmpfs: it holds each host's /dev/shm.
    mkdir -p "$(state)" && mount -t tmpfs -o mode=0755 "kvxn-$id" "$(state)" &&
        echo "$nh" >"$(state)/nhosts" || {
        cmd_down
        die 99 "cannot write $(state)"
    }
    # Anything failing from here on is a broken machine, not a missing right.
    if ! { ip -n "$id-sw" link add bdata type bridge &&
        ip -n "$id-sw" link add bctl type bridge &&
        ip -n "$id-sw" link set bdata up && ip -n "$id-sw" link set bctl up; }; then
        cmd_down
        die 99 "up: cannot make the switch namespace $id-sw"
    fi
    k=0
    while [ $k -lt "$nh" ]; do
        if ! make_host $k "$nh"; then
            cmd_down
            die 99 "up: cannot make host h$k"
        fi
        k=$((k + 1))
    done
}

# reap_all: kills every process in every namespace of the set until none is
# left (a dying mpirun or daemon may still be starting children), and says
# which it killed.
reap_all() {
    tries=0
    while :; do
        left=
        for n in $(set_namespaces); do
            for p in $(ip netns pids "$n" 2>/dev/null); do
                c=$(cat /proc/"$p"/comm 2>/dev/null) || continue
                echo "$me: killing ${n#"$id"-}:$p ($c)" >&2
                kill -KILL "$p" 2>/dev/null
                left="$left $p"
            done
        done
        [ -z "$left" ] && return 0
        tries=$((tries + 1))
        [ $tries -ge 100 ] && die 1 "reap: processes survive SIGKILL:$left"
        sleep 0.1
    done
}

cmd_down() {
    reap_all
    for n in $(set_namespaces); do
        ip netns del "$n" || echo "$me: cannot delete namespace $n" >&2
        rm -rf /etc/netns/"$n"
    done
    s=$(state)
    if [ -d "$s" ]; then
        for f in "$s"/h*/uts "$s"/h*/ipc; do
            [ -e "$f" ] && umount "$f" 2>/dev/null
        done
        mountpoint -q "$s" && umount -l "$s"
        rm -rf "$s" || die 1 "cannot remove $s"
    fi
    rmdir "$root" 2>/dev/null
    [ -z "$(set_namespaces)" ] || die 1 "namespaces left: $(set_namespaces | tr '\n' ' ')"
    return 0
}

# ---- commands inside hosts ---------------------------------------------

cmd_run() {
    t=$tmo
    if [ "${1:-}" = -t ]; then
        t=$2
        shift 2
    fi
    [ $# -ge 2 ] || usage
    check_host "$1"
    h=$1
    shift
    [ "$t" = 0 ] || set -- timeout -k 5 "$t" "$@"
    enter "$h" "$@"
}

cmd_mpirun() {
    per=1
    hl=
    t=$tmo
    while [ $# -gt 0 ]; do
        case $1 in
        -N) per=$2 && shift 2 ;;
        -H) hl=$(echo "$2" | tr ',' ' ') && shift 2 ;;
        -t) t=$2 && shift 2 ;;
        --) shift && break ;;
        *) break ;;
        esac
    done
    [ $# -ge 1 ] || usage
    [ -n "$hl" ] || hl=$(seq -f 'h%g' 0 $(($(nhosts) - 1)))
    spec=
    np=0
    for h in $hl; do
        check_host "$h"
        spec="$spec${spec:+,}$h:$per"
        np=$((np + per))
    done
    set -- --host "$spec" -np $np --oversubscribe --bind-to none \
        --mca plm_rsh_agent "$self agent" \
        --mca oob_tcp_if_include ctl0 --mca btl_tcp_if_include "${KVXN_MPI_NET:-ctl0}" \
        --mca pml ob1 --mca btl self,vader,tcp "$@"
    # KVXN_NET= (set, empty) leaves UCX to choose the interfaces itself.
    [ -n "${KVXN_NET-data0}" ] && set -- -x UCX_NET_DEVICES="${KVXN_NET-data0}" "$@"
    [ "$(id -u)" = 0 ] && set -- --allow-run-as-root "$@"
    set -- "${MPIRUN:-mpirun}" "$@"
    [ "$t" = 0 ] || set -- timeout -k 5 "$t" "$@"
    # The agent, mpirun's child, finds this set through the environment.
    KVXN_ID=$id KVXN_ROOT=$root KVXN_SPLIT=$split
    export KVXN_ID KVXN_ROOT KVXN_SPLIT
    enter "$(echo $hl | cut -d' ' -f1)" "$@"
}

# agent HOST CMD...: called by mpirun (plm_rsh_agent) in the first host, as it
# would call ssh. Leading options (as for ssh) are ignored.
cmd_agent() {
    while [ "${1:-}" != "${1#-}" ]; do
        shift
    done
    [ $# -ge 2 ] || die 2 "agent: usage: agent HOST CMD..."
    check_host "$1"
    h=$1
    shift
    enter "$h" sh -c "$*"
}

cmd_fault() {
    ifc=data0
    if [ "${1:-}" = -I ]; then
        ifc=$2
        shift 2
    fi
    [ $# -ge 2 ] || usage
    check_host "$1"
    n=$id-$1
    case $2 in
    link-down) ip -n "$n" link set "$ifc" down ;;
    link-up) ip -n "$n" link set "$ifc" up ;;
    drop | drop-in)
        pct=${3:-100}
        case $pct in
        [0-9] | [0-9][0-9] | 100) ;;
        *) die 2 "fault: drop PCT must be 0..100, not '$pct'" ;;
        esac
        rule=drop
        [ "$pct" -lt 100 ] && rule="numgen random mod 100 < $pct drop"
        out_rule=$rule
        [ "$2" = drop ] || out_rule=accept # drop-in: a one-way partition
        # Declaring then deleting the table makes a second drop replace the first.
        ip netns exec "$n" nft -f - <<EOF
table netdev kvxn_$ifc
delete table netdev kvxn_$ifc
table netdev kvxn_$ifc {
    chain in { type filter hook ingress device "$ifc" priority 0; $rule; }
    chain out { type filter hook egress device "$ifc" priority 0; $out_rule; }
}
EOF
        ;;
    cut-from)
        # Only the traffic between this host and HOST $3 on the interface:
        # the other hosts still reach both (a partial partition).
        check_host "${3:-}"
        peer=10.201.0.$((${3#h} + 1))
        [ "$ifc" = data0 ] || peer=10.202.0.$((${3#h} + 1))
        ip netns exec "$n" nft -f - <<EOF
table netdev kvxn_$ifc
delete table netdev kvxn_$ifc
table netdev kvxn_$ifc {
    chain in { type filter hook ingress device "$ifc" priority 0; ip saddr $peer drop; }
    chain out { type filter hook egress device "$ifc" priority 0; ip daddr $peer drop; }
}
EOF
        ;;
    undrop)
        ip netns exec "$n" nft delete table netdev "kvxn_$ifc" 2>/dev/null
        return 0
        ;;
    *) usage ;;
    esac
}

cmd_bytes() {
    [ $# -ge 1 ] || usage
    check_host "$1"
    ip netns exec "$id-$1" sh -c \
        'cd /sys/class/net/"$1"/statistics && echo "$(cat rx_bytes) $(cat tx_bytes)"' \
        kvxn-bytes "${2:-data0}"
}

cmd_pids() {
    [ $# -gt 0 ] || set -- $(seq -f 'h%g' 0 $(($(nhosts) - 1)))
    for h in "$@"; do
        for p in $(ip netns pids "$id-$h" 2>/dev/null); do
            echo "$h $p $(cat /proc/"$p"/comm 2>/dev/null)"
        done
    done
}

cmd_list() {
    for s in "$root"/*/nhosts; do
        [ -e "$s" ] || continue
        d=${s%/nhosts}
        echo "${d##*/} $(cat "$s") hosts"
    done
}

# ---- main --------------------------------------------------------------

if [ "${1:-}" = -i ]; then
    id=${2:-}
    shift 2 || usage
fi
case $id in
"" | *[!A-Za-z0-9_]*) die 2 "ID '$id' must be letters, digits and '_'" ;;
esac
[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
up | down | run | mpirun | agent | fault | bytes | pids | list) "cmd_$cmd" "$@" ;;
reap) reap_all ;;
*) usage ;;
esac
