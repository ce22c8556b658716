// GPU correctness of rmsnorm_silu_gate_train (y = rmsnorm(x) * w * silu(z);
// dx, dz, dw) through plans, eager launches and graphs, against the FP64
// reference. Skips itself without a CUDA device.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "graphs/step.h"
#include "tests/testing/gpu_test.h"
#include "tests/testing/plans.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using testing::GpuTest;
using testing::HeadsSpec;
using testing::MustBuffers;
using testing::MustPlan;
using testing::Outputs;
using testing::RunPlan;

StepSpec Gate(int64_t tokens, int64_t heads, int64_t dim, bool det, int64_t token_stride = 0) {
  StepSpec s = HeadsSpec(tokens, heads, dim, token_stride, 0);
  s.set_op(RMSNORM_SILU_GATE);
  s.set_deterministic(det);
  return s;
}

std::string Label(const StepSpec& s) {
  const Layout& l = s.layout();
  return absl::StrCat("gate ", l.tokens(), "x", l.heads(), " D=", l.dim(),
                      l.token_stride() ? absl::StrCat(" ts=", l.token_stride()) : "",
                      s.weight_dtype() == FP32 ? " w=fp32" : " w=bf16",
                      s.dw_dtype() == BF16 ? " dw=bf16" : "", s.deterministic() ? " det" : " nondet");
}

// Forward + backward, worst of `seeds` seeds, z in [-z_scale, z_scale).
void ExpectWithinBudget(const StepSpec& spec, int seeds = 5, float z_scale = 3.f) {
  const testing::Worst worst = testing::WorstOfSeeds(spec, seeds, z_scale);
  std::printf("budget multiples  %-48s |z|<%-4g y %.3f dx %.3f dz %.3f dw %.3f rstd %.3f\n",
              Label(spec).c_str(), z_scale, worst.y, worst.dx, worst.dz, worst.dw, worst.rstd);
  EXPECT_TRUE(worst.Within()) << Label(spec) << ": y " << worst.y << " dx " << worst.dx << " dz "
                              << worst.dz << " dw " << worst.dw;
}

TEST_F(GpuTest, GateSuiteShapesWithinBudget) {
  const std::pair<int64_t, int64_t> shapes[] = {
      {260, 48}, {1031, 48}, {3534, 48}, {8192, 32}, {16384, 48}};
  for (const auto& [tokens, heads] : shapes) {
    for (bool det : {true, false}) ExpectWithinBudget(Gate(tokens, heads, 128, det));
  }
}

TEST_F(GpuTest, GateOtherHeadDimsViewsAndDtypes) {
  for (bool det : {true, false}) {
    for (int64_t dim : {64, 256}) ExpectWithinBudget(Gate(3534, 48, dim, det));
    // Strided: 48 heads of 128 inside a packed row of 64 heads.
    ExpectWithinBudget(Gate(3534, 48, 128, det, 64 * 128));
    StepSpec fp32 = Gate(8192, 32, 128, det);
    fp32.set_weight_dtype(FP32);
    ExpectWithinBudget(fp32);
    StepSpec bf16_dw = Gate(8192, 32, 128, det);
    bf16_dw.set_dw_dtype(BF16);
    ExpectWithinBudget(bf16_dw, 2);
    // Wider heads go through the wide-row kernels: 4096 (row groups of 256
    // threads, three to a CTA), 1536 and 6144 (one row of 96 or 384 threads).
    ExpectWithinBudget(Gate(512, 2, 4096, det), 2);
    ExpectWithinBudget(Gate(8209, 2, 1536, det), 2);
    ExpectWithinBudget(Gate(1031, 2, 6144, det), 2);
    // Rows of 2 vectors at 768 threads an SM (BwdGateRingAt768), routed to
    // det.partials: 3 lockstep groups of 256 threads, two CTAs of 352; and
    // D = 6552, whose 410 threads of whole warps take 512 with the gate
    // (kGateRing768MaxThreads).
    ExpectWithinBudget(Gate(4099, 1, 4096, det), 2);
    ExpectWithinBudget(Gate(6151, 1, 5632, det), 2);
    ExpectWithinBudget(Gate(2053, 1, 6552, det), 2);
    // Past 16384 rows, kb in the non-deterministic mode (its FP64 atomics
    // from two CTAs an SM, and from the lockstep groups' fold).
    ExpectWithinBudget(Gate(16411, 1, 5632, det), 1);
    ExpectWithinBudget(Gate(16411, 1, 4096, det), 1);
  }
}

TEST_F(GpuTest, GateLargeZSaturatesWithoutNaN) {
  for (bool det : {true, false}) ExpectWithinBudget(Gate(1031, 48, 128, det), 3, 30.f);
}

