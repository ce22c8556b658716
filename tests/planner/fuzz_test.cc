// 10,000 random specs: each either plans or is refused with
// InvalidArgumentError; every plan made passes the loader's checks and keeps
// the workspace and dependency invariants.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/registry.h"
#include "ops/row_config.h"
#include "planner/plan_io.h"
#include "planner/planner.h"

namespace cake {
namespace {

template <typename T>
T Pick(std::mt19937_64& rng, const std::vector<T>& values) {
  return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
}

// A valid spec of random shape and options.
StepSpec RandomValidSpec(std::mt19937_64& rng) {
  StepSpec s;
  s.set_op(Pick<Op>(rng, {RMSNORM, RMSNORM_SILU_GATE}));
  Layout* l = s.mutable_layout();
  l->set_tokens(Pick<int64_t>(rng, {0, 1, 7, 1024, 46593, 131072, 1048576}));
  l->set_dim(Pick<int64_t>(rng, {8, 64, 128, 256, 1000, 1536, 4096, 6144, 16384}));
  if (Pick<int>(rng, {0, 1})) {
    l->set_heads(Pick<int64_t>(rng, {2, 4, 24, 48}));
    l->set_head_stride(l->dim() * Pick<int64_t>(rng, {0, 1, 2}));
    if (Pick<int>(rng, {0, 1})) l->set_token_stride((l->heads() + 8) * l->dim());
  } else {
    if (s.op() == RMSNORM) s.set_residual(Pick<int>(rng, {0, 1}));
    if (Pick<int>(rng, {0, 1})) l->set_token_stride(l->dim() + 64);
  }
  s.set_weight_dtype(Pick<DType>(rng, {DTYPE_UNSPECIFIED, BF16, FP32}));
  s.set_dw_dtype(Pick<DType>(rng, {DTYPE_UNSPECIFIED, FP32, s.weight_dtype()}));
  s.set_deterministic(Pick<int>(rng, {0, 1}));
  if (Pick<int>(rng, {0, 1})) s.set_eps(Pick<double>(rng, {1e-6, 1e-5}));
  const std::vector<std::vector<Phase>> phase_lists = {
      {FORWARD}, {RECOMPUTE}, {BACKWARD}, {FORWARD, BACKWARD}, {FORWARD, RECOMPUTE, BACKWARD}};
  for (Phase p : phase_lists[std::uniform_int_distribution<size_t>(0, 4)(rng)]) s.add_phases(p);
  const bool backward = s.phases(s.phases_size() - 1) == BACKWARD;
  if (backward && s.residual()) s.set_residual_grad_in(Pick<int>(rng, {0, 1}));
  if (backward && s.dw_dtype() != BF16) s.set_accumulate_dw(Pick<int>(rng, {0, 1}));
  return s;
}

// Breaks one field of a spec with a value from a hostile set (which may, by
// chance, still be valid).
void Corrupt(std::mt19937_64& rng, StepSpec& s) {
  Layout* l = s.mutable_layout();
  switch (std::uniform_int_distribution<int>(0, 13)(rng)) {
    case 0: s.set_op(static_cast<Op>(Pick<int>(rng, {-1, 0, 3, 1000}))); break;
    case 1: s.clear_layout(); break;
    case 2: l->set_tokens(Pick<int64_t>(rng, {-5, int64_t{1} << 31, int64_t{1} << 62, INT64_MAX})); break;
    case 3: l->set_heads(Pick<int64_t>(rng, {-1, int64_t{1} << 40, INT64_MAX})); break;
    case 4: l->set_dim(Pick<int64_t>(rng, {-8, 0, 4, 300, 16392, int64_t{1} << 50, INT64_MIN})); break;
    case 5: l->set_token_stride(Pick<int64_t>(rng, {-8, 8, 8196, int64_t{1} << 45, INT64_MAX})); break;
    case 6: l->set_head_stride(Pick<int64_t>(rng, {-8, 8, 260, int64_t{1} << 42, INT64_MAX})); break;
    case 7: s.set_weight_dtype(static_cast<DType>(Pick<int>(rng, {-1, 3, 77}))); break;
    case 8: s.set_dw_dtype(static_cast<DType>(Pick<int>(rng, {-1, 1, 3}))); break;
    case 9: s.set_residual(true); break;
    case 10: s.set_residual_grad_in(true); break;
    case 11: s.set_accumulate_dw(true); break;
    case 12: s.set_eps(Pick<double>(rng, {-1.0, 0.0, 1e300, std::nan(""), -0.0})); break;
    case 13: s.add_phases(static_cast<Phase>(Pick<int>(rng, {-1, 0, 1, 2, 3, 9}))); break;
  }
}

StepSpec RandomSpec(std::mt19937_64& rng) {
  StepSpec s = RandomValidSpec(rng);
  const int corruptions = Pick<int>(rng, {0, 0, 1, 1, 2, 3});
  for (int i = 0; i < corruptions; ++i) Corrupt(rng, s);
  return s;
}

TEST(PlannerFuzzTest, TenThousandRandomSpecsNeverCrash) {
  std::mt19937_64 rng(20261129);
  const TargetDevice target = *TargetDevice::ForArch("sm_90a");
  int planned = 0, refused = 0, nonempty = 0;
  for (int i = 0; i < 10000; ++i) {
    const StepSpec spec = RandomSpec(rng);
    absl::StatusOr<Plan> plan = MakePlan(spec, target);
    if (!plan.ok()) {
      ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument)
          << plan.status() << "\n" << spec.DebugString();
      ASSERT_FALSE(plan.status().message().empty());
      ++refused;
      continue;
    }
    ++planned;
    ASSERT_TRUE(CheckPlan(*plan, target).ok()) << spec.DebugString();
    int64_t end = 0;
    for (const WorkspaceRegion& r : plan->workspace()) {
      ASSERT_EQ(r.offset() % kWorkspaceAlignment, 0);
      ASSERT_GE(r.offset(), end);
      end = r.offset() + r.bytes();
    }
    ASSERT_GE(plan->workspace_bytes(), end);
    for (const Launch& l : plan->launches()) {
      if (l.kind() != KERNEL) continue;
      const ProgramInfo* p = FindProgram(l.program());
      ASSERT_NE(p, nullptr);
      ASSERT_GE(l.grid().x(), 1u);
      ASSERT_GE(l.block().x() * l.block().y(), 32u);
      ASSERT_LE(l.block().x() * l.block().y(), 1024u);
      ASSERT_LE(l.dynamic_smem_bytes(), target.max_smem_per_block_optin);
      if (p->stage == Stage::kForward || p->stage == Stage::kBackward) {
        ASSERT_TRUE(CheckSupports(*p, plan->spec()).ok()) << l.program();
      }
    }
    if (plan->launches_size() > 0) ++nonempty;
  }
  // The generator reaches both outcomes often, or the test proves little.
  EXPECT_GT(planned, 500);
  EXPECT_GT(nonempty, 300);
  EXPECT_GT(refused, 1000);
  std::printf("random specs: %d planned (%d with launches), %d refused\n", planned, nonempty, refused);
}

}  // namespace
}  // namespace cake
