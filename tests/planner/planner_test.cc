#include "planner/planner.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ops/row_config.h"
#include "planner/validate.h"
#include "tests/testing/plans.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::HeadsSpec;
using testing::RowsSpec;

TargetDevice H200() { return *TargetDevice::ForArch("sm_90a"); }

Plan MustPlan(const StepSpec& spec, const TargetDevice& target = H200()) {
  absl::StatusOr<Plan> plan = MakePlan(spec, target);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : Plan();
}

std::vector<std::string> Programs(const Plan& plan) {
  std::vector<std::string> out;
  for (const Launch& l : plan.launches()) out.push_back(l.program());
  return out;
}

std::vector<int> Deps(const Launch& l) { return {l.depends_on().begin(), l.depends_on().end()}; }

TEST(PlannerTest, CheckpointedDeterministicStep) {
  const Plan plan = MustPlan(RowsSpec(65536, 4096, /*deterministic=*/true));
  EXPECT_EQ(plan.format_version(), kPlanFormatVersion);
  EXPECT_EQ(plan.arch(), "sm_90a");
  EXPECT_EQ(plan.sm_count(), 132);
  EXPECT_THAT(Programs(plan), ElementsAre("rmsnorm.fwd.loop", "rmsnorm.fwd.loop",
                                          "rmsnorm.bwd.det.partials", "dw.reduce"));
  EXPECT_EQ(plan.launches(0).phase(), FORWARD);
  EXPECT_EQ(plan.launches(1).phase(), RECOMPUTE);
  EXPECT_EQ(plan.launches(2).phase(), BACKWARD);
  EXPECT_THAT(Deps(plan.launches(0)), ElementsAre());
  EXPECT_THAT(Deps(plan.launches(1)), ElementsAre(0));
  EXPECT_THAT(Deps(plan.launches(2)), ElementsAre(1));
  EXPECT_THAT(Deps(plan.launches(3)), ElementsAre(2));
  // The partials region holds one FP64 row per fixed row block at H = 4096.
  ASSERT_EQ(plan.workspace_size(), 1);
  EXPECT_EQ(plan.workspace(0).name(), "dw_partials");
  EXPECT_EQ(plan.workspace(0).bytes(), plan.launches(2).partials() * 4096 * 8);
  EXPECT_EQ(plan.launches(3).partials(), plan.launches(2).partials());
  EXPECT_GE(plan.launches(2).partials() * plan.launches(2).rows_per_block(), 65536);
  EXPECT_TRUE(plan.notes().empty());
  for (const Launch& l : plan.launches()) EXPECT_FALSE(l.reason().empty());
}

