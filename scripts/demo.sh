#!/usr/bin/env bash
# Sets up what the demo needs (its packages; vrnic and its libibverbs.so.1, not the tests)
# and runs it: unmodified Debian RDMA programs on vrnic.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh demo
exec build/release/bin/vrnic demo "$@"
