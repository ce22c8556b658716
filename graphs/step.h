// A Step: the launches of a plan as one CUDA graph, built explicitly (a
// kernel node per launch from its KernelLaunch, MEMSET launches as the zero
// kernel; programmatic edges from the plan's dependencies), instantiated
// once and replayed, rebound to new buffers by per-node updates, embedded in
// a trainer's graph, or launched eagerly.
#ifndef CAKE_GRAPHS_STEP_H_
#define CAKE_GRAPHS_STEP_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cake/plan.pb.h"
#include "ops/launch.h"

namespace cake {

// A DOT graph of the plan's launches of `phases` (empty: all): one node per
// launch labelled with its index, phase, program id (or memset region) and
// the plan fingerprint; edges from the plan's dependencies. Needs no device.
std::string PlanDot(const Plan& plan, absl::Span<const Phase> phases = {});

class Step {
 public:
  // Builds the graph of the plan's launches of `phases` (empty: all, the
  // whole checkpointed step) bound to `bindings`, and instantiates it. When
  // the plan needs a workspace and bindings.workspace is null, the Step
  // allocates one and owns it for its lifetime. Bad bindings are an
  // InvalidArgumentError and build nothing.
  static absl::StatusOr<std::unique_ptr<Step>> Build(const Plan& plan, const Bindings& bindings,
                                                     std::vector<Phase> phases = {});
  ~Step();
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;

  // One launch of the instantiated graph on `stream`.
  absl::Status Replay(cudaStream_t stream);
  // Points every node at new buffers with per-node updates of the
  // instantiated graph (and of the graph Graph() returns); no
  // re-instantiation. On error nothing changes.
  absl::Status Rebind(const Bindings& bindings);
  // The same launches without the graph, with the current bindings; correct
  // inside a stream capture of `stream`.
  absl::Status LaunchEager(cudaStream_t stream) const;
  // The graph, owned by the Step, to embed in a trainer's graph as a child
  // node (cudaGraphAddChildGraphNode copies it).
  cudaGraph_t Graph() const { return graph_; }
  // A DOT file of the graph: one node per launch labelled with its program id
  // and phase, the plan fingerprint as the graph's label.
  absl::Status ToDot(const std::string& path) const;
  std::string Dot() const;

  const Plan& plan() const { return plan_; }
  const Bindings& bindings() const { return bindings_; }
  // Whether the step already points at `bindings` (a null workspace meaning
  // the step's own).
  bool BoundTo(const Bindings& bindings) const { return WithWorkspace(bindings) == bindings_; }
  // The plan's launch index of each graph node, in node order.
  const std::vector<int>& launches() const { return launch_index_; }

 private:
  Step(Plan plan, std::vector<Phase> phases) : plan_(std::move(plan)), phases_(std::move(phases)) {}
  // The bindings with the owned workspace filled in where the caller gave none.
  Bindings WithWorkspace(Bindings b) const;

  Plan plan_;
  std::vector<Phase> phases_;
  Bindings bindings_;
  void* owned_workspace_ = nullptr;
  std::vector<int> launch_index_;
  std::vector<cudaGraphNode_t> nodes_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace cake

#endif  // CAKE_GRAPHS_STEP_H_