// Above H = 4096 the ungated backward's partial rows are FP32 (DwPartialBytes),
// half the region of FP64 ones; the gated op's stay FP64 at every width.
TEST(PlannerTest, PartialRowsAreFp32AboveH4096WithoutTheGate) {
  for (int64_t dim : {4096, 4104, 6144, 8192}) {
    for (int64_t tokens : {4096, 65536}) {
      const Plan plan = MustPlan(RowsSpec(tokens, dim, true, {BACKWARD}));
      const Launch* reduce = testing::LaunchOf(plan, "dw.reduce");
      ASSERT_NE(reduce, nullptr) << tokens << " " << dim;
      ASSERT_EQ(plan.workspace_size(), 1);
      EXPECT_EQ(plan.workspace(0).name(), "dw_partials");
      EXPECT_EQ(plan.workspace(0).bytes(), reduce->partials() * dim * (dim > 4096 ? 4 : 8))
          << tokens << " " << dim;
      EXPECT_THAT(reduce->reason(),
                  HasSubstr(dim > 4096 ? "sums the FP32 dw partial rows" : "sums the FP64 dw"));
    }
  }
  StepSpec gated = RowsSpec(16384, 6144, true);
  gated.set_op(RMSNORM_SILU_GATE);
  const Plan plan = MustPlan(gated);
  const Launch* reduce = testing::LaunchOf(plan, "dw.reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(plan.workspace(0).bytes(), reduce->partials() * 6144 * 8);
  EXPECT_THAT(reduce->reason(), HasSubstr("sums the FP64 dw partial rows"));
}

TEST(PlannerTest, NondeterministicSumsIntoZeroedFp64AccumulatorThenFinishes) {
  for (DType dw : {FP32, BF16}) {
    StepSpec spec = RowsSpec(65536, 512, false);
    spec.set_dw_dtype(dw);
    const Plan plan = MustPlan(spec);
    EXPECT_THAT(Programs(plan),
                ElementsAre("rmsnorm.fwd.flat", "rmsnorm.fwd.flat", "memset",
                            "rmsnorm.bwd.kb", "dw.finish"));
    ASSERT_EQ(plan.workspace_size(), 1);
    const WorkspaceRegion& r = plan.workspace(0);
    EXPECT_EQ(r.name(), "dw_acc");
    EXPECT_EQ(r.bytes(), 512 * 8);
    EXPECT_TRUE(r.zero_init());
    const Launch& memset = plan.launches(2);
    EXPECT_EQ(memset.kind(), MEMSET);
    EXPECT_EQ(memset.region(), "dw_acc");
    EXPECT_EQ(memset.memset_bytes(), 512 * 8);
    EXPECT_THAT(Deps(memset), ElementsAre()) << "the memset can overlap the forward";
    EXPECT_THAT(Deps(plan.launches(3)), ElementsAre(1, 2));
    EXPECT_THAT(Deps(plan.launches(4)), ElementsAre(3));
    EXPECT_EQ(plan.launches(3).region(), "dw_acc");
    EXPECT_EQ(plan.launches(4).region(), "dw_acc");
    EXPECT_THAT(plan.launches(4).reason(), HasSubstr(absl::StrCat("written as ", DType_Name(dw))));
  }
}

TEST(PlannerTest, AccumulateDwIsSaidInTheFinalLaunch) {
  for (bool det : {false, true}) {
    StepSpec spec = RowsSpec(4096, 2048, det, {BACKWARD});
    spec.set_accumulate_dw(true);
    const Plan plan = MustPlan(spec);
    EXPECT_THAT(Deps(plan.launches(0)), ElementsAre());
    EXPECT_THAT(plan.launches(plan.launches_size() - 1).reason(),
                HasSubstr("added into the caller's FP32 dw"));
  }
}

TEST(PlannerTest, EveryZeroInitRegionHasOneMemsetBeforeItsUsers) {
  StepSpec spec = RowsSpec(65536, 512, false);
  spec.set_dw_dtype(BF16);
  const Plan plan = MustPlan(spec);
  int zeroed = 0;
  for (const WorkspaceRegion& r : plan.workspace()) zeroed += r.zero_init();
  ASSERT_EQ(zeroed, 1) << "the kb plan zeroes its FP64 accumulator";
  for (const WorkspaceRegion& r : plan.workspace()) {
    if (!r.zero_init()) continue;
    int memsets = 0, memset_index = -1;
    for (const Launch& l : plan.launches()) {
      if (l.kind() == MEMSET && l.region() == r.name()) {
        ++memsets;
        memset_index = l.index();
      }
    }
    ASSERT_EQ(memsets, 1) << r.name();
    for (const Launch& l : plan.launches()) {
      if (l.kind() == KERNEL && l.region() == r.name()) {
        EXPECT_GT(l.index(), memset_index);
      }
    }
  }
}

TEST(PlannerTest, WorkspaceRegionsAlignedAndDisjoint) {
  // Deterministic with BF16 dw at odd sizes: partials region only, but check
  // every example of several shapes.
  for (int64_t dim : {8, 72, 1000, 4104, 16384}) {
    for (bool det : {false, true}) {
      StepSpec spec = RowsSpec(1237, dim, det);
      spec.set_dw_dtype(BF16);
      const Plan plan = MustPlan(spec);
      int64_t end = 0;
      for (const WorkspaceRegion& r : plan.workspace()) {
        EXPECT_EQ(r.offset() % kWorkspaceAlignment, 0) << r.name();
        EXPECT_GE(r.offset(), end) << "regions overlap";
        EXPECT_GT(r.bytes(), 0);
        end = r.offset() + r.bytes();
      }
      EXPECT_GE(plan.workspace_bytes(), end);
      EXPECT_EQ(plan.workspace_bytes() % kWorkspaceAlignment, 0);
    }
  }
}

TEST(PlannerTest, ZeroTokensPlansNothing) {
  const Plan plan = MustPlan(RowsSpec(0, 4096, true));
  EXPECT_EQ(plan.launches_size(), 0);
  EXPECT_EQ(plan.workspace_bytes(), 0);
  EXPECT_THAT(plan.notes(), ElementsAre("layout.tokens = 0: nothing to run"));
  EXPECT_FALSE(plan.fingerprint().empty());
}

TEST(PlannerTest, SinglePhases) {
  EXPECT_THAT(Programs(MustPlan(RowsSpec(16, 256, false, {FORWARD}))),
              ElementsAre("rmsnorm.fwd.flat"));
  EXPECT_THAT(Programs(MustPlan(RowsSpec(16, 256, false, {RECOMPUTE}))),
              ElementsAre("rmsnorm.fwd.flat"));
  EXPECT_THAT(Programs(MustPlan(RowsSpec(16, 256, true, {BACKWARD}))),
              ElementsAre("rmsnorm.bwd.split", "dw.reduce"));
}

TEST(PlannerTest, PerHeadViewsAndGatedOp) {
  const Plan q = MustPlan(HeadsSpec(4096, 24, 256, 8192, 256));
  EXPECT_EQ(q.launches(0).program(), "rmsnorm.fwd.flat");
  EXPECT_EQ(q.launches(0).block().x(), 256u);  // 16 rows of 16 lanes per CTA
  EXPECT_EQ(q.launches(0).grid().x(), 4096u * 24 / 16);
  StepSpec gate = HeadsSpec(8192, 32, 128);
  gate.set_op(RMSNORM_SILU_GATE);
  gate.set_deterministic(true);
  EXPECT_THAT(Programs(MustPlan(gate)),
              ElementsAre("rmsnorm_silu_gate.fwd.flat", "rmsnorm_silu_gate.fwd.flat",
                          "rmsnorm_silu_gate.bwd.det.partials", "dw.reduce"));
}

TEST(PlannerTest, DeterministicPartitionDependsOnShapeOnly) {
  TargetDevice half = H200();
  half.sm_count = 66;
  TargetDevice big = H200();
  big.sm_count = 264;
  for (int64_t tokens : {1, 7, 1024, 46593, 131072}) {
    const Plan a = MustPlan(RowsSpec(tokens, 4096, true), half);
    const Plan b = MustPlan(RowsSpec(tokens, 4096, true), big);
    EXPECT_EQ(a.launches(2).rows_per_block(), b.launches(2).rows_per_block());
    EXPECT_EQ(a.launches(2).partials(), b.launches(2).partials());
    EXPECT_EQ(a.workspace(0).bytes(), b.workspace(0).bytes());
    EXPECT_NE(a.fingerprint(), b.fingerprint()) << "grids differ, so plans differ";
  }
}

TEST(PlannerTest, UnknownArchOrBadTarget) {
  TargetDevice t = H200();
  t.arch = "sm_42";
  EXPECT_EQ(MakePlan(RowsSpec(8, 64), t).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TargetDevice::ForArch("sm_42").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(TargetDevice::ForArch("sm_42").status().message()),
              HasSubstr("arch = \"sm_42\": unknown; expected one of sm_90a"));
  t = H200();
  t.sm_count = 0;
  EXPECT_THAT(std::string(MakePlan(RowsSpec(8, 64), t).status().message()),
              HasSubstr("target.sm_count = 0"));
}

// A target whose CTAs may opt into less shared memory than a launch needs:
// refused, naming the field, the launch and the bytes, cached or not.
TEST(PlannerTest, LaunchBeyondTheTargetsSharedMemoryIsRefused) {
  const StepSpec spec = RowsSpec(65536, 16384, true, {BACKWARD});
  const Plan fits = MustPlan(spec);
  int32_t most = 0;
  for (const Launch& l : fits.launches()) most = std::max(most, l.dynamic_smem_bytes());
  ASSERT_GT(most, 0);
  TargetDevice small = H200();
  small.max_smem_per_block_optin = most - 1;
  const absl::Status s = MakePlan(spec, small).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("target.max_smem_per_block_optin = ", most - 1)));
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("needs ", most, " bytes")));
  small.max_smem_per_block_optin = most;
  EXPECT_TRUE(MakePlan(spec, small).ok()) << "exactly the limit fits";

  Planner planner;
  ASSERT_TRUE(planner.GetPlan(spec, H200()).ok());
  small.max_smem_per_block_optin = most - 1;
  EXPECT_EQ(planner.GetPlan(spec, small).status().code(), absl::StatusCode::kInvalidArgument)
      << "a cached plan is checked against the target too";
}

