#!/usr/bin/env bash
# Sets up (packages, build) and runs every test: sanitizer builds and fuzzers first
# (scripts/ci_extra.sh), then unit, protocol, wire-vector, interop and fault tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
TSAN_STRICT=1 ./scripts/ci_extra.sh
# The size sweeps (label `sweep`, several minutes each) and the 320-host simulations (label
# `long`) are run by hand: ctest --preset release -L 'sweep|long'
ctest --preset release -j 2 -LE 'sweep|long' "$@"
