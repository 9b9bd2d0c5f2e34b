#!/bin/sh
# one-node-cluster.sh - a real Slurm on this machine runs launch/slurm/kvx-demo.sbatch,
# which runs kvx-demo; then mpi_tests/slurm/join.sbatch, two job steps of one
# allocation: a job and a decode instance that joins it (docs/user/join.md).
#
# Starts a private one-node Slurm cluster: munged with its own key, then
# slurmctld and slurmd in the foreground as background processes, from a
# generated slurm.conf whose state, spool, log and pid files all live in a
# private directory under /tmp. Waits until sinfo shows the node idle,
# submits the sbatch template (which runs kvx-run, which runs srun
# --mpi=pmix), waits for the job and checks its output. Every daemon it
# started is stopped by its PID on the way out, pass or fail, and anything
# the job left running is killed.
#
# Concurrent runs (several build trees on one machine) cannot collide: each
# takes one of 16 slots with flock, and a slot gives its own pair of ports,
# skipped when something else listens there.
#
# The whole test is bounded at 3 minutes. It needs root (slurmd must start
# jobs) and the Debian packages slurmctld, slurmd, slurm-client and munge,
# which launch/quickstart.sh installs; without them it skips (exit 77), or
# fails when KVXT_REQUIRE_SLURM=1 (set by quickstart.sh, which installed them).
set -u

if [ -z "${KVXT_SLURM_BOUNDED:-}" ]; then
    KVXT_SLURM_BOUNDED=1 exec timeout -k 10 180 /bin/sh "$0" "$@"
fi

top_srcdir=$(cd "${top_srcdir:-$(dirname "$0")/../..}" && pwd)
top_builddir=$(cd "${top_builddir:-.}" && pwd)
PATH=$PATH:/usr/sbin:/sbin
started=$(date +%s)

# What the job runs, and the line of its output that says all went well:
# kvx-demo, 100 requests (the whole test is bounded at 2 minutes on a
# machine shared with other jobs); every room must also have succeeded.
program="$top_builddir/examples/kvx-demo --requests 100"; summary='^kvx-demo: OK'
rooms='^rooms: *100 total: 100 succeeded, 0 failed, 0 disagreed'
layout=prefill:1x2,decode:1x2
ntasks=4

skip() {
    if [ "${KVXT_REQUIRE_SLURM:-0}" = 1 ]; then
        echo "FAIL: $* (KVXT_REQUIRE_SLURM=1)"
        exit 99
    fi
    echo "SKIP: $*"
    exit 77
}
fail() {
    [ -z "${work:-}" ] || show_logs
    echo "FAIL: $*"
    exit 1
}

# ---- what it needs ------------------------------------------------------------

[ "$(id -u)" = 0 ] || skip "not root: slurmd must run as root to start jobs"
for c in munged mungekey slurmctld slurmd sbatch sinfo scontrol scancel srun flock; do
    command -v "$c" >/dev/null 2>&1 ||
        skip "$c is not installed (apt-get install slurmctld slurmd slurm-client munge; launch/quickstart.sh does)"
done
command -v mpirun >/dev/null 2>&1 || skip "mpirun is not installed"
[ -x "${program%% *}" ] || fail "${program%% *} is not built"
# Nothing from an enclosing Slurm job may leak into this private cluster.
unset $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p')

# ---- a slot: its lock and its ports ---------------------------------------------

# True when something listens on TCP port $1 (IPv4 or IPv6).
port_busy() {
    hex=$(printf '%04X' "$1")
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { f = 1 } END { exit !f }'
}

slot=
for i in $(seq 0 15); do
    lock=/tmp/kvxt-slurm.slot$i.lock
    exec 9>"$lock" || continue
    if flock -n 9; then
        ctld_port=$((26810 + 2 * i))
        slurmd_port=$((ctld_port + 1))
        if ! port_busy $ctld_port && ! port_busy $slurmd_port; then
            slot=$i
            break
        fi
    fi
    exec 9>&-
done
[ -n "$slot" ] || fail "no free slot: 16 runs at once, or ports 26810-26841 taken"

# ---- the private cluster ---------------------------------------------------------

# Socket paths have a length limit, so the directory is short and in /tmp.
work=$(mktemp -d /tmp/kvxt-slurm.XXXXXX) || fail "cannot create a directory in /tmp"
chmod 755 "$work"
mkdir -p "$work/munge" "$work/state" "$work/spool" "$work/log" "$work/run" "$work/tmpfs" "$work/job-tmp"
chmod 755 "$work/munge"
run_id=kvxt-slurm-$slot-$$
export KVXT_RUN_ID="$run_id"
export SLURM_CONF="$work/slurm.conf"
pids=
job=

