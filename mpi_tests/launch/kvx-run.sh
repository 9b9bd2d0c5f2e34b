#!/bin/sh
# kvx-run.sh - tests of launch/kvx-run: layout errors, rank counts, the flags
# it adds for this machine (root, oversubscription, failure tolerance), the
# Slurm launcher choice, placement on hosts, and a few real mpirun runs.
#
# Most cases are dry runs with fake id/nproc/hwloc-calc/srun/scontrol first
# in PATH, so the machine (root or not, its core count, a Slurm allocation
# with or without pmix) is whatever the case says. The real runs need mpirun
# and are skipped without it.
set -u
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
kvx_run="$top_srcdir/launch/kvx-run"
[ -r "$kvx_run" ] || { echo "FAIL: cannot read $kvx_run"; exit 99; }

work=$(mktemp -d "${TMPDIR:-/tmp}/kvxt-kvx-run.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$work/fake" "$work/tmp"

# The fakes answer from FAKE_* variables.
cat >"$work/fake/id" <<'EOF'
#!/bin/sh
echo "${FAKE_UID:-0}"
EOF
cat >"$work/fake/nproc" <<'EOF'
#!/bin/sh
echo "${FAKE_CORES:-2}"
EOF
cp "$work/fake/nproc" "$work/fake/hwloc-calc"
cat >"$work/fake/srun" <<'EOF'
#!/bin/sh
[ "$1" = --mpi=list ] || { echo "fake srun must not run: $*"; exit 99; }
echo "MPI plugin types are..."
for p in ${FAKE_MPI_PLUGINS:-pmix none pmi2}; do printf '\t%s\n' "$p"; done
EOF
cat >"$work/fake/scontrol" <<'EOF'
#!/bin/sh
echo "${FAKE_NODES:-n1}"
EOF
chmod +x "$work/fake/"*

passed=0
failed=0
out="$work/out"

# kvx ARGS...: runs kvx-run with the fakes; output in $out, status in $rc.
kvx() {
    PATH="$work/fake:$PATH" bash "$kvx_run" "$@" >"$out" 2>&1
    rc=$?
}
ok() {
    passed=$((passed + 1))
    echo "ok: $1"
}
bad() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    sed 's/^/    | /' "$out"
}
# check WHAT WANT_RC PATTERN...: the last run exited WANT_RC and printed a
# line matching each (grep -E) PATTERN; a PATTERN starting with ! must match
# no line.
check() {
    what=$1 want=$2
    shift 2
    if [ "$rc" != "$want" ]; then
        bad "$what: exit $rc, expected $want"
        return
    fi
    for pat in "$@"; do
        case $pat in
        !*) grep -qE -e "${pat#!}" "$out" && { bad "$what: printed '${pat#!}'"; return; } ;;
        *) grep -qE -e "$pat" "$out" || { bad "$what: no line matches '$pat'"; return; } ;;
        esac
    done
    ok "$what"
}
# layout_error LAYOUT MESSAGE: kvx-run refuses LAYOUT with exit 2 and MESSAGE.
layout_error() {
    kvx --layout "$1" --dry-run -- prog
    check "layout '$1' is refused" 2 "^kvx-run: error: .*$2" '!^kvx-run: mpirun'
}

echo "# layout parsing"
layout_error '' '--layout is required'
layout_error 'junk' "'junk' is not ROLE:COUNTxTP"
layout_error 'prefill:1x2' 'has no decode part'
layout_error 'decode:1x2' 'has no prefill part'
layout_error 'prefill:0x2,decode:1x1' 'prefill instance count must be at least 1'
layout_error 'prefill:1x2,decode:1x0' 'decode TP size must be at least 1'
layout_error 'prefill:1x2,decode:1x2,' 'has an empty part'
layout_error 'prefill:1x2,prefill:1x2' 'names prefill twice'
layout_error 'prefill:1x2,decode:1x2,mixed:1x1' "unknown role 'mixed'"
layout_error 'decode:1x2,prefill:1x2' 'name prefill first'
layout_error 'prefill:ax2,decode:1x1' "prefill instance count 'a' is not a number"
layout_error 'prefill:1x2x2,decode:1x1' "prefill TP size '2x2' is not a number"
layout_error 'prefill:1x-1,decode:1x1' "prefill TP size '-1' is not a number"
layout_error 'prefill:1000x1000,decode:1x1' 'asks for 1000001 ranks'
kvx --layout prefill:1x2,decode:1x2 --dry-run
check "a missing program is refused" 2 "no program"
kvx --layout prefill:1x2,decode:1x2 --bogus --dry-run -- prog
check "an unknown option is refused" 2 "unknown option '--bogus'"

