#!/usr/bin/env bash
# Sets up (packages, build) and runs every test: sanitizer builds and fuzzers first
# (scripts/ci_extra.sh), then unit, protocol, wire-vector, interop and fault tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh all
TSAN_STRICT=1 ./scripts/ci_extra.sh
# The size sweeps (label `sweep`, several minutes each), the 320-host simulations (label
# `long`) and the Debian package's install test (label `package`) are run by hand:
# ctest --preset release -L 'sweep|long|package'.
ctest --preset release -j 2 -LE 'sweep|long|package' "$@"
