#!/bin/sh
# check-layers.sh - dependencies point down only (src/README.md):
#   src/util  ->  src/mpi src/ucx src/topo src/mem  ->  src/core  ->  include/kvx.h
# and tools/, examples/, launch/ and python/ use the public API only.
# Inside src/core each folder is a floor (src/core/README.md):
#   base -> ctx -> link -> xfer -> room -> agree -> setup -> api
# a file there includes core headers by their floor's path
# ("core/room/room.h") and only of its own floor or a lower one, except
# the upward edges tests/layers-known.txt lists; that list must be exact.
# tests/check-layers-selftest.sh shows that a planted violation fails.
set -u
LC_ALL=C
export LC_ALL
top=${top_srcdir:-$(dirname "$0")/..}
cd "$top" || exit 99
bad=0
complain() {
    echo "layer violation: $1"
    bad=1
}
for f in $(find src/util -name '*.[ch]'); do
    grep -nE '#include "(mpi|ucx|topo|mem|core)/' "$f" >/dev/null && complain "$f includes a higher layer"
    grep -nE '#include <(mpi|hwloc|cuda[a-z_]*|ucp/[^>]*)\.h>' "$f" >/dev/null && complain "$f uses a foreign library"
done
for layer in mpi ucx topo mem; do
    for f in $(find src/$layer -name '*.[ch]'); do
        grep -nE '#include "core/' "$f" >/dev/null && complain "$f includes src/core"
        for other in mpi ucx topo mem; do
            [ $other = $layer ] && continue
            grep -nE "#include \"$other/" "$f" >/dev/null && complain "$f includes src/$other (wrappers stay apart)"
        done
    done
done
for f in $(find tools examples python -name '*.[ch]' 2>/dev/null); do
    grep -nE '#include "(util|mpi|ucx|topo|mem|core)/' "$f" >/dev/null && complain "$f uses kvx internals"
done

# ---- src/core: floors ----------------------------------------------------
floors="base ctx link xfer room agree setup api"
known=${LAYERS_KNOWN:-tests/layers-known.txt}
floor_of() {
    i=0
    for x in $floors; do
        [ "$x" = "$1" ] && echo $i && return
        i=$((i + 1))
    done
    echo -1
}
found=$(mktemp) || exit 99
listed=$(mktemp) || exit 99
trap 'rm -f "$found" "$listed"' EXIT
for f in $(find src/core -name '*.[ch]' | sort); do
    case $f in
    src/core/*/*/*) complain "$f is nested below a floor (src/core/FLOOR/FILE)"; continue ;;
    src/core/*/*) ;;
    *) complain "$f is on no floor (src/core/FLOOR/FILE; floors: $floors)"; continue ;;
    esac
    fl=${f#src/core/}
    fl=${fl%%/*}
    me=$(floor_of "$fl")
    if [ "$me" -lt 0 ]; then
        complain "$f: $fl is not a floor ($floors)"
        continue
    fi
    for h in $(sed -n 's/^#[ ]*include[ ]*"\([^"]*\)".*/\1/p' "$f"); do
        case $h in
        config.h | util/* | mpi/* | ucx/* | topo/* | mem/*) ;;
        core/*/*.h)
            hf=${h#core/}
            hf=${hf%%/*}
            up=$(floor_of "$hf")
            if [ ! -f "src/$h" ] || [ "$up" -lt 0 ]; then
                complain "$f includes $h: no such header on a floor"
            elif [ "$up" -gt "$me" ]; then
                echo "$f -> $h" >>"$found"
            fi
            ;;
        *) complain "$f includes \"$h\": name a core header by its floor (\"core/FLOOR/$h\")" ;;
        esac
    done
done
if [ ! -f "$known" ]; then
    complain "$known is missing"
else
    grep -vE '^[ ]*(#|$)' "$known" | awk '{ print $1, $2, $3 }' | sort >"$listed"
    for d in $(uniq -d "$listed" | tr ' ' '@'); do
        complain "$known lists $(echo "$d" | tr '@' ' ') twice"
    done
    sort -u "$found" -o "$found"
    comm -23 "$found" "$listed" | while read -r e; do
        echo "layer violation: upward include $e (floors: $floors); invert the call, or list it with why in $known"
    done | grep . && bad=1
    comm -13 "$found" "$listed" | sort -u | while read -r e; do
        echo "layer violation: $known lists $e, which is gone: delete the line (the list only shrinks)"
    done | grep . && bad=1
fi
[ $bad -eq 0 ] && echo "ok: dependencies point down only ($(wc -l <"$found") known upward includes in src/core)"
exit $bad
