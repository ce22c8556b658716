// GPU tests of the graph engine: Step (build, replay, rebind, embed, eager
// launch, DOT) and GraphCache. Skips itself without a CUDA device.
#include "graphs/step.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graphs/graph_cache.h"
#include "planner/plan_io.h"
#include "planner/text_proto.h"
#include "tests/testing/gpu_test.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::testing::HasSubstr;
using testing::DeviceSnapshot;
using testing::GpuTest;
using testing::MustBuffers;
using testing::MustPlan;
using testing::Outputs;
using testing::RowsSpec;
using testing::StepBuffers;

std::unique_ptr<Step> MustBuild(const Plan& plan, const Bindings& b, std::vector<Phase> phases = {}) {
  absl::StatusOr<std::unique_ptr<Step>> step = Step::Build(plan, b, std::move(phases));
  EXPECT_TRUE(step.ok()) << step.status();
  return step.ok() ? std::move(*step) : nullptr;
}

void Sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }

std::vector<StepSpec> ExampleSpecs() {
  const char* env = std::getenv("CAKE_EXAMPLES_DIR");
  const std::string dir = env != nullptr ? env : "examples/specs";
  std::vector<StepSpec> specs;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() < 11 || name.substr(name.size() - 10) != ".textproto") continue;
      absl::StatusOr<StepSpec> spec = LoadSpecFile(dir + "/" + name);
      EXPECT_TRUE(spec.ok()) << spec.status();
      if (spec.ok()) specs.push_back(*spec);
    }
    closedir(d);
  }
  EXPECT_GE(specs.size(), 6u) << "run from the repository root or set CAKE_EXAMPLES_DIR";
  return specs;
}

std::vector<cudaGraphEdgeData> EdgesOf(cudaGraph_t graph) {
  size_t n = 0;
  EXPECT_EQ(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n), cudaSuccess);
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> edges(n);
  EXPECT_EQ(cudaGraphGetEdges(graph, from.data(), to.data(), edges.data(), &n), cudaSuccess);
  return edges;
}

bool Programmatic(const cudaGraphEdgeData& e) {
  return e.type == cudaGraphDependencyTypeProgrammatic &&
         e.from_port == cudaGraphKernelNodePortProgrammatic;
}

TEST_F(GpuTest, ReplayEqualsEagerForEveryExampleSpec) {
  for (StepSpec spec : ExampleSpecs()) {
    for (bool det : {true, false}) {
      spec.set_deterministic(det);
      const Plan plan = MustPlan(spec);
      const auto buf = MustBuffers(plan);
      buf->Fill(31);
      ASSERT_TRUE(LaunchEager(plan, buf->b, nullptr).ok());
      Sync();
      const Outputs eager(*buf);
      buf->Poison();
      const auto step = MustBuild(plan, buf->b);
      ASSERT_TRUE(step->Replay(nullptr).ok());
      Sync();
      const std::string what = absl::StrCat(spec.name(), det ? " det" : " nondet");
      if (det) {
        EXPECT_EQ(eager.Diff(*buf), 0) << what;
      } else {
        EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *buf).Within()) << what;
      }
    }
  }
}

TEST_F(GpuTest, CheckpointedGraphEqualsItsPhaseSubgraphsInTurn) {
  StepSpec spec = RowsSpec(8192, 4096, true);
  spec.set_residual(true);
  spec.set_residual_grad_in(true);
  const Plan plan = MustPlan(spec);
  const auto buf = MustBuffers(plan);
  buf->Fill(33);
  const auto whole = MustBuild(plan, buf->b);
  ASSERT_TRUE(whole->Replay(nullptr).ok());
  Sync();
  const Outputs one_graph(*buf);
  EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *buf).Within());
  buf->Poison();
  for (Phase phase : {FORWARD, RECOMPUTE, BACKWARD}) {
    const auto part = MustBuild(plan, buf->b, {phase});
    for (int index : part->launches()) EXPECT_EQ(plan.launches(index).phase(), phase);
    ASSERT_TRUE(part->Replay(nullptr).ok());
  }
  Sync();
  EXPECT_EQ(one_graph.Diff(*buf), 0);
}

