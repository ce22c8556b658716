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

// A kernel after a kernel depends on it programmatically: its CTAs may
// launch once every CTA of the one before has started, and wait for that
// kernel's completion in ChainedKernelPrologue (ops/row_kernels.cu) before
// they touch memory; the gap between the two is then no kernel launch.
// Edges to or from a memset are full completions.
cudaGraphEdgeData EdgeBetween(const Launch& from, const Launch& to) {
  cudaGraphEdgeData e{};
  if (from.kind() == KERNEL && to.kind() == KERNEL) {
    e.from_port = cudaGraphKernelNodePortProgrammatic;
    e.type = cudaGraphDependencyTypeProgrammatic;
  }
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

absl::StatusOr<cudaMemsetParams> Step::MemsetParams(const Launch& l, const Bindings& b) const {
  CAKE_ASSIGN_OR_RETURN(void* dst, MemsetTargetOf(plan_, l, b));
  if (l.memset_bytes() <= 0 || l.memset_bytes() % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("plan launches[", l.index(),
                                                   "].memset_bytes = ", l.memset_bytes(),
                                                   ": must be a positive multiple of 4"));
  }
  cudaMemsetParams p{};
  p.dst = dst;
  p.value = 0;
  p.elementSize = 4;
  p.width = static_cast<size_t>(l.memset_bytes() / 4);
  p.height = 1;
  p.pitch = 0;
  return p;
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
  for (const Launch& l : plan.launches()) {
    if (!InPhases(l, step->phases_)) continue;
    std::vector<cudaGraphNode_t> deps;
    std::vector<cudaGraphEdgeData> edges;
    for (int d : l.depends_on()) {
      if (node_of[d] == nullptr) continue;
      deps.push_back(node_of[d]);
      edges.push_back(EdgeBetween(plan.launches(d), l));
    }
    cudaGraphNode_t node = nullptr;
    if (l.kind() == MEMSET) {
      CAKE_ASSIGN_OR_RETURN(cudaMemsetParams p, step->MemsetParams(l, b));
      CAKE_CUDA_RETURN_IF_ERROR(
          cudaGraphAddMemsetNode(&node, step->graph_, nullptr, 0, &p));
    } else {
      CAKE_ASSIGN_OR_RETURN(KernelLaunch k, MakeKernelLaunch(plan, l, b));
      const cudaKernelNodeParams p = KernelNodeParams(k);
      CAKE_CUDA_RETURN_IF_ERROR(cudaGraphAddKernelNode(&node, step->graph_, nullptr, 0, &p));
    }
    for (size_t i = 0; i < deps.size(); ++i) {
      CAKE_CUDA_RETURN_IF_ERROR(
          cudaGraphAddDependencies(step->graph_, &deps[i], &node, &edges[i], 1));
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
  std::vector<cudaMemsetParams> memsets(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Launch& l = plan_.launches(launch_index_[i]);
    if (l.kind() == MEMSET) {
      CAKE_ASSIGN_OR_RETURN(memsets[i], MemsetParams(l, b));
    } else {
      CAKE_ASSIGN_OR_RETURN(kernels[i], MakeKernelLaunch(plan_, l, b));
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (plan_.launches(launch_index_[i]).kind() == MEMSET) {
      CAKE_CUDA_RETURN_IF_ERROR(cudaGraphExecMemsetNodeSetParams(exec_, nodes_[i], &memsets[i]));
      CAKE_CUDA_RETURN_IF_ERROR(cudaGraphMemsetNodeSetParams(nodes_[i], &memsets[i]));
    } else {
      const cudaKernelNodeParams p = KernelNodeParams(kernels[i]);
      CAKE_CUDA_RETURN_IF_ERROR(cudaGraphExecKernelNodeSetParams(exec_, nodes_[i], &p));
      CAKE_CUDA_RETURN_IF_ERROR(cudaGraphKernelNodeSetParams(nodes_[i], &p));
    }
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
