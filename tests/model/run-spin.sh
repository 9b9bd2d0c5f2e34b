#!/bin/sh
# run-spin.sh: model-checks tests/model/room.pml (kvx's room protocol) with
# spin (see README "Model checking"). One verifier is compiled per model
# variant; the scenario's bounds reach it at run time (SPIN_* variables, read
# by the model's init), so every scenario of a variant shares one compile.
# Each search is exhaustive (-DCOLLAPSE); the run fails on any property
# violation, and on a search that did not complete (depth limit, memory).
# The broken variants must fail: they are the protocol before fixes the model
# found, and show that the properties can catch them.
# Skips (77) without spin or a C compiler.
#   KVXT_SPIN_ONLY=name   run one scenario (of either list)
#   KVXT_SPIN_FULL=1      also the larger scenarios (minutes; verdict needs
#                         KVXT_SPIN_MEMLIM=12288, MiB, default 4096)
#   KVXT_SPIN_DEFS='-DX'  extra spin -D flags for the checked model
srcdir=${top_srcdir:-$(dirname "$0")/../..}
model=$srcdir/tests/model/room.pml
CC=${CC_FOR_SPIN:-cc}
command -v spin >/dev/null 2>&1 || { echo "SKIP: spin is not installed (apt-get install spin)"; exit 77; }
command -v "$CC" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($CC) to build spin's verifier"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kvx-spin.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT INT TERM

