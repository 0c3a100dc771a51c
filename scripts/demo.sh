#!/usr/bin/env bash
# Sets up (packages, build) and runs the demo: unmodified Debian RDMA programs on vrnic.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec build/release/bin/vrnic demo "$@"
