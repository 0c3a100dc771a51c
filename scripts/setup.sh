#!/usr/bin/env bash
# Installs what vrnic needs to build, test and demo on Debian 12, then configures and builds.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
PKGS=(build-essential cmake ninja-build pkg-config zlib1g-dev libgtest-dev libgmock-dev
      libbenchmark-dev libcli11-dev nlohmann-json3-dev libisal-dev
      libibverbs-dev librdmacm-dev ibverbs-utils perftest qperf rdmacm-utils ucx-utils fio iperf
      sockperf libfabric-bin openmpi-bin libopenmpi-dev
      tshark python3 python3-matplotlib iproute2 ethtool nftables clang libclang-rt-14-dev
      libfuzzer-14-dev liburing-dev libsodium-dev)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
preset="${VRNIC_PRESET:-release}"
cmake --preset "$preset" -G Ninja >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