# name | variant (spin -D flags; "-" the model as built; "cycles" the model
# as built, searched for cycles: pan -DNP -l with no progress label, so any
# reachable cycle is reported -- none means every execution is finite, and
# with the stuck-state check every live rank concludes, whatever the
# scheduling: termination without a fairness assumption) | expect | bounds
# Bounds: MAXF injected failures, MAXT early deadlines, MAXC crashes;
# FRANKS/TRANKS/CRANKS: bit r lets rank r have them (ranks 0,1 prefill TP
# 0,1; 2,3 decode TP 0,1); NOOPEN: bit r, rank r never opens the room;
# ECLOSE: bit r, rank r may close it once SUCCESS there, before its instance
# agreed; NINC=2: every rank closes the concluded room and opens the id
# again (a second incarnation); MAXS rounds out of step on the instances of
# SINST (bit 0 prefill, bit 1 decode). PROMPT=1: the deadlines longer than
# KVX_TP_TIMEOUT (the state deadlines, the shadow room's) never fire, so the
# room must conclude within rounds (room.pml's "promptness"). OWNROUND=1,
# NONEXT=1, NOPVERDICT=1 switch a broken rule on at run time (the model as
# built before the fix; see room.pml), so those variants share the default
# verifier. Every scenario hands the chunk right
# at open (-DCHUNK_AT_OPEN). expect: ok, or the VIOLATION line a broken
# variant gives.
scenarios='
ok        -                       ok          MAXF=0 MAXT=0 MAXC=0
ok-cycles cycles                  ok          MAXF=0 MAXT=0 MAXC=0
crash-p1  -                       ok          MAXF=0 MAXT=0 MAXC=1 CRANKS=2
crash-d1  -                       ok          MAXF=0 MAXT=0 MAXC=1 CRANKS=8
fail-p1   -                       ok          MAXF=1 FRANKS=2 MAXT=0 MAXC=0
fail-d0   -                       ok          MAXF=1 FRANKS=4 MAXT=0 MAXC=0
broken-agreed -DNO_AGREED         agreement   MAXF=0 MAXT=0 MAXC=1 CRANKS=8
broken-break  -DNO_OPEN_BREAK     termination MAXF=0 MAXT=0 MAXC=1 CRANKS=8
broken-word   -DNO_PREFILL_WORD   agreement   MAXF=0 MAXT=0 MAXC=1 CRANKS=2
reuse     -                       ok          MAXF=0 MAXT=0 MAXC=0 NINC=2
unheld-d1 -                       ok          MAXF=0 MAXT=0 MAXC=0 ECLOSE=8
noopen-p1 -                       ok          MAXF=0 MAXT=0 MAXC=0 NOOPEN=2
noopen-d1 -                       ok          MAXF=0 MAXT=0 MAXC=0 NOOPEN=8
noopen-p1-prompt -                ok          MAXF=0 MAXT=0 MAXC=0 NOOPEN=2 PROMPT=1
noopen-d1-prompt -                ok          MAXF=0 MAXT=0 MAXC=0 NOOPEN=8 PROMPT=1
noopen-p1-cycles cycles           ok          MAXF=0 MAXT=0 MAXC=0 NOOPEN=2
broken-next   -                   progress    MAXF=0 MAXT=0 MAXC=0 NINC=2 NONEXT=1
broken-own    -                   agreement   MAXF=0 MAXT=0 MAXC=0 ECLOSE=8 OWNROUND=1
broken-own-unheld -               reason      MAXF=0 MAXT=0 MAXC=0 NOOPEN=2 OWNROUND=1
broken-pverdict -                 termination MAXF=0 MAXT=0 MAXC=0 NOOPEN=2 PROMPT=1 NOPVERDICT=1
broken-failedfirst -DFAILED_FIRST agreement   MAXF=0 MAXT=1 TRANKS=2 MAXC=1 CRANKS=8
'
full='
crash-p0  -                       ok          MAXF=0 MAXT=0 MAXC=1 CRANKS=1
crash-d0  -                       ok          MAXF=0 MAXT=0 MAXC=1 CRANKS=4
fail-p0   -                       ok          MAXF=1 FRANKS=1 MAXT=0 MAXC=0
fail-d1   -                       ok          MAXF=1 FRANKS=8 MAXT=0 MAXC=0
deadline  -                       ok          MAXF=0 MAXT=1 TRANKS=15 MAXC=0
verdict   -                       ok          MAXF=1 FRANKS=2 MAXT=1 TRANKS=4 MAXC=0
broken-precedence -DNO_VERDICT_PRECEDENCE reason MAXF=1 FRANKS=2 MAXT=1 TRANKS=4 MAXC=0
lone-p1   -                       ok          MAXF=1 FRANKS=2 MAXT=1 TRANKS=2 MAXC=0
crash-p1-cycles cycles            ok          MAXF=0 MAXT=0 MAXC=1 CRANKS=2
crash-d1-cycles cycles            ok          MAXF=0 MAXT=0 MAXC=1 CRANKS=8
fail-p1-cycles  cycles            ok          MAXF=1 FRANKS=2 MAXT=0 MAXC=0
fail-d0-cycles  cycles            ok          MAXF=1 FRANKS=4 MAXT=0 MAXC=0
unheld-p1 -                       ok          MAXF=0 MAXT=0 MAXC=0 ECLOSE=2
reuse-cycles    cycles            ok          MAXF=0 MAXT=0 MAXC=0 NINC=2
unheld-d1-cycles cycles           ok          MAXF=0 MAXT=0 MAXC=0 ECLOSE=8
skew-p    -                       ok          MAXF=0 MAXT=0 MAXC=0 MAXS=1 SINST=1
skew-d    -                       ok          MAXF=0 MAXT=0 MAXC=0 MAXS=1 SINST=2
crash-d1-lone -                   ok          MAXF=0 MAXT=1 TRANKS=2 MAXC=1 CRANKS=8
'
[ -z "$KVXT_SPIN_FULL$KVXT_SPIN_ONLY" ] || scenarios="$scenarios$full"

