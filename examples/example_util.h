// Shared by the examples: load a spec, plan it for this GPU, and report.
#ifndef CAKE_EXAMPLES_EXAMPLE_UTIL_H_
#define CAKE_EXAMPLES_EXAMPLE_UTIL_H_

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "ops/target.h"
#include "planner/plan_io.h"
#include "planner/planner.h"
#include "tests/testing/step_buffers.h"

namespace cake::examples {

inline constexpr char kDefaultSpec[] = "examples/specs/ckpt_rmsnorm_t65536_h4096.textproto";

// Exit code 3 and a message when there is no GPU; 0 otherwise.
inline int NeedDevice(const char* example) {
  if (testing::HasCudaDevice()) return 0;
  std::fprintf(stderr, "%s: no CUDA device\n", example);
  return 3;
}

// The plan of the spec at argv[1] (default kDefaultSpec) for this GPU.
inline absl::StatusOr<Plan> PlanFromArgs(int argc, char** argv) {
  absl::StatusOr<StepSpec> spec = LoadSpecFile(argc > 1 ? argv[1] : kDefaultSpec);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<TargetDevice> device = TargetDevice::Current();
  if (!device.ok()) return device.status();
  return MakePlan(*spec, *device);
}

// Prints each output's worst error as a multiple of its budget; 0 when all
// are within it.
inline int Report(const char* example, const StepSpec& spec, const testing::StepBuffers& buf) {
  const testing::Worst w = testing::CheckOutputs(spec, buf);
  std::printf("%s: worst error / budget: y %.3f  rstd %.3f  dx %.3f  dz %.3f  dw %.3f  -> %s\n",
              example, w.y, w.rstd, w.dx, w.dz, w.dw, w.Within() ? "ok" : "OUTSIDE BUDGET");
  return w.Within() ? 0 : 1;
}

inline int Fail(const char* example, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", example, std::string(s.message()).c_str());
  return 1;
}

}  // namespace cake::examples

#endif  // CAKE_EXAMPLES_EXAMPLE_UTIL_H_