echo "# rank count and the flags this machine needs"
FAKE_CORES=32 kvx --layout prefill:2x4,decode:1x8 --dry-run -- prog -x 1
check "prefill:2x4,decode:1x8 is 16 ranks" 0 '= 16 ranks$' \
    'KVX_LAYOUT=prefill:2x4,decode:1x8 mpirun .*-np 16 .*prog -x 1$' '!--oversubscribe'
FAKE_CORES=2 kvx --layout prefill:1x2,decode:1x2 --dry-run -- prog
check "root gets --allow-run-as-root, 4 ranks on 2 cores --oversubscribe" 0 \
    'mpirun --allow-run-as-root --oversubscribe -np 4 -x KVX_LAYOUT prog$'
FAKE_UID=1000 FAKE_CORES=4 kvx --layout prefill:1x2,decode:1x2 --dry-run -- prog
check "a user on 4 cores gets neither flag" 0 'KVX_LAYOUT=prefill:1x2,decode:1x2 mpirun -np 4 -x KVX_LAYOUT prog$'
FAKE_CORES=8 kvx --layout prefill:01x2,decode:1x2 --tolerate-failures --dry-run -- prog
check "--tolerate-failures adds --enable-recovery and skips the finalize fence; layout normalized" 0 \
    'KVX_LAYOUT=prefill:1x2,decode:1x2 mpirun --allow-run-as-root --enable-recovery --mca async_mpi_finalize 1 -np 4'
KVX_LOG_LEVEL=info UCX_TLS=shm FAKE_CORES=8 kvx --layout prefill:1x1,decode:1x1 --dry-run -- prog
check "KVX_* and UCX_* variables are forwarded with -x" 0 '-x KVX_LAYOUT -x KVX_LOG_LEVEL -x UCX_TLS prog$'
FAKE_CORES=8 kvx --layout prefill:1x1,decode:1x1 --dry-run -- --mca btl self -- prog 'a b' -- c
check "launcher options go before the program; the program keeps its --" 0 \
    "-np 2 -x KVX_LAYOUT --mca btl self prog a\\\\ b -- c$"

echo "# inside a Slurm allocation"
slurm1() {
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=1 SLURM_JOB_NODELIST=n1 SLURM_TASKS_PER_NODE=4 \
        SLURM_JOB_CPUS_PER_NODE=${CPUS:-1} kvx "$@"
}
slurm1 --layout prefill:1x2,decode:1x2 --dry-run -- prog
check "srun --mpi=pmix, --overcommit for 4 tasks on 1 CPU" 0 \
    'KVX_LAYOUT=prefill:1x2,decode:1x2 srun --mpi=pmix -n 4 --kill-on-bad-exit=1 --overcommit prog$'
CPUS=4 slurm1 --layout prefill:1x2,decode:1x2 --dry-run -- prog
check "no --overcommit when the allocation has the CPUs" 0 'srun --mpi=pmix -n 4 --kill-on-bad-exit=1 prog$'
FAKE_MPI_PLUGINS="none pmi2" slurm1 --layout prefill:1x2,decode:1x2 --dry-run -- prog
check "without srun pmix: mpirun inside the allocation, and says so" 0 \
    'srun offers no pmix plugin' 'mpirun --allow-run-as-root -np 4 -x KVX_LAYOUT prog$'
slurm1 --layout prefill:1x2,decode:1x2 --tolerate-failures --dry-run -- prog
check "--tolerate-failures uses mpirun --enable-recovery inside Slurm" 0 \
    'srun would cancel the step' 'mpirun --allow-run-as-root --enable-recovery --mca async_mpi_finalize 1 -np 4 '
slurm1 --layout prefill:1x2,decode:1x2 --launcher srun --tolerate-failures --dry-run -- prog
check "--launcher srun with --tolerate-failures is refused" 2 'needs mpirun'
kvx --layout prefill:1x2,decode:1x2 --launcher srun --dry-run -- prog
check "--launcher srun outside Slurm is refused" 2 'needs a Slurm allocation'
FAKE_NODES="n1 n2 n3" SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=3 SLURM_JOB_NODELIST='n[1-3]' \
    SLURM_TASKS_PER_NODE='4(x2),2' SLURM_JOB_CPUS_PER_NODE='4(x3)' \
    kvx --layout prefill:2x2,decode:1x4 --split-roles --dry-run -- prog