TEST(PlannerTest, InvalidSpecIsRefusedWithItsMessage) {
  StepSpec spec = RowsSpec(8, 300);
  const absl::Status s = MakePlan(spec, H200()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("layout.dim = 300"));
}

// --- fingerprints ------------------------------------------------------------

TEST(FingerprintTest, StableForEqualSpecs) {
  const Plan a = MustPlan(RowsSpec(65536, 4096, true));
  const Plan b = MustPlan(RowsSpec(65536, 4096, true));
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(a.fingerprint().size(), 32u);
  // Defaults spelled out give the same plan.
  StepSpec spelled = RowsSpec(65536, 4096, true);
  spelled.set_eps(kDefaultEps);
  spelled.set_weight_dtype(BF16);
  spelled.set_dw_dtype(FP32);
  spelled.mutable_layout()->set_heads(1);
  spelled.mutable_layout()->set_token_stride(4096);
  EXPECT_EQ(MustPlan(spelled).fingerprint(), a.fingerprint());
}

TEST(FingerprintTest, ChangesWithEveryField) {
  const StepSpec base = RowsSpec(4096, 2048, false, {FORWARD, BACKWARD});
  const std::string base_fp = MustPlan(base).fingerprint();
  const std::vector<std::pair<const char*, std::function<void(StepSpec&)>>> changes = {
      {"name", [](StepSpec& s) { s.set_name("other"); }},
      {"op", [](StepSpec& s) { s.set_op(RMSNORM_SILU_GATE); }},
      {"tokens", [](StepSpec& s) { s.mutable_layout()->set_tokens(4097); }},
      {"heads", [](StepSpec& s) { s.mutable_layout()->set_heads(2); }},
      {"dim", [](StepSpec& s) { s.mutable_layout()->set_dim(2056); }},
      {"token_stride", [](StepSpec& s) { s.mutable_layout()->set_token_stride(4096); }},
      {"head_stride",
       [](StepSpec& s) {
         s.mutable_layout()->set_heads(2);
         s.mutable_layout()->set_head_stride(4096);
       }},
      {"weight_dtype", [](StepSpec& s) { s.set_weight_dtype(FP32); }},
      {"dw_dtype", [](StepSpec& s) { s.set_dw_dtype(BF16); }},
      {"residual", [](StepSpec& s) { s.set_residual(true); }},
      {"residual_grad_in",
       [](StepSpec& s) {
         s.set_residual(true);
         s.set_residual_grad_in(true);
       }},
      {"deterministic", [](StepSpec& s) { s.set_deterministic(true); }},
      {"eps", [](StepSpec& s) { s.set_eps(1e-5); }},
      {"accumulate_dw", [](StepSpec& s) { s.set_accumulate_dw(true); }},
      {"phases",
       [](StepSpec& s) {
         s.set_phases(1, RECOMPUTE);
         s.add_phases(BACKWARD);
       }},
  };
  std::set<std::string> seen = {base_fp};
  for (const auto& [field, change] : changes) {
    StepSpec s = base;
    change(s);
    const std::string fp = MustPlan(s).fingerprint();
    EXPECT_NE(fp, base_fp) << field;
    EXPECT_TRUE(seen.insert(fp).second) << field << " collides with another change";
  }
  // And with the target: SM count and arch.
  TargetDevice t = H200();
  t.sm_count = 114;
  EXPECT_NE(MustPlan(base, t).fingerprint(), base_fp);
}

