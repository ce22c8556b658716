#include "graphs/step.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ops/status.h"
#include "planner/text_proto.h"

namespace cake {
namespace {

// The kernel-node parameters of a KernelLaunch; `k` must outlive the call
// that consumes them (CUDA copies the parameter values).
cudaKernelNodeParams KernelNodeParams(KernelLaunch& k) {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(k.function);
  p.gridDim = k.grid;
  p.blockDim = k.block;
  p.sharedMemBytes = k.dynamic_smem_bytes;
  p.kernelParams = k.args();
  p.extra = nullptr;
  return p;
}

// Every node is a kernel (a MEMSET launch runs the zero kernel), and each
// depends on the ones before it programmatically: its CTAs may launch once
// every CTA of those has started, and wait for their completion in
// ChainedKernelPrologue (ops/row_kernels.cu) before they touch memory; the
// gap between two kernels is then no kernel launch.
cudaGraphEdgeData ChainedEdge() {
  cudaGraphEdgeData e{};
  e.from_port = cudaGraphKernelNodePortProgrammatic;
  e.type = cudaGraphDependencyTypeProgrammatic;
  return e;
}

}  // namespace

std::string PlanDot(const Plan& plan, absl::Span<const Phase> phases) {
  std::string out = absl::StrFormat(
      "digraph cake_step {\n  label=\"plan %s (%s, %s)\";\n  node [shape=box];\n",
      plan.fingerprint(), plan.arch(), plan.spec().name());
  for (const Launch& l : plan.launches()) {
    if (!InPhases(l, phases)) continue;
    const std::string what =
        l.kind() == MEMSET
            ? absl::StrCat("memset ", l.region(), " (", l.memset_bytes(), " B)")
            : absl::StrCat(l.program(), "\\ngrid ", l.grid().x(), " block ", l.block().x(),
                           l.block().y() > 1 ? absl::StrCat("x", l.block().y()) : "");
    absl::StrAppendFormat(&out, "  n%d [label=\"[%d] %s\\n%s\\nplan %s\"];\n", l.index(),
                          l.index(), Phase_Name(l.phase()), what, plan.fingerprint());
  }
  for (const Launch& l : plan.launches()) {
    if (!InPhases(l, phases)) continue;
    for (int d : l.depends_on()) {
      if (InPhases(plan.launches(d), phases)) absl::StrAppendFormat(&out, "  n%d -> n%d;\n", d, l.index());
    }
  }
  out += "}\n";
  return out;
}

Bindings Step::WithWorkspace(Bindings b) const {
  if (b.workspace == nullptr && owned_workspace_ != nullptr) {
    b.workspace = owned_workspace_;
    b.workspace_bytes = plan_.workspace_bytes();
  }
  return b;
}

absl::StatusOr<std::unique_ptr<Step>> Step::Build(const Plan& plan, const Bindings& bindings,
                                                  std::vector<Phase> phases) {
  std::unique_ptr<Step> step(new Step(plan, std::move(phases)));
  if (plan.workspace_bytes() > 0 && bindings.workspace == nullptr) {
    CAKE_CUDA_RETURN_IF_ERROR(cudaMalloc(&step->owned_workspace_, plan.workspace_bytes()));
  }
  const Bindings b = step->WithWorkspace(bindings);
  CAKE_RETURN_IF_ERROR(CheckBindings(plan, b));
  step->bindings_ = b;
  CAKE_CUDA_RETURN_IF_ERROR(cudaGraphCreate(&step->graph_, 0));
  // Graph nodes of the plan's launches, by launch index (null: not in this
  // step; its dependents are ordered by the caller running phases in turn).
  std::vector<cudaGraphNode_t> node_of(plan.launches_size(), nullptr);
  const cudaGraphEdgeData chained = ChainedEdge();
  for (const Launch& l : plan.launches()) {
    if (!InPhases(l, step->phases_)) continue;
    CAKE_ASSIGN_OR_RETURN(KernelLaunch k, MakeKernelLaunch(plan, l, b));
    const cudaKernelNodeParams p = KernelNodeParams(k);
    cudaGraphNode_t node = nullptr;
    CAKE_CUDA_RETURN_IF_ERROR(cudaGraphAddKernelNode(&node, step->graph_, nullptr, 0, &p));
    for (int d : l.depends_on()) {
      if (node_of[d] == nullptr) continue;
      CAKE_CUDA_RETURN_IF_ERROR(
          cudaGraphAddDependencies(step->graph_, &node_of[d], &node, &chained, 1));
    }
    node_of[l.index()] = node;
    step->nodes_.push_back(node);
    step->launch_index_.push_back(l.index());
  }
  CAKE_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&step->exec_, step->graph_, 0));
  return step;
}

Step::~Step() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  if (owned_workspace_ != nullptr) cudaFree(owned_workspace_);
}

absl::Status Step::Replay(cudaStream_t stream) {
  if (nodes_.empty()) return absl::OkStatus();  // T = 0: nothing to run
  CAKE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream));
  return absl::OkStatus();
}

absl::Status Step::Rebind(const Bindings& bindings) {
  const Bindings b = WithWorkspace(bindings);
  CAKE_RETURN_IF_ERROR(CheckBindings(plan_, b));
  // Build every node's parameters before the first update, so that an error
  // leaves the step as it was.
  std::vector<KernelLaunch> kernels(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    CAKE_ASSIGN_OR_RETURN(kernels[i], MakeKernelLaunch(plan_, plan_.launches(launch_index_[i]), b));
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const cudaKernelNodeParams p = KernelNodeParams(kernels[i]);
    CAKE_CUDA_RETURN_IF_ERROR(cudaGraphExecKernelNodeSetParams(exec_, nodes_[i], &p));
    CAKE_CUDA_RETURN_IF_ERROR(cudaGraphKernelNodeSetParams(nodes_[i], &p));
  }
  bindings_ = b;
  return absl::OkStatus();
}

absl::Status Step::LaunchEager(cudaStream_t stream) const {
  return cake::LaunchEager(plan_, bindings_, stream, phases_);
}

std::string Step::Dot() const { return PlanDot(plan_, phases_); }

absl::Status Step::ToDot(const std::string& path) const { return WriteFile(path, Dot()); }

}  // namespace cake
