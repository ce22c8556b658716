// capture_ckpt_step: spec -> plan -> CUDA graph -> replay.
//
// Plans a checkpointed step (forward, recompute, backward, dw reduce) for
// this GPU, prints the plan, builds it into one CUDA graph, replays it and
// checks every output against the FP64 reference.
//
//   build/bin/capture_ckpt_step [SPEC]   (default: the T = 65536, H = 4096 step)
#include <cstdio>

#include "examples/example_util.h"
#include "graphs/step.h"
#include "planner/explain.h"

int main(int argc, char** argv) {
  using namespace cake;
  const char* kName = "capture_ckpt_step";
  if (int rc = examples::NeedDevice(kName)) return rc;
  absl::StatusOr<Plan> plan = examples::PlanFromArgs(argc, argv);
  if (!plan.ok()) return examples::Fail(kName, plan.status());
  std::printf("%s", Explain(*plan).c_str());

  // Device buffers for every role, inputs from a seed.
  absl::StatusOr<std::unique_ptr<testing::StepBuffers>> buf = testing::StepBuffers::Create(*plan);
  if (!buf.ok()) return examples::Fail(kName, buf.status());
  (*buf)->Fill(/*seed=*/1);

  // One graph for the whole step; the plan's workspace comes with the buffers.
  absl::StatusOr<std::unique_ptr<Step>> step = Step::Build(*plan, (*buf)->b);
  if (!step.ok()) return examples::Fail(kName, step.status());
  if (absl::Status s = (*step)->Replay(/*stream=*/nullptr); !s.ok()) return examples::Fail(kName, s);
  cudaDeviceSynchronize();
  return examples::Report(kName, plan->spec(), **buf);
}
