#!/usr/bin/env bash
# Everything that needs the GPU, in one go: run from the repository root on a
# machine with a CUDA device, with build/bin built (statically) elsewhere.
#   bash tools/gpu_check.sh [OUT_DIR]     (default: $OUT, else /tmp/cake_gpu)
# CAKE_BIN names the folder of the binaries (default build/bin) and CAKE_LIB
# the folder of libcake.so (default build/lib); tools/bundle.sh makes one
# folder with both, and DIR/deps for LD_LIBRARY_PATH.
# Writes one log per step under OUT_DIR (cake bench's report as
# cake_bench.json) and prints a summary; exit 1 if any step failed.
set -uo pipefail
out=${1:-${OUT:-/tmp/cake_gpu}}
bin=${CAKE_BIN:-build/bin}
lib=${CAKE_LIB:-build/lib}
mkdir -p "$out"
failed=0
step() {  # step NAME COMMAND...: run, log, one summary line
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || failed=1
  printf '%-48s rc=%d  %s\n' "$name" "$rc" "$(grep -E 'PASSED|FAILED|SUMMARY|worst error|median|ok$|^wrote' "$out/$name.log" | tail -1)"
}
step ops_gpu_tests $bin/ops_gpu_tests
step graphs_gpu_tests $bin/graphs_gpu_tests
step capi_gpu_tests env CAKE_LIB="$lib/libcake.so" $bin/capi_gpu_tests
step bench_gpu_tests $bin/bench_gpu_tests
grep -hE "budget multiples|nondet dw" "$out/ops_gpu_tests.log" >"$out/budget.txt"
for spec in examples/specs/*.textproto; do
  step "cake_run_$(basename "$spec" .textproto)" "$bin/cake" run "$spec"
done
for example in capture_ckpt_step embed_in_trainer_graph serialize_plan replay_benchmark; do
  step "$example" "$bin/$example"
done
for tool in memcheck racecheck; do
  step "sanitizer_$tool" compute-sanitizer --tool "$tool" --error-exitcode 1 \
    $bin/ops_gpu_tests --gtest_filter=GpuTest.SmallStepsOfEveryProgram
done
step cake_bench "$bin/cake" bench --json "$out/cake_bench.json"
echo "logs in $out"
exit $failed