# build VARIANT -> the directory of its verifier (compiled once)
build() {
    d=$work/v$(printf '%s' "$1" | tr -c 'A-Za-z0-9_' '_')
    if [ ! -x "$d/pan" ]; then
        mkdir -p "$d" && cp "$model" "$d/room.pml" || return 1
        flags=$([ "$1" = - ] || [ "$1" = cycles ] || echo "$1")
        search=$([ "$1" = cycles ] && echo -DNP || echo -DSAFETY)
        # shellcheck disable=SC2086
        (cd "$d" && spin -a -DCHUNK_AT_OPEN $flags $KVXT_SPIN_DEFS room.pml >spin.out 2>&1) || { cat "$d/spin.out" >&2; return 1; }
        # -O0: pan.c is large; at -O2 the compile takes longer than it saves here.
        (cd "$d" && $CC -O0 -w $search -DCOLLAPSE -DVECTORSZ=2048 -DMEMLIM="${KVXT_SPIN_MEMLIM:-4096}" -o pan pan.c) >&2 || return 1
    fi
    echo "$d"
}

start=$(date +%s)
echo "$scenarios" | {
rc=0
while read -r name variant expect bounds; do
    [ -n "$name" ] || continue
    [ -z "$KVXT_SPIN_ONLY" ] || [ "$KVXT_SPIN_ONLY" = "$name" ] || continue
    t0=$(date +%s)
    v=$(build "$variant") || { echo "FAIL: spin $name: cannot build the verifier"; rc=1; continue; }
    d=$work/$name
    mkdir -p "$d"
    envs=$(for b in $bounds; do printf 'SPIN_%s ' "$b"; done)
    cycles=$([ "$variant" != cycles ] || echo -l)
    # shellcheck disable=SC2086
    (cd "$d" && env $envs timeout "${KVXT_SPIN_TIMEOUT:-300}" "$v/pan" $cycles -m20000 -w24 >pan.out 2>&1) ||
        echo "Search not completed (timeout or pan error)" >>"$d/pan.out"
    t1=$(date +%s)
    out=$d/pan.out
    states=$(sed -n 's/^ *\([0-9e+.]*\) states, stored.*/\1/p' "$out")
    depth=$(sed -n 's/.*depth reached \([0-9]*\), errors: \([0-9]*\).*/\1/p' "$out")
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out")
    trail=""
    # The counterexample, replayed by spin's simulator: it leaves the init's
    # c_code alone, so the bounds go in as -D flags.
    defs="-DCHUNK_AT_OPEN $([ "$variant" = - ] || [ "$variant" = cycles ] || echo "$variant") $KVXT_SPIN_DEFS $(for b in $bounds; do printf -- '-D%s ' "$b"; done)"
    if [ -f "$d/room.pml.trail" ]; then
        cp "$model" "$d/room.pml"
        # shellcheck disable=SC2086
        trail=$(cd "$d" && spin -t $defs room.pml 2>&1 | sed -n 's/^ *MSC: //p; s/^ *\(VIOLATION.*\)/\1/p')
    fi
    found=$(printf '%s\n' "$trail" | grep -m1 '^VIOLATION')
    echo "spin $name ($variant, $bounds): states $states, depth $depth, errors ${errors:-?}, $((t1 - t0)) s${found:+: $found}"
    incomplete=$(grep -E 'max search depth too small|out of memory|Search not completed' "$out")
    if [ "$expect" = ok ] && [ "$errors" = 0 ] && [ -z "$incomplete" ]; then
        continue
    fi
    if [ "$expect" != ok ] && [ "${errors:-0}" != 0 ] && printf '%s\n' "$found" | grep -q "^VIOLATION $expect:"; then
        continue # the broken variant is caught, as it must be
    fi
    [ -z "$incomplete" ] || echo "$incomplete"
    if [ "$expect" != ok ]; then
        echo "expected: VIOLATION $expect (the model no longer catches this broken variant)"
    elif [ -n "$trail" ]; then
        echo "--- counterexample (spin -t $defs room.pml) ---"
        printf '%s\n' "$trail" | tail -n 60
    fi
    echo "FAIL: spin $name"
    rc=1
done
exit $rc
}
rc=$?
echo "spin: total $(($(date +%s) - start)) s"
exit $rc
