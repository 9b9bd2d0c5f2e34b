#!/bin/sh
# check-layers.sh - dependencies point down only (src/README.md):
#   src/util  ->  src/mpi src/ucx src/topo src/mem  ->  src/core  ->  include/kvx.h
# and tools/, examples/, launch/ use the public API only.
set -u
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
for f in $(find tools examples -name '*.[ch]' 2>/dev/null); do
    grep -nE '#include "(util|mpi|ucx|topo|mem|core)/' "$f" >/dev/null && complain "$f uses kvx internals"
done
[ $bad -eq 0 ] && echo "ok: dependencies point down only"
exit $bad
