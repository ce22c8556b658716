#!/usr/bin/env bash
# The whole test suite: set up and build, then every test through CTest. GPU
# tests skip themselves on a machine without a CUDA device and are reported
# as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
ctest --test-dir build --output-on-failure --timeout 600
