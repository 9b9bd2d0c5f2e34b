#!/bin/sh
# run-pytest.sh - kvx's Python tests (python/tests) under make check: the
# package from the build tree, pytest driving real multi-rank jobs through
# mpi_tests/run-mpi.sh. Skips (77) with the reason when the package was not
# built or Debian's python3-mpi4py, -numpy, -torch or -pytest is missing
# (launch/quickstart.sh installs them).
set -u
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
PYTHON=${PYTHON:-/usr/bin/python3}
if [ "${KVXT_PYTHON_BUILT:-yes}" != yes ] || [ ! -e "$top_builddir/python/kvx/_kvx.so" ]; then
    echo "SKIP: the kvx Python package was not built (configure: Python)"
    exit 77
fi
missing=$("$PYTHON" - <<'PY'
import importlib.util
mods = {"mpi4py": "python3-mpi4py", "numpy": "python3-numpy", "torch": "python3-torch",
        "pytest": "python3-pytest"}
print(" ".join(pkg for mod, pkg in mods.items() if importlib.util.find_spec(mod) is None))
PY
)
if [ -n "$missing" ]; then
    echo "SKIP: $PYTHON lacks Debian's$missing (apt-get install $missing)"
    exit 77
fi
top_builddir=$(cd "$top_builddir" && pwd)
top_srcdir=$(cd "$top_srcdir" && pwd)
export top_srcdir top_builddir
PYTHONPATH="$top_builddir/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
# No cache directory in the source tree; -rA lists every test's outcome.
exec "$PYTHON" -m pytest -p no:cacheprovider -p no:hypothesispytest -v -rfEs ${KVXT_PYTEST_ARGS:-} "$top_srcdir/python/tests"