// Every launch is a kernel node (a MEMSET launch the zero kernel), and every
// dependency of the plan a programmatic edge: a kernel's CTAs launch early
// and wait in their prologue.
TEST_F(GpuTest, EveryLaunchIsAKernelNodeChainedProgrammatically) {
  // [32768, 128] non-deterministic: a memset before the kb backward.
  for (bool det : {true, false}) {
    const Plan plan = MustPlan(RowsSpec(det ? 64 : 32768, det ? 6144 : 128, det));
    const auto buf = MustBuffers(plan);
    const auto step = MustBuild(plan, buf->b);
    size_t plan_edges = 0;
    bool memset = false;
    for (const Launch& l : plan.launches()) {
      plan_edges += l.depends_on_size();
      memset |= l.kind() == MEMSET;
    }
    EXPECT_EQ(memset, !det);
    size_t n = 0;
    ASSERT_EQ(cudaGraphGetNodes(step->Graph(), nullptr, &n), cudaSuccess);
    std::vector<cudaGraphNode_t> nodes(n);
    ASSERT_EQ(cudaGraphGetNodes(step->Graph(), nodes.data(), &n), cudaSuccess);
    EXPECT_EQ(n, static_cast<size_t>(plan.launches_size()));
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type;
      ASSERT_EQ(cudaGraphNodeGetType(node, &type), cudaSuccess);
      EXPECT_EQ(type, cudaGraphNodeTypeKernel);
    }
    const std::vector<cudaGraphEdgeData> edges = EdgesOf(step->Graph());
    EXPECT_EQ(edges.size(), plan_edges);
    for (const cudaGraphEdgeData& e : edges) EXPECT_TRUE(Programmatic(e));
  }
}

TEST_F(GpuTest, CacheHitRebindsWithoutInstantiating) {
  for (bool det : {true, false}) {
    const Plan plan = MustPlan(RowsSpec(4096, 6144, det));
    const auto a = MustBuffers(plan), b = MustBuffers(plan);
    a->Fill(41);
    b->Fill(42);
    GraphCache cache(4);
    absl::StatusOr<std::shared_ptr<Step>> step = cache.Get(plan, a->b);
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_TRUE((*step)->Replay(nullptr).ok());
    Sync();
    EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *a).Within());
    const Outputs a_out(*a);

    step = cache.Get(plan, b->b);
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_TRUE((*step)->Replay(nullptr).ok());
    Sync();
    EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *b).Within());
    EXPECT_EQ(a_out.Diff(*a), 0) << "the rebound step wrote the first buffers";
    // The same bindings again: a hit without a rebind.
    ASSERT_TRUE(cache.Get(plan, b->b).ok());
    const GraphCache::Stats s = cache.stats();
    EXPECT_EQ(s.instantiations, 1);
    EXPECT_EQ(s.misses, 1);
    EXPECT_EQ(s.hits, 2);
    EXPECT_EQ(s.rebinds, 1);
  }
}

TEST_F(GpuTest, CacheIsBoundedByEntries) {
  GraphCache cache(2);
  std::vector<std::unique_ptr<StepBuffers>> bufs;
  for (int64_t tokens : {64, 128, 256}) {
    const Plan plan = MustPlan(RowsSpec(tokens, 1024, true));
    bufs.push_back(MustBuffers(plan));
    ASSERT_TRUE(cache.Get(plan, bufs.back()->b).ok());
  }
  EXPECT_EQ(cache.stats().size, 2u);
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(cache.stats().instantiations, 3);
}

TEST_F(GpuTest, CacheFromEightThreadsInstantiatesOnce) {
  const Plan plan = MustPlan(RowsSpec(1024, 2048, true));
  const auto buf = MustBuffers(plan);
  buf->Fill(45);
  GraphCache cache(4);
  std::vector<std::thread> threads;
  std::vector<Step*> got(8, nullptr);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<std::shared_ptr<Step>> step = cache.Get(plan, buf->b);
      if (step.ok()) got[t] = step->get();
    });
  }
  for (std::thread& t : threads) t.join();
  for (Step* s : got) EXPECT_EQ(s, got[0]);
  EXPECT_NE(got[0], nullptr);
  const GraphCache::Stats s = cache.stats();
  EXPECT_EQ(s.instantiations, 1);
  EXPECT_EQ(s.hits, 7);
  EXPECT_EQ(s.rebinds, 0);
}

TEST_F(GpuTest, EmbeddedBetweenTrainerKernelsKeepsOrder) {
  const Plan plan = MustPlan(RowsSpec(4096, 2048, true));
  const auto buf = MustBuffers(plan);
  buf->Fill(51);
  const auto step = MustBuild(plan, buf->b);
  const int64_t n = buf->elems();
  // Trainer graph: x *= 2 (writes Cake's input), Cake's step, dx *= 2
  // (reads Cake's output).
  cudaGraph_t trainer;
  ASSERT_EQ(cudaGraphCreate(&trainer, 0), cudaSuccess);
  testing::ScaleParams before{const_cast<void*>(buf->b.x), n, 2.f}, after{buf->b.dx, n, 2.f};
  void* before_args[] = {&before};
  void* after_args[] = {&after};
  cudaKernelNodeParams kp{};
  kp.func = const_cast<void*>(testing::ScaleBf16Kernel());
  kp.gridDim = dim3(testing::ScaleGrid(n));
  kp.blockDim = dim3(testing::kScaleBlock);
  cudaGraphNode_t n_before, n_cake, n_after;
  kp.kernelParams = before_args;
  ASSERT_EQ(cudaGraphAddKernelNode(&n_before, trainer, nullptr, 0, &kp), cudaSuccess);
  ASSERT_EQ(cudaGraphAddChildGraphNode(&n_cake, trainer, &n_before, 1, step->Graph()), cudaSuccess);
  kp.kernelParams = after_args;
  ASSERT_EQ(cudaGraphAddKernelNode(&n_after, trainer, &n_cake, 1, &kp), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, trainer, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, nullptr), cudaSuccess);
  Sync();
  // Undo the trainer's dx *= 2 (exact in BF16), then x (now doubled) must
  // explain every output.
  testing::ScaleBf16(buf->b.dx, n, 0.5f);
  Sync();
  EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *buf).Within());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(trainer);
}

