#include "tools/run_command.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/runner.h"
#include "graphs/step.h"
#include "ops/shape.h"
#include "planner/explain.h"
#include "planner/planner.h"
#include "tests/testing/reference.h"
#include "tests/testing/step_buffers.h"

namespace cake {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "cake run: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int RunOnDevice(const Plan& plan, int replays, uint64_t seed) {
  if (!testing::HasCudaDevice()) {
    std::printf("%s", Explain(plan).c_str());
    std::fprintf(stderr, "cake run: no CUDA device; the plan above was not run\n");
    return 3;
  }
  absl::StatusOr<TargetDevice> device = TargetDevice::Current();
  if (!device.ok()) return Fail(device.status());
  const StepSpec& spec = plan.spec();
  absl::StatusOr<std::unique_ptr<testing::StepBuffers>> buf = testing::StepBuffers::Create(plan);
  if (!buf.ok()) return Fail(buf.status());
  testing::StepBuffers& b = **buf;
  b.Fill(seed);
  // A backward alone reads the forward's rstd (and h): make them first.
  if (absl::Status s = bench::PrepareBackwardInputs(spec, *device, b.b); !s.ok()) return Fail(s);
  absl::StatusOr<std::unique_ptr<Step>> step = Step::Build(plan, b.b);
  if (!step.ok()) return Fail(step.status());
  for (int i = 0; i < replays; ++i) {
    // With accumulate_dw every replay adds into dw: start each from zero so
    // the check sees one step's gradient.
    if (spec.accumulate_dw() && cudaMemset(b.b.dw, 0, spec.layout().dim() * 4) != cudaSuccess) {
      return Fail(absl::InternalError("cudaMemset of dw failed"));
    }
    if (absl::Status s = (*step)->Replay(nullptr); !s.ok()) return Fail(s);
  }
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    return Fail(absl::InternalError(cudaGetErrorString(e)));
  }
  std::printf("plan %s on %s: %s\n", plan.fingerprint().c_str(), device->arch.c_str(),
              DescribeSpec(spec).c_str());
  std::printf("replayed %d time%s, inputs from seed %llu; worst error as a multiple of the budget:\n",
              replays, replays == 1 ? "" : "s", static_cast<unsigned long long>(seed));
  const testing::Worst w = testing::CheckOutputs(spec, b);
  struct Line {
    const char* name;
    bool shown;
    double value;
    const char* budget;
  };
  const bool forward = HasPhase(spec, FORWARD) || HasPhase(spec, RECOMPUTE);
  const bool backward = HasPhase(spec, BACKWARD);
  const bool gate = spec.op() == RMSNORM_SILU_GATE;
  const Line lines[] = {
      {"y", forward, w.y, "atol = rtol = 1e-2"},
      {"h", forward && spec.residual(), w.h, "atol = rtol = 1e-2"},
      {"rstd", forward, w.rstd, "rtol = 1e-5"},
      {"dx", backward, w.dx, "atol = rtol = 1e-2"},
      {"dz", backward && gate, w.dz, "atol = rtol = 1e-2"},
      {"dw", backward, w.dw,
       spec.dw_dtype() == BF16 ? "1e-4 + 1e-4 |ref| + one BF16 rounding" : "1e-4 + 1e-4 |ref|"},
  };
  for (const Line& l : lines) {
    if (!l.shown) continue;
    std::printf("  %-5s %8.3f  %-4s (%s)\n", l.name, l.value, l.value <= 1 ? "ok" : "FAIL",
                l.budget);
  }
  return w.Within() ? 0 : 1;
}

}  // namespace cake
