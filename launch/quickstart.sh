#!/bin/sh
# quickstart.sh demo|check - from a fresh Debian 12 machine to a running kvx.
#
#   launch/quickstart.sh demo    install what is missing, build, run kvx-demo on
#                                4 ranks (prefill:1x2,decode:1x2, host memory)
#   launch/quickstart.sh check   install what is missing, build, run every test,
#                                then again under the sanitizers (tests/sanitize.sh)
#
# Packages come from Debian: apt-get installs them when run as root; otherwise
# the missing ones are listed with the command that installs them. The build
# goes to ./build (out of tree). KVX_QUICKSTART_CONFIGURE adds configure flags.
set -eu

mode=${1:-}
case $mode in
demo | check) ;;
*)
    echo "usage: $0 demo|check" >&2
    exit 2
    ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build

# Debian packages kvx needs to build and to run its tests: the Slurm ones let
# mpi_tests/slurm/one-node-cluster.sh start a private one-node cluster;
# iproute2, util-linux, mount and nftables serve the multi-host tests on
# network namespaces (mpi_tests/netns/); clang and its fuzzer runtime build
# the fuzzer of tests/fuzz/; valgrind runs the memcheck tests; jq reads
# kvx-demo's JSON summary in its tests; gnuplot-nox draws kvx-bench --plot
# (and the bench_* cases check the plot when it is there); spin checks the
# room protocol model of tests/model/; libudev-dev lets
# `pkg-config --static --libs kvx` resolve hwloc's private -ludev; doxygen
# writes the API man pages kvx_*(3); libjansson-dev lets kvx-demo --trace
# read JSON-lines traces; libxxhash-dev gives the XXH3 digests of KVX_VERIFY;
# nettle-dev the HMAC-SHA256 of the join handshake's key proofs;
# python3-dev builds the kvx Python package
# (python/kvx), and mpi4py, numpy, torch (CPU) and pytest run its tests.
packages="build-essential autoconf automake libtool autoconf-archive pkg-config \
libopenmpi-dev openmpi-bin libucx-dev ucx-utils libhwloc-dev hwloc-nox libcriterion-dev \
slurmctld slurmd slurm-client munge iproute2 util-linux mount nftables \
clang libclang-rt-14-dev valgrind jq gnuplot-nox spin libudev-dev doxygen libjansson-dev \
libxxhash-dev nettle-dev python3-dev python3-mpi4py python3-numpy python3-torch python3-pytest"

missing=
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "quickstart: installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        # shellcheck disable=SC2086
        apt-get install -y -q --no-install-recommends $missing
    else
        echo "quickstart: these Debian packages are missing:$missing" >&2
        echo "quickstart: install them with: sudo apt-get install$missing" >&2
        exit 1
    fi
fi

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    autoreconf -fi
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    # shellcheck disable=SC2086
    "$top/configure" --enable-werror ${KVX_QUICKSTART_CONFIGURE:-}
fi
make -j"$(nproc)"

case $mode in
demo)
    # kvx-demo on 4 ranks through kvx-run: a prefill instance of TP 2 sends
    # the KV of 150 requests to a decode instance of TP 2, in host memory;
    # rank 0 shows the progress, then the summary (kvx-demo --help: more).
    exec "$top/launch/kvx-run" --layout prefill:1x2,decode:1x2 -- "$build/examples/kvx-demo"
    ;;
check)
    # As root the Slurm packages are installed above, so the Slurm test must
    # run rather than skip.
    [ "$(id -u)" != 0 ] || export KVXT_REQUIRE_SLURM=1
    if ! make -j"$(nproc)" check; then
        # CI shows only the end of the output: name each failed test and
        # the lines of its log that say why.
        echo "quickstart: failed tests, and the telling lines of their logs:"
        find . -name '*.trs' -exec grep -l -E '^:test-result: (FAIL|ERROR|XPASS)' {} + |
            while read -r trs; do
                echo "==== ${trs%.trs}.log"
                grep -E -i 'check failed|FAIL|error|abort|timed out|timeout|disagree|mismatch' \
                    "${trs%.trs}.log" | grep -v 'injected failure' | tail -n 20
            done
        exit 1
    fi
    # Then the ASan+UBSan and TSan builds (build-asan/, build-tsan/) and
    # their tests; KVX_QUICKSTART_SANITIZE=no leaves them out.
    if [ "${KVX_QUICKSTART_SANITIZE:-yes}" != no ]; then
        "$top/tests/sanitize.sh"
    fi
    ;;
esac
