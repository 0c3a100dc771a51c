#!/usr/bin/env bash
# Installs what vrnic needs on Debian 12, then configures and builds.
#   scripts/setup.sh demo   what `vrnic demo` needs: the build tools and libraries of vrnic,
#                           python3, perftest and ibverbs-utils; builds vrnic and its
#                           libibverbs.so.1 only
#   scripts/setup.sh [all]  everything the tests, fuzzers and benchmarks need; builds all
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
# To build vrnic itself (as debian/control's Build-Depends, less debhelper).
BUILD_PKGS=(build-essential cmake ninja-build pkgconf zlib1g-dev libgtest-dev libcli11-dev
            nlohmann-json3-dev libisal-dev libibverbs-dev librdmacm-dev libsodium-dev)
# To run `vrnic demo` (as the package's Recommends for it).
DEMO_PKGS=(python3 ibverbs-utils perftest)
# The tests (tests/, label by label), fuzzers, sanitizer builds and benchmarks.
TEST_PKGS=(libgmock-dev libbenchmark-dev liburing-dev qperf rdmacm-utils ucx-utils fio iperf
           sockperf libfabric-bin openmpi-bin libopenmpi-dev tshark python3-matplotlib
           iproute2 ethtool nftables clang libclang-rt-14-dev libfuzzer-14-dev man-db
           debootstrap)
case $what in
  demo) PKGS=("${BUILD_PKGS[@]}" "${DEMO_PKGS[@]}") ;;
  all) PKGS=("${BUILD_PKGS[@]}" "${DEMO_PKGS[@]}" "${TEST_PKGS[@]}") ;;
  *) echo "usage: scripts/setup.sh [demo|all]" >&2; exit 2 ;;
esac
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
preset="${VRNIC_PRESET:-release}"
cache="build/$preset/CMakeCache.txt"
if [ "$what" = demo ]; then
  # A new build tree leaves out tests/ (Open MPI and more); one set up for the tests keeps them.
  tests=()
  [ -f "$cache" ] || tests=(-DVRNIC_TESTS=OFF)
  cmake --preset "$preset" -G Ninja "${tests[@]}" >/dev/null
  cmake --build --preset "$preset" -j "$(nproc)" --target vrnic vrnic_verbs
else
  cmake --preset "$preset" -G Ninja -DVRNIC_TESTS=ON >/dev/null
  cmake --build --preset "$preset" -j "$(nproc)"
fi
