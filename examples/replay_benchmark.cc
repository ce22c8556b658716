// replay_benchmark: replay a step's graph N times and print the median span.
//
// Each replay is timed with CUDA events after a write of twice the L2
// (outside the span), so every replay starts from cold L2. The figure is
// one graph replay: all of the step's kernels and memsets.
//
//   build/bin/replay_benchmark [SPEC] [N]   (N default: 200)
#include <cstdio>
#include <cstdlib>

#include "bench/timing.h"
#include "examples/example_util.h"
#include "graphs/step.h"

int main(int argc, char** argv) {
  using namespace cake;
  const char* kName = "replay_benchmark";
  if (int rc = examples::NeedDevice(kName)) return rc;
  absl::StatusOr<Plan> plan = examples::PlanFromArgs(argc, argv);
  if (!plan.ok()) return examples::Fail(kName, plan.status());
  const int replays = argc > 2 ? std::atoi(argv[2]) : 200;
  if (replays < 1) return examples::Fail(kName, absl::InvalidArgumentError("N must be >= 1"));
  absl::StatusOr<std::unique_ptr<testing::StepBuffers>> buf = testing::StepBuffers::Create(*plan);
  if (!buf.ok()) return examples::Fail(kName, buf.status());
  (*buf)->Fill(/*seed=*/4);
  absl::StatusOr<std::unique_ptr<Step>> step = Step::Build(*plan, (*buf)->b);
  if (!step.ok()) return examples::Fail(kName, step.status());
  absl::StatusOr<bench::ColdL2> l2 = bench::ColdL2::Create();
  if (!l2.ok()) return examples::Fail(kName, l2.status());
  absl::StatusOr<std::vector<double>> spans = bench::TimeSpans(
      [&](cudaStream_t s) { return (*step)->Replay(s); }, *l2, nullptr, replays);
  if (!spans.ok()) return examples::Fail(kName, spans.status());
  std::printf("%s: %s, %d replays, median %.1f us per replay (CUDA events, cold L2)\n", kName,
              plan->spec().name().c_str(), replays, bench::Median(*spans));
  return examples::Report(kName, plan->spec(), **buf);
}