// --- the cached planner -----------------------------------------------------------

TEST(CachedPlannerTest, HitsReturnTheSamePlan) {
  Planner planner(PlannerOptions{4});
  absl::StatusOr<std::shared_ptr<const Plan>> a = planner.GetPlan(RowsSpec(64, 256), H200());
  absl::StatusOr<std::shared_ptr<const Plan>> b = planner.GetPlan(RowsSpec(64, 256), H200());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(planner.cache_stats().hits, 1);
  EXPECT_EQ(planner.cache_stats().misses, 1);
  EXPECT_EQ(planner.GetPlan(RowsSpec(64, 300), H200()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CachedPlannerTest, EightThreadsPlanEqually) {
  Planner planner(PlannerOptions{8});
  const std::vector<StepSpec> specs = {RowsSpec(65536, 4096, true), HeadsSpec(4096, 24, 256, 8192, 256),
                                       RowsSpec(1024, 1536, false), RowsSpec(7, 64, true)};
  std::vector<std::vector<std::string>> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep) {
        for (const StepSpec& s : specs) {
          absl::StatusOr<std::shared_ptr<const Plan>> p = planner.GetPlan(s, H200());
          if (rep == 0) results[t].push_back(p.ok() ? (*p)->SerializeAsString() : "error");
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 1; t < 8; ++t) EXPECT_EQ(results[t], results[0]);
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(results[0][i], MustPlan(specs[i]).SerializeAsString());
  }
  const PlanCache::Stats s = planner.cache_stats();
  EXPECT_EQ(s.hits + s.misses, 8 * 50 * 4);
  EXPECT_EQ(s.size, specs.size());
}

// Tests and cake bench --program swap a backward program: the reduce after
// it must read the partial rows the new program writes.
TEST(PlannerTest, ForcedBackwardCarriesItsPartialsToTheReduce) {
  const TargetDevice h200 = *TargetDevice::ForArch("sm_90a");
  for (int64_t tokens : {1, 1024, 16384, 46593}) {
    for (int64_t dim : {64, 4096}) {
      const Plan plan = testing::ForceStage(MustPlan(RowsSpec(tokens, dim, true, {FORWARD, BACKWARD})),
                                            "rmsnorm.bwd.split", h200);
      const Launch* split = testing::LaunchOf(plan, "rmsnorm.bwd.split");
      const Launch* reduce = testing::LaunchOf(plan, "dw.reduce");
      ASSERT_NE(split, nullptr);
      ASSERT_NE(reduce, nullptr);
      const DetPartition p = SplitPartitionOf(tokens);
      EXPECT_EQ(split->partials(), p.partials) << tokens << " " << dim;
      EXPECT_EQ(split->rows_per_block(), p.rows_per_block);
      EXPECT_EQ(reduce->partials(), p.partials);
      ASSERT_EQ(plan.workspace_size(), 1);
      EXPECT_GE(plan.workspace(0).bytes(), p.partials * dim * DwPartialBytes(dim, false))
          << tokens << " " << dim;
      EXPECT_GE(plan.workspace_bytes(), plan.workspace(0).bytes());
    }
  }
  // 65536 rows: 1024 split blocks against 763 of the fused backward, so the
  // region and the workspace grow.
  const Plan fused = MustPlan(RowsSpec(65536, 4096, true, {BACKWARD}));
  const Plan plan = testing::ForceStage(fused, "rmsnorm.bwd.split", h200);
  int64_t end = 0;
  for (const WorkspaceRegion& r : plan.workspace()) {
    EXPECT_GE(r.offset(), end) << r.name();
    EXPECT_EQ(r.offset() % kWorkspaceAlignment, 0);
    if (r.name() == "dw_partials") {
      EXPECT_EQ(r.bytes(), 1024 * 4096 * 8);
    }
    end = r.offset() + r.bytes();
  }
  EXPECT_LE(end, plan.workspace_bytes());
  EXPECT_GT(plan.workspace_bytes(), fused.workspace_bytes());
}

}  // namespace
}  // namespace cake
