#!/usr/bin/env bash
# The main job: set up and build, then explain the plan of the example
# checkpointed rmsnorm_train step (T = 65536, H = 4096).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
build/bin/cake explain examples/specs/ckpt_rmsnorm_t65536_h4096.textproto