TEST_F(GpuTest, LaunchEagerInsideTheTrainersCapture) {
  const Plan plan = MustPlan(RowsSpec(4096, 4096, true));
  const auto buf = MustBuffers(plan);
  buf->Fill(61);
  const auto step = MustBuild(plan, buf->b);
  ASSERT_TRUE(step->Replay(nullptr).ok());
  Sync();
  const Outputs replayed(*buf);
  buf->Poison();
  Sync();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status s = step->LaunchEager(stream);
  cudaGraph_t captured = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &captured), cudaSuccess);
  ASSERT_TRUE(s.ok()) << s;
  // The eager launches chain their kernels as the step's graph does.
  size_t chained = 0;
  for (const cudaGraphEdgeData& e : EdgesOf(captured)) chained += Programmatic(e);
  EXPECT_GE(chained, 1u);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, captured, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(replayed.Diff(*buf), 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(captured);
  cudaStreamDestroy(stream);
}

TEST_F(GpuTest, TenThousandReplaysDoNotGrowMemory) {
  const Plan plan = MustPlan(RowsSpec(256, 1024, false));
  const auto buf = MustBuffers(plan);
  buf->Fill(71);
  const auto step = MustBuild(plan, buf->b);
  ASSERT_TRUE(step->Replay(nullptr).ok());
  Sync();
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(step->Replay(nullptr).ok()) << i;
  Sync();
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *buf).Within());
}

TEST_F(GpuTest, StepOwnsItsWorkspaceWhenNoneIsBound) {
  const Plan plan = MustPlan(RowsSpec(4096, 2048, true));
  ASSERT_GT(plan.workspace_bytes(), 0);
  const auto buf = MustBuffers(plan);
  buf->Fill(81);
  Bindings b = buf->b;
  b.workspace = nullptr;
  b.workspace_bytes = 0;
  const auto step = MustBuild(plan, b);
  EXPECT_NE(step->bindings().workspace, nullptr);
  ASSERT_TRUE(step->Replay(nullptr).ok());
  Sync();
  EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *buf).Within());
}

TEST_F(GpuTest, BadBindingsBuildNothingAndRebindChangesNothing) {
  const Plan plan = MustPlan(RowsSpec(512, 2048, true));
  const auto buf = MustBuffers(plan);
  buf->Fill(91);
  const Outputs before(*buf);

  Bindings missing = buf->b;
  missing.dx = nullptr;
  absl::StatusOr<std::unique_ptr<Step>> bad = Step::Build(plan, missing);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("bindings.dx: null"));

  Bindings small = buf->b;
  small.workspace_bytes = 256;
  bad = Step::Build(plan, small);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("bindings.workspace_bytes = 256"));
  Sync();
  EXPECT_EQ(before.Diff(*buf), 0) << "a refused build ran something";

  const auto step = MustBuild(plan, buf->b);
  Bindings misaligned = buf->b;
  misaligned.y = static_cast<char*>(buf->b.y) + 8;
  const absl::Status s = step->Rebind(misaligned);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("bindings.y = "));
  EXPECT_EQ(step->bindings(), buf->b) << "a refused rebind changed the bindings";
  ASSERT_TRUE(step->Replay(nullptr).ok());
  Sync();
  EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *buf).Within());
}

TEST_F(GpuTest, DotNamesProgramsAndFingerprint) {
  const Plan plan = MustPlan(RowsSpec(64, 6144, false));
  const auto buf = MustBuffers(plan);
  const auto step = MustBuild(plan, buf->b);
  const std::string path = ::testing::TempDir() + "/step.dot";
  ASSERT_TRUE(step->ToDot(path).ok());
  absl::StatusOr<std::string> dot = ReadFile(path);
  ASSERT_TRUE(dot.ok());
  EXPECT_THAT(*dot, HasSubstr("digraph"));
  EXPECT_THAT(*dot, HasSubstr(plan.fingerprint()));
  for (const Launch& l : plan.launches()) {
    EXPECT_THAT(*dot, HasSubstr(l.kind() == MEMSET ? "memset" : l.program()));
  }
  EXPECT_THAT(*dot, HasSubstr("n2 -> n3"));  // the backward before its dw reduce
}

}  // namespace
}  // namespace cake