// The warp rows of D = 128, rows of 2 vectors at 768 threads an SM
// (BwdGateRingAt768): three 256-thread groups in lockstep (D = 4096) and
// two 384-thread CTAs (6144); and the 512-thread rows with an FP32 weight,
// z through one ring stage (BwdZOneStage), whose slots take the next
// block's first row where a CTA has several blocks (grids of 1 and 66).
TEST_F(GpuTest, GateDeterministicBackwardIsBitwiseAcrossRunsAndGrids) {
  StepSpec fp32_16384 = Gate(1031, 1, 16384, true);
  fp32_16384.set_weight_dtype(FP32);
  for (const StepSpec& spec : {Gate(3534, 48, 128, true), Gate(4099, 1, 4096, true),
                               Gate(8209, 1, 6144, true), fp32_16384}) {
    const Plan plan = MustPlan(spec);
    ASSERT_NE(testing::LaunchOf(plan, "rmsnorm_silu_gate.bwd.det.partials"), nullptr)
        << Label(spec);
    const auto buf = MustBuffers(plan);
    buf->Fill(7);
    RunPlan(plan, buf->b);
    const Outputs first(*buf);
    for (int i = 0; i < 20; ++i) {
      buf->Poison();
      RunPlan(plan, buf->b);
      ASSERT_EQ(first.Diff(*buf), 0) << Label(spec) << " run " << i;
    }
    for (uint32_t grid : {1u, 66u, 132u, 264u}) {
      Plan forced = plan;
      for (Launch& l : *forced.mutable_launches()) {
        if (l.program() == "rmsnorm_silu_gate.bwd.det.partials") l.mutable_grid()->set_x(grid);
      }
      buf->Poison();
      RunPlan(forced, buf->b);
      EXPECT_EQ(first.Diff(*buf), 0) << Label(spec) << " grid " << grid;
    }
  }
}

// The gated rows of 512 threads of 4 vectors (D = 13112..16384) come
// through the ring: a BF16 weight is kept so in shared memory
// (BwdBf16WeightSmem); beside an FP32 one z has one stage (BwdZOneStage).
// Both within budget; and with an FP32 weight that holds the BF16 weight's
// values, the two steps' outputs are the same bit for bit (same forward,
// same sums in the same order).
TEST_F(GpuTest, GateWideRowsOfABf16WeightThroughTheRing) {
  for (int64_t dim : {13112, 16384}) {
    for (int64_t tokens : {7, 1031, 4099}) {
      for (bool det : {true, false}) {
        ExpectWithinBudget(Gate(tokens, 1, dim, det), 2);
        StepSpec fp32 = Gate(tokens, 1, dim, det);
        fp32.set_weight_dtype(FP32);
        ExpectWithinBudget(fp32, 2);
      }
    }
    const StepSpec bf16 = Gate(1031, 1, dim, true);
    StepSpec fp32 = bf16;
    fp32.set_weight_dtype(FP32);
    const Plan bf16_plan = MustPlan(bf16), fp32_plan = MustPlan(fp32);
    const auto a = MustBuffers(bf16_plan), b = MustBuffers(fp32_plan);
    a->Fill(11);
    b->Fill(11);
    std::vector<uint16_t> w_bits(dim);
    std::vector<float> w(dim);
    CUDA_OK(cudaMemcpy(w_bits.data(), a->b.w, dim * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < dim; ++i) w[i] = static_cast<float>(testing::HostBf16(w_bits[i]));
    CUDA_OK(cudaMemcpy(const_cast<void*>(b->b.w), w.data(), dim * 4, cudaMemcpyHostToDevice));
    RunPlan(bf16_plan, a->b);
    RunPlan(fp32_plan, b->b);
    EXPECT_EQ(Outputs(*a).Diff(*b), 0) << Label(bf16);
  }
}

// rmsnorm_silu_gate.fwd.flat.dense forms fwd.flat's CTA-wide rows at 32
// registers (z loaded after the row sum): the same y and rstd bit for bit,
// forward and recompute (its reversed instance), and so the same backward.
TEST_F(GpuTest, GateDenseFlatForwardEqualsFlatBitwise) {
  const TargetDevice target = *TargetDevice::Current();
  for (int64_t dim : {1032, 4104, 16384}) {
    for (int64_t tokens : {7, 1031}) {
      StepSpec spec = Gate(tokens, 1, dim, true);
      spec.clear_phases();
      for (Phase p : {FORWARD, RECOMPUTE, BACKWARD}) spec.add_phases(p);
      const Plan planned = MustPlan(spec);
      const Plan flat = testing::ForceStage(planned, "rmsnorm_silu_gate.fwd.flat", target);
      const Plan dense = testing::ForceStage(planned, "rmsnorm_silu_gate.fwd.flat.dense", target);
      ASSERT_NE(testing::LaunchOf(flat, "rmsnorm_silu_gate.fwd.flat"), nullptr);
      ASSERT_NE(testing::LaunchOf(dense, "rmsnorm_silu_gate.fwd.flat.dense"), nullptr);
      const auto buf = MustBuffers(flat);
      buf->Fill(3);
      RunPlan(flat, buf->b);
      const Outputs first(*buf);
      buf->Poison();
      CUDA_OK(cudaMemset(buf->b.rstd, 0xff, tokens * 4));  // NaN until written
      CUDA_OK(cudaMemset(buf->b.dw, 0xff, dim * 4));
      RunPlan(dense, buf->b);
      EXPECT_EQ(first.Diff(*buf), 0) << Label(spec);
      EXPECT_TRUE(testing::CheckOutputs(spec, *buf).Within()) << Label(spec);
    }
  }
}

TEST_F(GpuTest, GateGraphReplayEqualsEager) {
  for (bool det : {true, false}) {
    StepSpec spec = Gate(8192, 32, 128, det);
    spec.set_weight_dtype(FP32);
    const Plan plan = MustPlan(spec);
    const auto buf = MustBuffers(plan);
    buf->Fill(9);
    RunPlan(plan, buf->b);
    const Outputs eager(*buf);
    buf->Poison();
    absl::StatusOr<std::unique_ptr<Step>> step = Step::Build(plan, buf->b);
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_TRUE((*step)->Replay(nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (det) {
      EXPECT_EQ(eager.Diff(*buf), 0);
    } else {
      EXPECT_TRUE(testing::CheckOutputs(plan.spec(), *buf).Within());
    }
  }
}

}  // namespace
}  // namespace cake
