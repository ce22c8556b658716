#!/usr/bin/env bash
# The main job: set up and build, then run the example checkpointed
# rmsnorm_train step (T = 65536, H = 4096) as one CUDA graph and check its
# outputs against the FP64 reference. On a machine without a GPU, cake run
# prints the plan, says there is no device and exits 3.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec build/bin/cake run examples/specs/ckpt_rmsnorm_t65536_h4096.textproto "$@"