# Stops what this test started: the job, then each daemon by its PID (TERM,
# then KILL after 5 s), then what slurmd left behind (job steps and tasks:
# they carry KVXT_RUN_ID in their environment, and every slurmstepd keeps
# this cluster's slurmd.log open), then the directory.
stop_pid() {
    kill -TERM "$1" 2>/dev/null || return 0
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.5
    done
    kill -KILL "$1" 2>/dev/null && echo "killed $2 (pid $1) after 5 s"
}
cleanup() {
    [ -z "$job" ] || timeout 10 scancel "$job" 2>/dev/null
    for p in $pids; do
        stop_pid "${p%%:*}" "${p#*:}"
    done
    for proc in /proc/[0-9]*; do
        pid=${proc#/proc/}
        [ "$pid" = "$$" ] && continue
        if { tr '\0' '\n' <"$proc/environ"; } 2>/dev/null | grep -qx "KVXT_RUN_ID=$run_id" ||
            ls -l "$proc/fd/" 2>/dev/null | grep -qF -- "-> $work/"; then
            kill -KILL "$pid" 2>/dev/null && echo "killed stray process $pid ($(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null))"
        fi
    done
    rm -rf "$work"
    echo "cluster stopped; $(($(date +%s) - started)) s in all"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

show_logs() {
    for f in "$work"/log/*; do
        echo "---- $f (last 30 lines)"
        tail -n 30 "$f"
    done
}
# start NAME COMMAND...: a daemon in the background, logging to log/NAME.out.
start() {
    daemon=$1
    shift
    "$@" >"$work/log/$daemon.out" 2>&1 &
    pids="$!:$daemon $pids" # newest first: stopped in reverse order
    echo "started $daemon (pid $!): $*"
}
alive() {
    for p in $pids; do
        kill -0 "${p%%:*}" 2>/dev/null || fail "${p#*:} (pid ${p%%:*}) died"
    done
}

mungekey -c -k "$work/munge/munge.key" || fail "mungekey could not create a key"
socket=$work/munge/munge.socket.2
start munged munged -F --key-file="$work/munge/munge.key" --socket="$socket" \
    --pid-file="$work/run/munged.pid" --seed-file="$work/munge/seed" --log-file="$work/log/munged.log"
for _ in $(seq 50); do
    [ -S "$socket" ] && break
    alive
    sleep 0.2
done
[ -S "$socket" ] || fail "munged made no socket in 10 s"

node=$(slurmd -C | head -n 1)
name=$(echo "$node" | sed -n 's/^NodeName=\([^ ]*\) .*/\1/p')
cpus=$(echo "$node" | sed -n 's/.* CPUs=\([0-9]*\) .*/\1/p')
[ -n "$name" ] && [ -n "$cpus" ] || fail "cannot read 'slurmd -C': $node"
cat >"$SLURM_CONF" <<EOF
# Generated by $0 for one test run.
ClusterName=kvxt$slot
SlurmctldHost=$name(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmdPidFile=$work/run/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
# srun --mpi=pmix keeps per-step files in TmpFS/spmix_appdir_UID_JOB.STEP;
# every run of this test numbers its jobs from 1, so a shared /tmp collides.
TmpFS=$work/tmpfs
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
KillWait=5
MinJobAge=300
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=kvxt Nodes=ALL Default=YES MaxTime=10 State=UP
EOF
start slurmctld slurmctld -D -i -f "$SLURM_CONF"
start slurmd slurmd -D -f "$SLURM_CONF"

state=
for _ in $(seq 60); do
    alive
    state=$(sinfo -h -N -n "$name" -o %T 2>/dev/null)
    [ "$state" = idle ] && break
    sleep 0.5
done
[ "$state" = idle ] || { fail "node $name is '$state', not idle, after 30 s"; }
echo "node $name ($cpus CPUs) idle after $(($(date +%s) - started)) s; ports $ctld_port/$slurmd_port"

# ---- the job ---------------------------------------------------------------------

overcommit=
[ "$ntasks" -le "$cpus" ] || overcommit=--overcommit
export KVXRUN="$top_srcdir/launch/kvx-run" KVXRUN_PROGRAM="$program" KVXRUN_LAYOUT="$layout"
export KVX_LOG_LEVEL=error TMPDIR="$work/job-tmp"
# run_job OUT SBATCH-OPTIONS... SCRIPT: submits, waits (at most 60 s) and
# shows the job's output; fails unless it COMPLETED with exit code 0:0.
run_job() {
    out=$1
    shift
    job=$(sbatch --parsable --time=2 --chdir="$work" --output="$out" "$@") || fail "sbatch failed"
    job=${job%%;*}
    echo "submitted job $job: sbatch $*"
    jstate=
    for _ in $(seq 120); do
        alive
        jstate=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case $jstate in
        PENDING | CONFIGURING | RUNNING | COMPLETING | '') sleep 0.5 ;;
        *) break ;;
        esac
    done
    exit_code=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
    echo "job $job: $jstate, exit code $exit_code"
    echo "---- job output"
    cat "$out" 2>/dev/null
    echo "----"
    [ "$jstate" = COMPLETED ] && [ "$exit_code" = 0:0 ] || fail "job $job ended $jstate ($exit_code)"
}

run_job "$work/job.out" --ntasks=$ntasks $overcommit "$top_srcdir/launch/slurm/kvx-demo.sbatch"
grep -q "^kvx-run: KVX_LAYOUT=$layout srun --mpi=pmix -n $ntasks " "$work/job.out" ||
    fail "the job did not launch through kvx-run and srun --mpi=pmix"
grep -q "$summary" "$work/job.out" || fail "the job output has no line matching '$summary'"
grep -q "$rooms" "$work/job.out" || fail "the job output has no line matching '$rooms'"
echo "ok: the sbatch template ran $layout through kvx-run and srun --mpi=pmix"

# ---- a joiner as a second job step --------------------------------------------------

export T_JOIN="$top_builddir/mpi_tests/t_join"
run_job "$work/join.out" --ntasks=3 --overcommit "$top_srcdir/mpi_tests/slurm/join.sbatch"
grep -q "^kvx-run: KVX_LAYOUT=decode:1x1 srun --mpi=pmix -n 1 " "$work/join.out" ||
    fail "the joiner did not launch through kvx-run and srun --mpi=pmix"
echo "ok: a decode instance joined a running job as a second job step (srun --mpi=pmix)"
echo "2 passed, 0 failed"
