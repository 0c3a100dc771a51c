#!/usr/bin/env bash
# Sets up (packages, build) and runs every test: unit, protocol, wire vectors, interop.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
ctest --preset release -j 2 "$@"