check "3-node allocation, --split-roles: SLURM_HOSTFILE and arbitrary distribution" 0 \
    'prefill\[0\] ranks 0-1 on n1$' 'prefill\[1\] ranks 2-3 on n1$' 'decode\[0\] ranks 4-7 on n2$' \
    'SLURM_HOSTFILE PLACEMENT_FILE: n1 n1 n1 n1 n2 n2 n2 n2 $' \
    'SLURM_HOSTFILE=PLACEMENT_FILE srun --mpi=pmix -n 8 --kill-on-bad-exit=1 --distribution=arbitrary prog$'

echo "# placement on hosts (dry runs)"
kvx --layout prefill:2x2,decode:1x4 --hosts a:4,b:4 --dry-run -- prog
check "--hosts a:4,b:4: each instance whole on one host" 0 \
    'prefill\[0\] ranks 0-1 on a$' 'prefill\[1\] ranks 2-3 on a$' 'decode\[0\] ranks 4-7 on b$' \
    'sequential hostfile PLACEMENT_FILE: a a a a b b b b $' \
    'mpirun --allow-run-as-root -np 8 -x KVX_LAYOUT --hostfile PLACEMENT_FILE --map-by seq prog$'
kvx --layout prefill:1x2,decode:1x2 --hosts a:8,b:8 --dry-run -- prog
check "without --split-roles both roles share the first host" 0 \
    'prefill\[0\] ranks 0-1 on a$' 'decode\[0\] ranks 2-3 on a$'
kvx --layout prefill:1x2,decode:1x2 --hosts a:8,b:8 --split-roles --dry-run -- prog
check "--split-roles puts decode on another host" 0 \
    'prefill\[0\] ranks 0-1 on a$' 'decode\[0\] ranks 2-3 on b$' 'PLACEMENT_FILE: a a b b $'
FAKE_CORES=4 kvx --layout prefill:1x4,decode:2x2 --hosts a,b --split-roles --dry-run -- prog
check "--hosts without counts take this machine's cores" 0 \
    'prefill\[0\] ranks 0-3 on a$' 'decode\[0\] ranks 4-5 on b$' 'decode\[1\] ranks 6-7 on b$'
printf '# cluster\nnodeA slots=4 max_slots=8\n\nnodeB slots=2 # small\nnodeA slots=2\n' >"$work/hostfile"
kvx --layout prefill:1x6,decode:2x1 --hostfile "$work/hostfile" --split-roles --dry-run -- prog
check "--hostfile: comments, slots=, a repeated host adds up" 0 \
    'prefill\[0\] ranks 0-5 on nodeA$' 'decode\[0\] rank 6 on nodeB$' 'decode\[1\] rank 7 on nodeB$'
kvx --layout prefill:1x3,decode:1x2 --hosts a:2,b:2,c:1 --dry-run -- prog
check "an instance that fits no host spans hosts, with a warning" 0 \
    'prefill\[0\] ranks 0-2 on a\(2\),b\(1\) \(warning: this instance spans hosts\)$'
kvx --layout prefill:1x2,decode:1x2 --hosts a:8 --split-roles --dry-run -- prog
check "--split-roles with one host is refused" 2 'no host is left for decode'
kvx --layout prefill:1x2,decode:1x2 --split-roles --dry-run -- prog
check "--split-roles without hosts is refused" 2 'needs at least two hosts'
kvx --layout prefill:1x3,decode:1x2 --hosts a:2,b:2 --dry-run -- prog
check "more ranks than slots is refused" 2 'needs 5 ranks but the hosts offer 4 slots'
kvx --layout prefill:1x2,decode:1x2 --hosts a:0 --dry-run -- prog
check "a zero slot count is refused" 2 "host 'a': slot count '0'"
kvx --layout prefill:1x2,decode:1x2 --hosts a,,b --dry-run -- prog
check "an empty host name is refused" 2 'empty host name'
kvx --layout prefill:1x1,decode:1x1 --rankfile "$work/hostfile" --dry-run -- prog
check "--rankfile is handed to mpirun" 0 "--rankfile $work/hostfile prog$"

echo "# instances that join a running job (dry runs)"
(umask 077 && printf '%064d' 7 >"$work/job.key")
kvx --layout decode:1x2 --join 10.0.0.1:4000 --join-key "$work/job.key" --dry-run -- prog
check "--join: the joiner's layout alone, its address and key by path" 0 \
    'KVX_LAYOUT=decode:1x2 mpirun .*-np 2 .*-x KVX_JOIN -x KVX_JOIN_KEY_FILE .*prog$' \
    '= 2 ranks$' "!0000000000000007"
