// embed_in_trainer_graph: Cake's step as a child node of a trainer's graph.
//
// The trainer's graph runs its own kernel (x *= 2, writing Cake's input),
// then Cake's checkpointed step as a child graph, then another kernel of its
// own (dx *= 2, reading Cake's output). The outputs are checked after
// undoing the last kernel: they must match x as the first kernel left it.
//
//   build/bin/embed_in_trainer_graph [SPEC]
#include <cstdio>

#include "examples/example_util.h"
#include "graphs/step.h"
#include "tests/testing/reference.h"

int main(int argc, char** argv) {
  using namespace cake;
  const char* kName = "embed_in_trainer_graph";
  if (int rc = examples::NeedDevice(kName)) return rc;
  absl::StatusOr<Plan> plan = examples::PlanFromArgs(argc, argv);
  if (!plan.ok()) return examples::Fail(kName, plan.status());
  absl::StatusOr<std::unique_ptr<testing::StepBuffers>> buf = testing::StepBuffers::Create(*plan);
  if (!buf.ok()) return examples::Fail(kName, buf.status());
  testing::StepBuffers& b = **buf;
  b.Fill(/*seed=*/2);
  absl::StatusOr<std::unique_ptr<Step>> step = Step::Build(*plan, b.b);
  if (!step.ok()) return examples::Fail(kName, step.status());

  // The trainer's graph: its kernel, Cake's step, its kernel, in a chain.
  const int64_t n = b.elems();
  testing::ScaleParams before{const_cast<void*>(b.b.x), n, 2.f}, after{b.b.dx, n, 2.f};
  void* before_args[] = {&before};
  void* after_args[] = {&after};
  cudaKernelNodeParams kernel{};
  kernel.func = const_cast<void*>(testing::ScaleBf16Kernel());
  kernel.gridDim = dim3(testing::ScaleGrid(n));
  kernel.blockDim = dim3(testing::kScaleBlock);
  cudaGraph_t trainer;
  cudaGraphNode_t first, cake_step, last;
  cudaGraphCreate(&trainer, 0);
  kernel.kernelParams = before_args;
  cudaGraphAddKernelNode(&first, trainer, nullptr, 0, &kernel);
  cudaGraphAddChildGraphNode(&cake_step, trainer, &first, 1, (*step)->Graph());
  kernel.kernelParams = after_args;
  cudaGraphAddKernelNode(&last, trainer, &cake_step, 1, &kernel);
  cudaGraphExec_t exec;
  if (cudaGraphInstantiate(&exec, trainer, 0) != cudaSuccess ||
      cudaGraphLaunch(exec, nullptr) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    return examples::Fail(kName, absl::InternalError("the trainer's graph failed"));
  }
  std::printf("trainer graph: scale x, Cake step (%d launches), scale dx: replayed\n",
              plan->launches_size());
  testing::ScaleBf16(b.b.dx, n, 0.5f);  // undo the trainer's last kernel (exact in BF16)
  cudaDeviceSynchronize();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(trainer);
  return examples::Report(kName, plan->spec(), b);
}
