#!/bin/sh
# check-installed.sh - kvx as a user gets it. Installs this build into a
# temporary directory (make install DESTDIR=...), then builds
# examples/minimal/minimal.c with nothing but the installed header, library
# and kvx.pc -- `cc minimal.c $(pkg-config --cflags --libs kvx)`, and with
# `pkg-config --static` against libkvx.a -- and runs both on 2 ranks, with
# and without an injected failure, checking what each rank prints.
#
# With KVXT_INSTALLED=1 kvx is already installed at $DESTDIR$prefix (make
# installcheck, which make distcheck runs): it builds against that instead.
# The man pages must be there too. Needs top_srcdir, top_builddir, MPIRUN, CC,
# PKG_CONFIG, prefix, libdir, includedir and mandir (make check exports them).
set -u
: "${top_srcdir:?}" "${top_builddir:?}" "${prefix:?}" "${libdir:?}" "${includedir:?}" "${mandir:?}"
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
top_srcdir=$(cd "$top_srcdir" && pwd)
top_builddir=$(cd "$top_builddir" && pwd)

command -v "$PKG_CONFIG" >/dev/null 2>&1 || { echo "SKIP: no pkg-config"; exit 77; }
if [ -z "${MPIRUN:-}" ] || [ ! -x "$MPIRUN" ]; then
    echo "SKIP: no mpirun"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kvxt-installed.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

root=${DESTDIR:-}
if [ "${KVXT_INSTALLED:-0}" != 1 ]; then
    root=$work/root
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$top_builddir" install DESTDIR="$root" \
        >"$work/install.log" 2>&1 || { tail -n 20 "$work/install.log"; fail "make install"; }
fi
for f in "$root$includedir/kvx.h" "$root$includedir/kvx/config.h" "$root$includedir/kvx/topo.h" "$root$libdir/pkgconfig/kvx.pc" "$root$mandir/man7/kvx.7" \
    "$root$mandir/man1/kvx-run.1" "$root$mandir/man1/kvx-info.1" "$root$mandir/man1/kvx-topo.1" \
    "$root$mandir/man1/kvx-bench.1" "$root$mandir/man1/kvx-demo.1" "$root$mandir/man1/kvx-metrics.1" \
    "$root$includedir/kvx/stats.h"; do
    [ -r "$f" ] || fail "$f was not installed"
done
if [ "${KVXT_API_MAN:-}" = yes ]; then
    for p in kvx.h kvx_ctx_create kvx_room_send_chunk kvx_agree_start kvx_failure_t kvx_topo_create \
        kvx_config_var kvx_topo.h kvx_config.h; do
        [ -r "$root$mandir/man3/$p.3" ] || fail "API man page $p(3) was not installed"
    done
fi
pc() {
    PKG_CONFIG_PATH="$root$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" "$PKG_CONFIG" \
        --define-variable=libdir="$root$libdir" --define-variable=includedir="$root$includedir" \
        "$@" kvx
}
flags=$(pc --cflags --libs) || fail "pkg-config --cflags --libs kvx"
static=$(pc --static --libs) || fail "pkg-config --static --libs kvx"
echo "pkg-config --cflags --libs kvx: $flags"
case " $flags " in
*"$top_builddir"* | *"$top_srcdir/include"* | *"$top_srcdir/src"*) fail "kvx.pc points into the build tree" ;;
esac

# The installed header must build warning-free in a user's program.
src=$top_srcdir/examples/minimal/minimal.c
# shellcheck disable=SC2086
"$CC" -Wall -Wextra -Werror -o "$work/minimal" "$src" $flags -Wl,-rpath,"$root$libdir" ||
    fail "cc minimal.c \$(pkg-config --cflags --libs kvx)"
progs=$work/minimal
# The introspection headers stand on their own too.
printf '%s\n' '#include <kvx/topo.h>' '#include <kvx/config.h>' \
    'int main(void) { return kvx_config_count() > 0 && *kvx_topo_path_name(KVX_TOPO_PATH_PIX) == 80 ? 0 : 1; }' \
    >"$work/intro.c"
# shellcheck disable=SC2086
"$CC" -Wall -Wextra -Werror -o "$work/intro" "$work/intro.c" $flags -Wl,-rpath,"$root$libdir" ||
    fail "a program including only <kvx/topo.h> and <kvx/config.h> does not build"
"$work/intro" || fail "kvx_config_count() or kvx_topo_path_name() answered wrong"
if [ -r "$root$libdir/libkvx.a" ]; then
    # shellcheck disable=SC2086
    "$CC" -o "$work/minimal-static" "$src" $(pc --cflags) "$root$libdir/libkvx.a" \
        $(printf '%s\n' "$static" | sed 's/ -lkvx / /') ||
        fail "cc minimal.c libkvx.a \$(pkg-config --static --libs kvx)"
    progs="$progs $work/minimal-static"
else
    echo "no libkvx.a installed (--disable-static): the --static link is not tried"
fi

for prog in $progs; do
    for mode in ok fail; do
        arg=
        [ $mode = fail ] && arg=--fail
        printf 'np 2\ntimeout 60\nrun %s %s\n' "$prog" "$arg" >"$work/case.mpi"
        "$top_builddir/mpi_tests/run-mpi.sh" "$work/case.mpi" >"$work/out" 2>&1
        rc=$?
        cat "$work/out"
        [ $rc -eq 0 ] || fail "$(basename "$prog") $arg exited $rc"
        if [ $mode = ok ]; then
            grep -q '^decode rank 1: room 42 SUCCESS, first token 1234, pages intact$' "$work/out" ||
                fail "$(basename "$prog"): the decode did not report SUCCESS with its pages intact"
            grep -q '^prefill rank 0: room 42 SUCCESS$' "$work/out" ||
                fail "$(basename "$prog"): the prefill did not report SUCCESS"
        else
            n=$(grep -c 'room 42 FAILED: room 42 FAILED at post on prefill\[0\]\.tp0 (rank 0): injected' \
                "$work/out")
            [ "$n" = 2 ] || fail "$(basename "$prog") --fail: $n of 2 ranks gave the injected reason"
        fi
    done
done
# The Python package, where it was built: importable from the prefix's
# Python directory with the documented PYTHONPATH (docs/user/python.md),
# and it is the installed one, over the installed libkvx.
pyok=
if [ "${KVXT_PYTHON_BUILT:-no}" = yes ]; then
    : "${pyexecdir:?}" "${PYTHON:?}"
    out=$(PYTHONPATH="$root$pyexecdir" LD_LIBRARY_PATH="$root$libdir" "$PYTHON" -c \
        'import kvx, os; print(kvx.version(), os.path.realpath(kvx.__file__))' 2>&1) ||
        fail "import kvx from $root$pyexecdir: $out"
    case $out in
    "$(sed -n 's/^Version: //p' "$top_builddir/kvx.pc") $root$pyexecdir/kvx/__init__.py") ;;
    *) fail "import kvx from the installed package printed '$out'" ;;
    esac
    echo "installed Python package: kvx.version() $out"
    pyok=", and the Python package imported from $pyexecdir"
fi
echo "PASS: minimal built from the installed kvx, run with and without a failure$pyok"