kvx --layout prefill:1x1,decode:1x1 --join 10.0.0.1:4000 --join-key "$work/job.key" --dry-run -- prog
check "--join with a whole job's layout is refused" 2 'with --join the layout names the joining instance alone'
kvx --layout decode:1x1 --join 10.0.0.1:4000 --dry-run -- prog
check "--join without a key is refused" 2 "--join needs the job's key"
chmod 644 "$work/job.key"
kvx --layout prefill:1x1,decode:1x1 --join-key "$work/job.key" --dry-run -- prog
check "a key others can read is refused" 2 'must be yours and readable by no one else \(uid [0-9]+, mode 644\)'
chmod 600 "$work/job.key"
kvx --layout prefill:1x1,decode:1x1 --join-key "$work/job.key" --join-address-file "$work/addr" --dry-run -- prog
check "a job that takes joiners exports its key and address file" 0 \
    '-x KVX_JOIN_ADDRESS_FILE -x KVX_JOIN_KEY_FILE -x KVX_LAYOUT prog$'

echo "# real runs"
if ! command -v mpirun >/dev/null 2>&1; then
    echo "skipped: mpirun is not installed"
else
    # Each rank prints its rank, world size and KVX_LAYOUT; all lines sorted.
    export TMPDIR="$work/tmp"
    show='echo "rank $OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE $KVX_LAYOUT"'
    real() {
        timeout -k 5 60 bash "$kvx_run" "$@" >"$out" 2>&1
        rc=$?
    }
    real --layout prefill:1x2,decode:1x2 -- sh -c "$show"
    check "4 ranks start and see KVX_LAYOUT" 0 '^kvx-run: KVX_LAYOUT=prefill:1x2,decode:1x2 mpirun ' \
        '^rank 0/4 prefill:1x2,decode:1x2$' '^rank 3/4 prefill:1x2,decode:1x2$'
    real --layout prefill:1x2,decode:1x1 --hosts "$(hostname):3" -- sh -c "$show"
    check "--hosts with this host: the sequential hostfile works" 0 '--map-by seq' \
        '^rank 0/3 ' '^rank 2/3 prefill:1x2,decode:1x1$'
    [ -z "$(find "$work/tmp" -name 'kvx-run.hosts.*')" ] && ok "the placement file is removed" ||
        bad "the placement file is left in $work/tmp"
    die_rank1='[ "$OMPI_COMM_WORLD_RANK" = 1 ] && kill -9 $$; sleep 2; echo "rank $OMPI_COMM_WORLD_RANK survived"'
    real --layout prefill:1x1,decode:1x2 --tolerate-failures -- sh -c "$die_rank1"
    check "--tolerate-failures: ranks 0 and 2 outlive rank 1" 0 '^rank 0 survived$' '^rank 2 survived$'
    real --layout prefill:1x1,decode:1x2 -- sh -c "$die_rank1"
    check "without it the job ends with the dead rank" 137 '!^rank [0-9] survived'
    real --layout prefill:1x1,decode:1x1 -- sh -c 'exit 3'
    check "the program's exit status comes back" 3
    # Under --enable-recovery mpirun exits 0 whatever the ranks did: the
    # ranks of a kvx program record their statuses and kvx-run says them.
    if [ -x mpi_tests/t_exit ]; then
        texit=$PWD/mpi_tests/t_exit
        real --layout prefill:1x1,decode:1x2 --tolerate-failures -- "$texit" 1=3
        check "--tolerate-failures: a rank's exit status 3 comes back" 3 \
            '^kvx-run: exit statuses: 3 of 3 ranks exited: rank 1 exited 3$'
        real --layout prefill:1x1,decode:1x2 --tolerate-failures -- "$texit" 1=kill
        check "--tolerate-failures: a killed rank is named, the survivors' 0 comes back" 0 \
            '^t_exit: rank 0: exit 0$' '^t_exit: rank 2: exit 0$' \
            '^kvx-run: exit statuses: 2 of 3 ranks exited, all 0; no status from rank\(s\) 1: killed'
        real --layout prefill:1x1,decode:1x2 --tolerate-failures -- "$texit" 1=kill 2=4
        check "--tolerate-failures: a killed rank and a survivor's exit 4" 4 \
            'rank 2 exited 4; no status from rank\(s\) 1'
        real --layout prefill:1x1,decode:1x2 --tolerate-failures -- sh -c 'exit 0'
        check "--tolerate-failures, not a kvx program: the launcher's status, said so" 0 \
            '^kvx-run: no rank recorded its exit status'
        [ -z "$(find "$work/tmp" -name 'kvx-run.status.*')" ] && ok "the status directory is removed" ||
            bad "the status directory is left in $work/tmp"
    else
        echo "skipped: mpi_tests/t_exit is not built (make check builds it)"
    fi
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
