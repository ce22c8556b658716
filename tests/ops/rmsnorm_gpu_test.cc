// GPU correctness of the row programs through plans and the eager launch
// path, against the FP64 reference of tests/testing/reference.cu. Skips
// itself without a CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ops/launch.h"
#include "ops/registry.h"
#include "ops/row_kernels.h"
#include "ops/shape.h"
#include "planner/planner.h"
#include "planner/routing.h"
#include "planner/validate.h"
#include "tests/testing/plans.h"
#include "tests/testing/gpu_test.h"
#include "tests/testing/reference.h"
#include "tests/testing/step_buffers.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::testing::HasSubstr;
using testing::DeviceSnapshot;
using testing::Gated;
using testing::GpuTest;
using testing::HeadsSpec;
using testing::MustBuffers;
using testing::MustPlan;
using testing::RowsSpec;
using testing::RunPlan;
using testing::WithResidualGradIn;

std::string Label(const StepSpec& s) {
  const Layout& l = s.layout();
  return absl::StrCat(s.op() == RMSNORM ? "rmsnorm" : "gate", " T=", l.tokens(),
                      l.heads() > 1 ? absl::StrCat(" heads=", l.heads()) : "", " dim=", l.dim(),
                      l.token_stride() ? absl::StrCat(" ts=", l.token_stride()) : "",
                      s.weight_dtype() == FP32 ? " w=fp32" : " w=bf16",
                      s.dw_dtype() == BF16 ? " dw=bf16" : "", s.residual() ? " residual" : "",
                      s.deterministic() ? " det" : " nondet");
}

void ExpectWithinBudget(const StepSpec& spec, int seeds = 5) {
  const testing::Worst w = testing::WorstOfSeeds(spec, seeds);
  std::printf("budget multiples  %-60s y %.3f dx %.3f dz %.3f dw %.3f rstd %.3f h %.3f\n",
              Label(spec).c_str(), w.y, w.dx, w.dz, w.dw, w.rstd, w.h);
  EXPECT_TRUE(w.Within()) << Label(spec) << ": y " << w.y << " dx " << w.dx << " dz " << w.dz
                          << " dw " << w.dw << " rstd " << w.rstd << " h " << w.h;
}

// --- the reference checks itself ------------------------------------------------

TEST_F(GpuTest, CpuAndGpuReferencesAgree) {
  std::vector<StepSpec> specs = {RowsSpec(7, 64), HeadsSpec(5, 3, 256, 1024, 256), RowsSpec(3, 1536)};
  specs[2].set_residual(true);
  specs[2].set_residual_grad_in(true);
  StepSpec gate = HeadsSpec(4, 2, 128);
  gate.set_op(RMSNORM_SILU_GATE);
  gate.set_weight_dtype(FP32);
  specs.push_back(gate);
  for (const StepSpec& spec : specs) {
    const Plan plan = MustPlan(spec);
    const auto buf = MustBuffers(plan);
    buf->Fill(42);
    const testing::HostRef cpu = testing::CpuReference(buf->Inputs());
    const testing::HostRef gpu = testing::GpuReference(buf->Inputs());
    auto close = [](const std::vector<double>& a, const std::vector<double>& b) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::fabs(a[i] - b[i]) > 1e-9 * (1 + std::fabs(a[i]))) return false;
      }
      return true;
    };
    EXPECT_TRUE(close(cpu.y, gpu.y)) << Label(spec);
    EXPECT_TRUE(close(cpu.dx, gpu.dx)) << Label(spec);
    EXPECT_TRUE(close(cpu.dz, gpu.dz)) << Label(spec);
    EXPECT_TRUE(close(cpu.dw, gpu.dw)) << Label(spec);
    EXPECT_TRUE(close(cpu.rstd, gpu.rstd)) << Label(spec);
  }
}

// --- every program on small shapes (also the compute-sanitizer target) -------------

TEST_F(GpuTest, SmallStepsOfEveryProgram) {
  std::vector<StepSpec> specs;
  for (bool det : {true, false}) {
    specs.push_back(RowsSpec(7, 64, det));
    specs.push_back(RowsSpec(33, 1536, det));
    specs.back().set_dw_dtype(BF16);
    specs.push_back(RowsSpec(5, 16384, det));
    specs.push_back(HeadsSpec(5, 24, 256, 8192, 256));
    specs.back().set_deterministic(det);
    specs.push_back(RowsSpec(9, 6144, det));
    specs.back().set_residual(true);
    specs.back().set_residual_grad_in(true);
    specs.push_back(RowsSpec(9, 12288, det));  // dh_in with rows of 4 vectors
    specs.back().set_residual(true);
    specs.back().set_residual_grad_in(true);
    specs.push_back(RowsSpec(9, 10240, det));  // gated rows of 4 vectors through the ring
    specs.back().set_op(RMSNORM_SILU_GATE);
    specs.push_back(RowsSpec(9, 16384, det));  // and at 512 threads, the weight in BF16
    specs.back().set_op(RMSNORM_SILU_GATE);
    specs.push_back(RowsSpec(9, 16384, det));  // or FP32, z through one stage
    specs.back().set_op(RMSNORM_SILU_GATE);
    specs.back().set_weight_dtype(FP32);
    specs.push_back(HeadsSpec(3, 4, 128));
    specs.back().set_op(RMSNORM_SILU_GATE);
    specs.back().set_deterministic(det);
    specs.push_back(RowsSpec(6, 2048, det));
    specs.back().set_op(RMSNORM_SILU_GATE);
    specs.back().set_weight_dtype(FP32);
    specs.push_back(HeadsSpec(5, 3, 512));  // the flat forward's 2-vector warp rows
    specs.back().set_op(RMSNORM_SILU_GATE);
    specs.back().set_deterministic(det);
  }
  // The gated kb backward: non-deterministic, past 16384 rows.
  specs.push_back(HeadsSpec(4200, 4, 8));
  specs.back().set_op(RMSNORM_SILU_GATE);
  specs.back().set_deterministic(false);
  std::set<std::string> ran;
  for (const StepSpec& spec : specs) {
    ExpectWithinBudget(spec, 1);
    const Plan plan = MustPlan(spec);
    for (const Launch& l : plan.launches()) ran.insert(l.program());
  }
  // Every forward program the table may not route on these shapes, in place
  // of the routed one (rows enough for several row groups per CTA where a
  // program prefetches).
  StepSpec gate = HeadsSpec(3000, 4, 128, 0, 0);
  gate.set_op(RMSNORM_SILU_GATE);
  gate.clear_phases();
  gate.add_phases(FORWARD);
  StepSpec gate_bwd = HeadsSpec(3, 4, 128);
  gate_bwd.set_op(RMSNORM_SILU_GATE);
  gate_bwd.set_deterministic(true);
  const StepSpec residual_bwd = WithResidualGradIn(RowsSpec(9, 6144, true));
  // The fused backward at a few rows: lockstep groups with rows short of a
  // step (4096), and two rows a ring step (BwdRingPairs, 8192) with and
  // without dh_in.
  const StepSpec residual_pairs = WithResidualGradIn(RowsSpec(29, 8192, true));
  // The gated split backward's two 128-thread row groups a CTA (H = 1032..2048).
  const StepSpec gate_split_2048 = Gated(RowsSpec(6, 2048, true));
  StepSpec residual_fwd = RowsSpec(9, 2568, true, {FORWARD});
  residual_fwd.set_residual(true);
  const StepSpec gate_groups = Gated(RowsSpec(9, 768, true, {FORWARD}));
  // The dense gated rows: 1024 threads, and 288 whose last warp holds one
  // vector (with the recompute's reversed instance).
  const StepSpec gate_dense = Gated(RowsSpec(9, 16384, true, {FORWARD}));
  const StepSpec gate_dense_ckpt = Gated(RowsSpec(700, 4104, true));
  // The gated rows of 2 vectors at 768 threads an SM (BwdGateRingAt768):
  // three 256-thread groups in lockstep with rows short of a step, and a
  // run-time width of 352 threads.
  const StepSpec gate_lockstep = Gated(RowsSpec(13, 4096, true));
  const StepSpec gate_352 = Gated(RowsSpec(7, 5632, true));
  const struct {
    StepSpec spec;
    const char* to;
  } forced[] = {
      // The warp rows through the ring (2, 3 and 4 vectors a thread), the
      // last step short of rows, the dh_in instance of 3 and the gate's of 3
      // and 4.
      {RowsSpec(13, 384, true), "rmsnorm.bwd.det.partials"},
      {RowsSpec(13, 768, true), "rmsnorm.bwd.det.partials"},
      {WithResidualGradIn(RowsSpec(13, 640, true)), "rmsnorm.bwd.det.partials"},
      {Gated(RowsSpec(13, 704, true)), "rmsnorm_silu_gate.bwd.det.partials"},
      {RowsSpec(13, 1024, true), "rmsnorm.bwd.det.partials"},
      {Gated(RowsSpec(13, 776, true)), "rmsnorm_silu_gate.bwd.det.partials"},
      {RowsSpec(3000, 2048, true, {FORWARD}), "rmsnorm.fwd.loop"},
      {residual_fwd, "rmsnorm.fwd.loop"},
      {RowsSpec(33, 1536, true), "rmsnorm.bwd.split"},
      // From 4096 packed rows its dx CTAs prefetch the rows ahead into L2
      // (SplitL2AheadRows), up to the last row.
      {RowsSpec(4099, 1536, true), "rmsnorm.bwd.split"},
      {residual_bwd, "rmsnorm.bwd.split"},
      {RowsSpec(9, 6144, true), "rmsnorm.bwd.split"},  // FP32 partial rows, 3 vectors
      {RowsSpec(9, 4608, true), "rmsnorm.bwd.split"},  // two rows of 3 vectors a dx CTA
      {RowsSpec(9, 2304, true), "rmsnorm.bwd.split"},  // four 128-thread rows of 3 vectors
      {RowsSpec(9, 768, true), "rmsnorm.bwd.split"},   // eight 64-thread rows of 2 vectors
      {gate_bwd, "rmsnorm_silu_gate.bwd.split"},
      {gate_split_2048, "rmsnorm_silu_gate.bwd.split"},
      {RowsSpec(17, 512, true, {FORWARD}), "rmsnorm.fwd.warp"},
      {RowsSpec(17, 512, true, {FORWARD}), "rmsnorm.fwd.cta"},
      {RowsSpec(20000, 256, true, {FORWARD}), "rmsnorm.fwd.warp.prefetch"},
      {RowsSpec(3000, 2048, true, {FORWARD}), "rmsnorm.fwd.cta.prefetch"},
      {RowsSpec(3000, 2048, true, {FORWARD}), "rmsnorm.fwd.flat"},
      {RowsSpec(3000, 2048, true, {FORWARD}), "rmsnorm.fwd.flat.dense"},
      // Four 64-thread row groups a CTA, the last CTA's last three empty.
      {RowsSpec(9, 768, true, {FORWARD}), "rmsnorm.fwd.flat"},
      {RowsSpec(9, 1024, true, {FORWARD}), "rmsnorm.fwd.flat.dense"},
      {RowsSpec(9, 1536, true, {FORWARD}), "rmsnorm.fwd.flat.dense"},  // 96-thread rows
      {RowsSpec(3000, 6144, true, {FORWARD}), "rmsnorm.fwd.flat.wide"},
      // 96 threads, and 128 whose last warp holds 29 of its 32 threads' vectors.
      {RowsSpec(700, 3072, true, {FORWARD}), "rmsnorm.fwd.flat.wide"},
      {RowsSpec(700, 4000, true, {FORWARD}), "rmsnorm.fwd.flat.wide"},
      {RowsSpec(33, 1536, true), "rmsnorm.bwd.det.lockstep"},
      {RowsSpec(37, 4096, true), "rmsnorm.bwd.det.partials"},
      {RowsSpec(13, 8192, true), "rmsnorm.bwd.det.partials"},
      {residual_pairs, "rmsnorm.bwd.det.partials"},
      {gate, "rmsnorm_silu_gate.fwd.warp"},
      {gate, "rmsnorm_silu_gate.fwd.warp.prefetch"},
      {gate, "rmsnorm_silu_gate.fwd.cta"},
      // Four gated 64-thread row groups a CTA, the last CTA's last three empty.
      {gate_groups, "rmsnorm_silu_gate.fwd.flat.groups"},
      {gate_dense, "rmsnorm_silu_gate.fwd.flat.dense"},
      {gate_dense_ckpt, "rmsnorm_silu_gate.fwd.flat.dense"},
      {gate_lockstep, "rmsnorm_silu_gate.bwd.det.partials"},
      {gate_352, "rmsnorm_silu_gate.bwd.det.partials"},
  };
  auto run_forced = [&](const Plan& plan, const std::string& to) {
    ASSERT_NE(testing::LaunchOf(plan, to), nullptr) << to;
    const auto buf = MustBuffers(plan);
    buf->Fill(7);
    RunPlan(plan, buf->b);
    const testing::Worst w = testing::CheckOutputs(plan.spec(), *buf);
    EXPECT_TRUE(w.Within()) << to << ": y " << w.y << " dx " << w.dx << " dw " << w.dw;
    ran.insert(to);
  };
  for (const auto& f : forced) {
    run_forced(testing::ForceStage(MustPlan(f.spec), f.to, *TargetDevice::Current()), f.to);
  }
  // kb's rows of 4 vectors through the ring (BwdWideRing), 512 threads and
  // a run-time width of 320, in place of det.partials (routed there since
  // table .48), with its zeroed accumulator and dw.finish.
  for (const StepSpec& spec : {RowsSpec(5, 16384, false), RowsSpec(7, 10240, false)}) {
    const absl::StatusOr<Plan> plan = testing::PlanRoutedTo(
        spec, *FindProgram("rmsnorm.bwd.kb"), *TargetDevice::Current(), "a test");
    ASSERT_TRUE(plan.ok()) << plan.status();
    run_forced(*plan, "rmsnorm.bwd.kb");
  }
  for (const ProgramInfo& p : Programs()) EXPECT_EQ(ran.count(std::string(p.id)), 1u) << p.id;
}

// --- accuracy budget, both modes, worst of 5 seeds ---------------------------------

class RowsAccuracyTest : public GpuTest, public ::testing::WithParamInterface<int64_t> {};

TEST_P(RowsAccuracyTest, BothModesWithinBudget) {
  const int64_t dim = GetParam();
  for (int64_t tokens : {1, 7, 1024, 46593, 131072}) {
    for (bool det : {true, false}) ExpectWithinBudget(RowsSpec(tokens, dim, det));
  }
  for (int64_t tokens : {7, 46593}) {
    for (bool det : {true, false}) {
      StepSpec fp32 = RowsSpec(tokens, dim, det);
      fp32.set_weight_dtype(FP32);
      ExpectWithinBudget(fp32);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(H, RowsAccuracyTest,
                         ::testing::Values(64, 256, 1536, 2048, 4096, 5120, 6144, 8192, 16384));

// Rows of 4 vectors a thread (H > 8192) come through the backward's ring
// (BwdWideRing): whole warps of 288 and 320 threads and the widest of them,
// 416; H = 16384's 512 threads are RowsAccuracyTest's. Blocks (one a CTA)
// of 4 rows at 7 rows (8 with the gate), of 8 at 1031 and of 32 at 4099, in
// both modes (det.partials routed in both); an FP32 weight; the fused
// residual's dh_in. kb's rows of 4 vectors: the 20 runs below.
TEST_F(GpuTest, WideRowsThroughTheRingWithinBudget) {
  for (int64_t dim : {8200, 10240, 13104}) {
    for (int64_t tokens : {7, 1031, 4099}) {
      for (bool det : {true, false}) ExpectWithinBudget(RowsSpec(tokens, dim, det), 2);
    }
  }
  StepSpec fp32 = RowsSpec(1031, 12288, true);
  fp32.set_weight_dtype(FP32);
  ExpectWithinBudget(fp32, 2);
  // The gated rows of a run-time width (x, dy and z through the ring; at 512
  // threads, D = 13112..16384: GateWideRowsOfABf16WeightThroughTheRing).
  for (int64_t tokens : {7, 1031, 4099}) {
    for (bool det : {true, false}) {
      StepSpec gate = RowsSpec(tokens, tokens == 4099 ? 12288 : 10240, det);
      gate.set_op(RMSNORM_SILU_GATE);
      ExpectWithinBudget(gate, 2);
    }
  }
  // dh_in loaded before the row sums (BwdDhInEarly): a run-time width (384
  // threads) and 512 threads.
  for (int64_t dim : {12288, 16384}) {
    for (bool det : {true, false}) {
      StepSpec residual = RowsSpec(1031, dim, det);
      residual.set_residual(true);
      residual.set_residual_grad_in(true);
      ExpectWithinBudget(residual, 2);
    }
  }
}

TEST_F(GpuTest, PerHeadViewsWithinBudget) {
  for (int64_t tokens : {4096, 65536}) {
    for (bool det : {true, false}) {
      StepSpec strided = HeadsSpec(tokens, 24, 256, 32 * 256, 256);
      strided.set_deterministic(det);
      ExpectWithinBudget(strided);
      StepSpec contiguous = HeadsSpec(tokens, 4, 256);
      contiguous.set_deterministic(det);
      ExpectWithinBudget(contiguous);
    }
  }
}

TEST_F(GpuTest, StridedViewsLeaveTheGapsAlone) {
  const StepSpec spec = HeadsSpec(4096, 24, 256, 32 * 256, 256);
  const Plan plan = MustPlan(spec);
  const auto buf = MustBuffers(plan);
  buf->Fill(3);
  const int64_t n = buf->elems();
  std::vector<uint16_t> y_before(n), dx_before(n), y_after(n), dx_after(n);
  CUDA_OK(cudaMemcpy(y_before.data(), buf->b.y, n * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(dx_before.data(), buf->b.dx, n * 2, cudaMemcpyDeviceToHost));
  RunPlan(plan, buf->b);
  CUDA_OK(cudaMemcpy(y_after.data(), buf->b.y, n * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(dx_after.data(), buf->b.dx, n * 2, cudaMemcpyDeviceToHost));
  int64_t gap_changed = 0, head_unchanged = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool in_head = (i % (32 * 256)) < 24 * 256;
    if (in_head) {
      head_unchanged += y_after[i] == y_before[i];
    } else {
      gap_changed += (y_after[i] != y_before[i]) + (dx_after[i] != dx_before[i]);
    }
  }
  EXPECT_EQ(gap_changed, 0);
  EXPECT_LT(head_unchanged, n / 100) << "most head elements must have been written";
}

TEST_F(GpuTest, FusedResidualWithinBudget) {
  for (int64_t tokens : {1024, 46593}) {
    for (bool det : {true, false}) {
      StepSpec spec = RowsSpec(tokens, 6144, det);
      spec.set_residual(true);
      spec.set_residual_grad_in(true);
      ExpectWithinBudget(spec);
      spec.set_residual_grad_in(false);
      ExpectWithinBudget(spec, 2);
    }
  }
  // dh_in through each ring width's instance of its own (BwdDhInEarly: 64,
  // 128, 256 and 512 threads a row; 6144 above), past 16384 rows where the
  // fused backward is routed.
  for (int64_t dim : {1024, 2048, 4096, 8192}) {
    for (bool det : {true, false}) {
      StepSpec spec = RowsSpec(16387, dim, det);
      spec.set_residual(true);
      spec.set_residual_grad_in(true);
      ExpectWithinBudget(spec, 2);
    }
  }
}

TEST_F(GpuTest, Bf16DwWithinBudget) {
  for (bool det : {true, false}) {
    for (DType w : {BF16, FP32}) {
      StepSpec spec = RowsSpec(46593, 2048, det);
      spec.set_weight_dtype(w);
      spec.set_dw_dtype(w);
      ExpectWithinBudget(spec, 2);
    }
  }
}

TEST_F(GpuTest, AccumulateDwAddsIntoExistingGradient) {
  for (bool det : {true, false}) {
    StepSpec spec = RowsSpec(4096, 1536, det, {FORWARD, BACKWARD});
    spec.set_accumulate_dw(true);
    const Plan plan = MustPlan(spec);
    const auto buf = MustBuffers(plan);
    buf->Fill(5);
    std::vector<float> prior(1536);
    for (int i = 0; i < 1536; ++i) prior[i] = 0.25f * (i % 7) - 0.5f;
    CUDA_OK(cudaMemcpy(buf->b.dw, prior.data(), 1536 * 4, cudaMemcpyHostToDevice));
    RunPlan(plan, buf->b);
    std::vector<double> ref;
    testing::CheckRows(buf->Inputs(), testing::RefOutputs{}, &ref);
    for (int i = 0; i < 1536; ++i) ref[i] += prior[i];
    EXPECT_LE(testing::DwViolation(buf->Dw(), ref), 1.0) << (det ? "det" : "nondet");
  }
}

// --- determinism -----------------------------------------------------------------

// `program`: a backward in place of the routed one (empty: the routed one).
void ExpectBitwiseDeterministic(const StepSpec& spec_in, const std::string& program = "") {
  StepSpec spec = spec_in;
  spec.set_deterministic(true);
  const Plan plan = program.empty()
                        ? MustPlan(spec)
                        : testing::ForceStage(MustPlan(spec), program, *TargetDevice::Current());
  const auto buf = MustBuffers(plan);
  buf->Fill(9);
  RunPlan(plan, buf->b);
  const int64_t bytes = buf->elems() * 2;
  const DeviceSnapshot dx0(buf->b.dx, bytes);
  const std::vector<float> dw0 = buf->Dw();
  auto same = [&](const char* what) {
    EXPECT_EQ(testing::CountDiff(dx0.get(), buf->b.dx, bytes), 0) << what;
    const std::vector<float> dw = buf->Dw();
    EXPECT_EQ(std::memcmp(dw.data(), dw0.data(), dw.size() * 4), 0) << what;
  };
  for (int i = 0; i < 20; ++i) {
    buf->Poison();
    CUDA_OK(cudaMemset(buf->b.dw, 0, spec.layout().dim() * 4));
    RunPlan(plan, buf->b);
    same("rerun");
  }
  // The partition is fixed by the shape; the grid only decides which CTA
  // takes which block.
  for (uint32_t grid : {1u, 66u, 132u, 264u}) {
    Plan forced = plan;
    for (Launch& l : *forced.mutable_launches()) {
      if (l.program().find(".bwd.det.") != std::string::npos) l.mutable_grid()->set_x(grid);
    }
    buf->Poison();
    RunPlan(forced, buf->b);
    same(absl::StrCat("grid ", grid).c_str());
  }
}

TEST_F(GpuTest, DeterministicBackwardIsBitwiseAcrossRunsAndGrids) {
  ExpectBitwiseDeterministic(RowsSpec(46593, 4096));
  ExpectBitwiseDeterministic(RowsSpec(20000, 1024));
  // One row group of 96 threads per CTA (past det.lockstep's rows), and six
  // of 128 (BwdBlockOf), the last block's last step short of rows, the fold
  // reused block after block where a CTA takes several (grid 1 and 66).
  ExpectBitwiseDeterministic(RowsSpec(49155, 1536));
  ExpectBitwiseDeterministic(RowsSpec(16387, 2048));
  // Two rows a ring step (BwdRingPairs: H = 8192's one row group), the
  // block's last step one row short.
  ExpectBitwiseDeterministic(RowsSpec(16387, 8192));
  // The instance that loads dh_in before the row sum (BwdDhInEarly).
  StepSpec residual = RowsSpec(16387, 4096);
  residual.set_residual(true);
  residual.set_residual_grad_in(true);
  ExpectBitwiseDeterministic(residual);
  ExpectBitwiseDeterministic(HeadsSpec(4096, 24, 256, 32 * 256, 256));
}

// The backward after the recompute issues loads of its first rows before the
// wait for it (InputsBeforeWait): the ring's first steps, the split
// program's dx rows and its dw CTAs' first batch (summed ahead of their
// loop), the warp rows' first step (gated D = 128, the D = 256 view). Its
// dx, dz and dw must equal, bit for bit, those of the same backward as a
// plan's only phase, which waits first, on the rstd the checkpointed step's
// forward wrote.
TEST_F(GpuTest, BackwardAfterTheRecomputeMatchesTheBackwardAloneBitwise) {
  std::vector<StepSpec> specs = {RowsSpec(1024, 2048), RowsSpec(16384, 2048),
                                 HeadsSpec(4096, 24, 256, 32 * 256, 256)};
  for (int64_t tokens : {260, 1031}) {
    StepSpec gate = HeadsSpec(tokens, 48, 128);
    gate.set_op(RMSNORM_SILU_GATE);
    specs.push_back(gate);
  }
  for (StepSpec spec : specs) {
    spec.set_deterministic(true);
    StepSpec alone = spec;
    alone.clear_phases();
    alone.add_phases(BACKWARD);
    spec.clear_phases();
    for (Phase p : {FORWARD, RECOMPUTE, BACKWARD}) spec.add_phases(p);
    const Plan step = MustPlan(spec);
    const Plan bwd = MustPlan(alone);
    const Launch& chained = step.launches(2);
    ASSERT_EQ(chained.phase(), BACKWARD) << Label(spec);
    ASSERT_EQ(chained.program(), bwd.launches(0).program()) << Label(spec);
    ASSERT_TRUE(InputsBeforeWait(step.spec(), chained)) << Label(spec);
    ASSERT_FALSE(InputsBeforeWait(bwd.spec(), bwd.launches(0))) << Label(spec);
    ASSERT_LE(bwd.workspace_bytes(), step.workspace_bytes()) << Label(spec);
    const auto buf = MustBuffers(step);
    buf->Fill(5, spec.op() == RMSNORM ? 3.f : 30.f);
    RunPlan(step, buf->b);
    const int64_t bytes = buf->elems() * 2;
    const DeviceSnapshot dx(buf->b.dx, bytes);
    std::unique_ptr<DeviceSnapshot> dz;
    if (buf->b.dz != nullptr) dz = std::make_unique<DeviceSnapshot>(buf->b.dz, bytes);
    const std::vector<float> dw = buf->Dw();
    buf->Poison();  // dx, dz; dw as NaN
    CUDA_OK(cudaMemset(buf->b.dw, 0xff, spec.layout().dim() * (spec.dw_dtype() == FP32 ? 4 : 2)));
    RunPlan(bwd, buf->b);
    EXPECT_EQ(testing::CountDiff(dx.get(), buf->b.dx, bytes), 0) << Label(spec) << ": dx";
    if (dz) {
      EXPECT_EQ(testing::CountDiff(dz->get(), buf->b.dz, bytes), 0) << Label(spec) << ": dz";
    }
    const std::vector<float> again = buf->Dw();
    EXPECT_EQ(std::memcmp(again.data(), dw.data(), dw.size() * 4), 0) << Label(spec) << ": dw";
  }
}

// The looped forward in place of the routed one: within budget over dims,
// T, a strided view, an FP32 weight and the fused residual (h included), and
// the recompute equal to the forward bit for bit.
// Packed rows of each of `dims` at 1, 7 and 4099 tokens (one row, a partial
// CTA, many CTAs), deterministic.
std::vector<StepSpec> PackedRowsAtFewAndMany(std::initializer_list<int64_t> dims) {
  std::vector<StepSpec> specs;
  for (int64_t dim : dims) {
    for (int64_t tokens : {1, 7, 4099}) specs.push_back(RowsSpec(tokens, dim, true));
  }
  return specs;
}

// Each of `dims` at 4099 tokens with the fused residual, and with an FP32
// weight.
void AddResidualAndFp32Weight(std::vector<StepSpec>& specs, std::initializer_list<int64_t> dims) {
  for (int64_t dim : dims) {
    specs.push_back(RowsSpec(4099, dim, true));
    specs.back().set_residual(true);
    specs.push_back(RowsSpec(4099, dim, true));
    specs.back().set_weight_dtype(FP32);
  }
}

// Forward and recompute through `program` in place of the routed forward:
// within budget over 3 seeds, and a rerun bit for bit the same.
void ExpectForcedForwardWithinBudget(const std::vector<StepSpec>& specs,
                                     const std::string& program) {
  const TargetDevice device = *TargetDevice::Current();
  for (StepSpec spec : specs) {
    spec.clear_phases();
    spec.add_phases(FORWARD);
    spec.add_phases(RECOMPUTE);
    const Plan plan = testing::ForceStage(MustPlan(spec), program, device);
    ASSERT_EQ(plan.launches(0).program(), program) << Label(spec);
    ASSERT_EQ(plan.launches(1).program(), program) << Label(spec);
    const auto buf = MustBuffers(plan);
    const testing::Worst worst = testing::WorstOfPlan(plan, *buf, 3);
    EXPECT_TRUE(worst.Within()) << program << " " << Label(spec) << ": y " << worst.y << " rstd "
                                << worst.rstd;
    const testing::Outputs first(*buf);
    buf->Poison();
    RunPlan(plan, buf->b);
    EXPECT_EQ(first.Diff(*buf), 0) << program << " " << Label(spec) << ": rerun";
  }
}

TEST_F(GpuTest, LoopForwardWithinBudget) {
  std::vector<StepSpec> specs;
  for (int64_t dim : {64, 1536, 4096, 6144, 8192, 16384}) {
    for (int64_t tokens : {1, 7, 1024, 46593}) specs.push_back(RowsSpec(tokens, dim, true));
  }
  specs.push_back(HeadsSpec(4096, 24, 256, 32 * 256, 256));
  specs.push_back(RowsSpec(4099, 4096, true));
  specs.back().set_weight_dtype(FP32);
  // The residual at both loop strides (LoopRuntimeStride from H = 8192).
  for (int64_t tokens : {7, 16384}) {
    for (int64_t dim : {6144, 8192}) {
      specs.push_back(RowsSpec(tokens, dim, true));
      specs.back().set_residual(true);
    }
  }
  specs.push_back(RowsSpec(3001, 2560, true));
  specs.back().set_residual(true);
  specs.back().set_weight_dtype(FP32);
  ExpectForcedForwardWithinBudget(specs, "rmsnorm.fwd.loop");
}

// The flat forward at 32 registers: every instance of its own (16 and 32
// lanes of two vectors, CTA-wide rows of two) and a plain one (one vector),
// packed rows and views, the residual, an FP32 weight, partial last CTAs.
TEST_F(GpuTest, DenseFlatForwardWithinBudget) {
  std::vector<StepSpec> specs = PackedRowsAtFewAndMany({128, 256, 512, 1536, 4096, 8192, 16384});
  specs.push_back(HeadsSpec(4096, 4, 256));
  specs.push_back(HeadsSpec(1031, 24, 256, 32 * 256, 256));
  for (int64_t dim : {256, 1536, 6144}) {
    specs.push_back(RowsSpec(4099, dim, true));
    specs.back().set_residual(true);
  }
  specs.push_back(RowsSpec(4099, 4096, true));
  specs.back().set_weight_dtype(FP32);
  ExpectForcedForwardWithinBudget(specs, "rmsnorm.fwd.flat.dense");
}

// The flat forwards' row groups of 64 threads (H = 520..1024, four to a
// CTA): a second vector on one lane of each group (H = 520) or on all
// (1024), partial last CTAs, views, the residual, an FP32 weight, in both
// flat programs; at H = 1032 and 1536 one row a CTA (flat) and rows of 96
// threads two to a CTA (dense, DenseFlatRowConfig); at H = 1544 and 2040
// (table .41's dense windows) a CTA-wide row of 128 threads, 63 of its
// second vectors empty at 1544 (with the residual and an FP32 weight, table
// .43); and the gated flat forward's one-row CTAs
// at H = 520..1032 (GateFlatRowConfig), its 64-thread groups in
// rmsnorm_silu_gate.fwd.flat.groups and the gated warp program at D = 520..1024.
TEST_F(GpuTest, FlatForwardRowGroupsWithinBudget) {
  std::vector<StepSpec> specs = PackedRowsAtFewAndMany({520, 768, 1024, 1032, 1536, 1544, 2040});
  specs.push_back(HeadsSpec(1031, 3, 768));
  specs.push_back(HeadsSpec(257, 5, 1024, 8 * 1024, 1024));
  AddResidualAndFp32Weight(specs, {520, 1536, 1544});
  for (const char* program : {"rmsnorm.fwd.flat", "rmsnorm.fwd.flat.dense"}) {
    ExpectForcedForwardWithinBudget(specs, program);
  }
  std::vector<StepSpec> gated;
  for (int64_t dim : {520, 768, 1024, 1032}) {
    gated.push_back(RowsSpec(4099, dim, true));
    gated.back().set_op(RMSNORM_SILU_GATE);
  }
  ExpectForcedForwardWithinBudget(gated, "rmsnorm_silu_gate.fwd.flat");
  // The gated program of the 64-thread groups (D = 520..1024): partial last
  // CTAs, a view, an FP32 weight, the weight through L1 above 2^26 elements.
  gated.pop_back();
  gated.push_back(RowsSpec(7, 520, true));
  gated.back().set_op(RMSNORM_SILU_GATE);
  gated.back().set_weight_dtype(FP32);
  gated.push_back(HeadsSpec(1031, 3, 640));
  gated.back().set_op(RMSNORM_SILU_GATE);
  gated.push_back(RowsSpec(129056, 520, true));  // 2^26 + 256 elements: no slots
  gated.back().set_op(RMSNORM_SILU_GATE);
  ExpectForcedForwardWithinBudget(gated, "rmsnorm_silu_gate.fwd.flat.groups");
  // Table .42 routes the gated warp program there too (32 lanes of four
  // vector slots; the recompute walks the rows from the last).
  ExpectForcedForwardWithinBudget(gated, "rmsnorm_silu_gate.fwd.warp");
  // Table .45 routes the plain warp program at H = 584..632 from 32768 rows
  // (32 lanes of four vector slots: the third filled on 9-15 lanes, the
  // fourth on none).
  ExpectForcedForwardWithinBudget(PackedRowsAtFewAndMany({584, 608, 632}), "rmsnorm.fwd.warp");
}

// The wide flat forward: both instances (3 vectors per thread at H = 6144,
// 4 elsewhere) over 96..256 threads, rows that leave a thread's last
// vectors empty (H = 4000, 4104, 6152), packed rows and views, the residual, an
// FP32 weight in the slots and through L1 (above 2^26 elements), partial
// last CTAs.
TEST_F(GpuTest, WideFlatForwardWithinBudget) {
  std::vector<StepSpec> specs =
      PackedRowsAtFewAndMany({3072, 4000, 4104, 5120, 5632, 6144, 6152, 7168, 8192});
  specs.push_back(HeadsSpec(257, 2, 6144));
  specs.push_back(HeadsSpec(99, 3, 8192, 4 * 8192, 8192));
  AddResidualAndFp32Weight(specs, {6144, 8192});
  specs.push_back(RowsSpec(8193, 8192, true));  // 2^26 + 8192 elements: no slots
  specs.back().set_weight_dtype(FP32);
  ExpectForcedForwardWithinBudget(specs, "rmsnorm.fwd.flat.wide");
}

// The split backward in place of the routed one (at every row count):
// within budget over dims, T, views, the residual, dtypes and the gate (|z|
// up to 30), and bitwise the same run to run.
TEST_F(GpuTest, SplitBackwardWithinBudgetAndReproducible) {
  const TargetDevice device = *TargetDevice::Current();
  std::vector<StepSpec> specs;
  // 768: eight 64-thread rows of 2 vectors a dx CTA; 2304: four 128-thread
  // rows of 3 vectors; 4608: two rows of 3 vectors; 6144: one row of 3.
  for (int64_t dim : {64, 256, 512, 768, 1536, 2304, 4096, 4608, 6144, 8192}) {
    for (int64_t tokens : {1, 7, 1024, 46593}) specs.push_back(RowsSpec(tokens, dim, true));
  }
  specs.push_back(HeadsSpec(4096, 24, 256, 32 * 256, 256));
  specs.push_back(RowsSpec(16384, 4096, true));
  specs.back().set_residual(true);
  specs.back().set_residual_grad_in(true);
  specs.back().set_dw_dtype(BF16);
  specs.push_back(RowsSpec(4099, 2048, true));
  specs.back().set_weight_dtype(FP32);
  for (int64_t tokens : {260, 16384}) {
    StepSpec gate = HeadsSpec(tokens, 48, 128);
    gate.set_op(RMSNORM_SILU_GATE);
    gate.set_deterministic(true);
    specs.push_back(gate);
  }
  // The gate: four 64-thread rows a dx CTA (768); at 3 vectors two
  // 128-thread rows (2304), one CTA-wide row (4608); the widths of table
  // .39's gated windows, 1280 (two 128-thread rows of 2), 6144 and 8192;
  // table .41's 4104 (a CTA-wide row, its last vector slots empty).
  for (int64_t dim : {768, 1280, 2304, 4104, 4608, 6144, 8192}) {
    specs.push_back(RowsSpec(1031, dim, true));
    specs.back().set_op(RMSNORM_SILU_GATE);
  }
  for (StepSpec spec : specs) {
    spec.clear_phases();
    spec.add_phases(FORWARD);
    spec.add_phases(BACKWARD);
    spec.set_deterministic(true);  // the plan then holds the partials region
    const std::string split = spec.op() == RMSNORM ? "rmsnorm.bwd.split" : "rmsnorm_silu_gate.bwd.split";
    const Plan plan = testing::ForceStage(MustPlan(spec), split, device);
    ASSERT_NE(testing::LaunchOf(plan, split), nullptr) << Label(spec);
    const auto buf = MustBuffers(plan);
    const float z_scale = spec.op() == RMSNORM ? 3.f : 30.f;
    const testing::Worst worst = testing::WorstOfPlan(plan, *buf, 3, z_scale);
    std::printf("budget multiples  split %-54s y %.3f dx %.3f dz %.3f dw %.3f\n",
                Label(spec).c_str(), worst.y, worst.dx, worst.dz, worst.dw);
    EXPECT_TRUE(worst.Within()) << Label(spec) << ": dx " << worst.dx << " dz " << worst.dz
                                << " dw " << worst.dw;
    // Every CTA's work is fixed by its index: a rerun must match bit for bit.
    const testing::Outputs first(*buf);
    buf->Poison();
    RunPlan(plan, buf->b);
    EXPECT_EQ(first.Diff(*buf), 0) << Label(spec) << ": rerun";
  }
}

// dw.reduce (ops/row_kernels.h): lane y of kDwReduceLanes sums partial rows
// y, y + kDwReduceLanes, ... in sequence from +0.0, the lane sums are added
// pairwise in a fixed tree, and the sum is rounded once to FP32. The same
// order replayed in FP64 on the host from the partial rows the backward left
// in the workspace gives dw to the bit, at 64 partial rows (the split
// program: 2 a lane), 256 (det.lockstep: 8 a lane), 261 (det.partials at
// H = 6144, FP32 partial rows: 9 on the first 5 lanes, 8 on the others) and
// 391 at H = 256 (det.partials, CTAs of 16 columns: DwReduceColumns). There
// the reduce launch edited to CTAs of 32 and of 8 columns (a plan of
// another version) writes the same dw to the bit.
TEST_F(GpuTest, DwReduceSumsThePartialsInItsDocumentedOrder) {
  struct Case {
    int64_t tokens, dim, partials;
  };
  for (const Case& k : {Case{4096, 2048, 64}, Case{16384, 1536, 256}, Case{16384, 6144, 261},
                        Case{65536, 256, 391}}) {
    StepSpec spec = RowsSpec(k.tokens, k.dim, true, {FORWARD, BACKWARD});
    spec.set_dw_dtype(FP32);
    const Plan plan = MustPlan(spec);
    const Launch* reduce = testing::LaunchOf(plan, "dw.reduce");
    ASSERT_NE(reduce, nullptr) << Label(spec);
    ASSERT_EQ(reduce->partials(), k.partials) << Label(spec) << ": the case's partial count";
    const WorkspaceRegion* region = nullptr;
    for (const WorkspaceRegion& r : plan.workspace()) {
      if (r.name() == "dw_partials") region = &r;
    }
    ASSERT_NE(region, nullptr) << Label(spec);
    const auto buf = MustBuffers(plan);
    buf->Fill(5);
    RunPlan(plan, buf->b);
    const int64_t dim = k.dim, count = k.partials;
    // FP64 partial rows, or FP32 ones widened exactly (DwPartialBytes).
    std::vector<double> partials(count * dim);
    const char* region_start = static_cast<const char*>(buf->b.workspace) + region->offset();
    if (DwPartialBytes(dim, false) == 8) {
      ASSERT_EQ(cudaMemcpy(partials.data(), region_start, partials.size() * sizeof(double),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
    } else {
      std::vector<float> narrow(count * dim);
      ASSERT_EQ(cudaMemcpy(narrow.data(), region_start, narrow.size() * sizeof(float),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      partials.assign(narrow.begin(), narrow.end());
    }
    const std::vector<float> dw = buf->Dw();
    ASSERT_EQ(static_cast<int64_t>(dw.size()), dim);
    int64_t differ = 0;
    for (int64_t c = 0; c < dim; ++c) {
      double lanes[kDwReduceLanes];
      for (int y = 0; y < kDwReduceLanes; ++y) {
        lanes[y] = 0.0;
        for (int64_t q = y; q < count; q += kDwReduceLanes) lanes[y] += partials[q * dim + c];
      }
      for (int half = kDwReduceLanes / 2; half > 0; half /= 2) {
        for (int y = 0; y < half; ++y) lanes[y] += lanes[y + half];
      }
      const float want = static_cast<float>(lanes[0]);
      differ += std::memcmp(&want, &dw[c], sizeof(float)) != 0;
    }
    EXPECT_EQ(differ, 0) << Label(spec) << ": columns whose dw is not the documented sum's";
    const int64_t zeros = std::count(dw.begin(), dw.end(), 0.f);
    EXPECT_LT(zeros, dim / 8) << Label(spec) << ": dw of the filled inputs is mostly nonzero";
    if (k.dim > kDwReduceNarrowDimMax) continue;
    ASSERT_EQ(reduce->block().x(), static_cast<uint32_t>(kDwReduceMaxColumns / 2)) << Label(spec);
    for (const uint32_t columns : {32u, 8u}) {
      Plan edited = plan;
      for (Launch& l : *edited.mutable_launches()) {
        if (l.program() != "dw.reduce") continue;
        l.mutable_block()->set_x(columns);
        l.mutable_grid()->set_x(static_cast<uint32_t>(CeilDiv(dim, columns)));
      }
      ASSERT_EQ(cudaMemset(buf->b.dw, 0xff, dim * sizeof(float)), cudaSuccess);
      RunPlan(edited, buf->b);  // the same inputs, so the same partial rows
      const std::vector<float> dw_again = buf->Dw();
      EXPECT_EQ(std::memcmp(dw_again.data(), dw.data(), dim * sizeof(float)), 0)
          << Label(spec) << ": dw.reduce in CTAs of " << columns << " columns";
    }
  }
}

// The det.lockstep program in place of the routed backward at its width (96
// threads a row, H = 1032..1536: CTAs of 4 row groups, two per SM), at row
// counts the table does not route to it: within budget, and bitwise across
// runs and grids.
TEST_F(GpuTest, LockstepBackwardWithinBudgetAndBitwiseAcrossGrids) {
  const TargetDevice device = *TargetDevice::Current();
  const std::string lockstep = "rmsnorm.bwd.det.lockstep";
  std::vector<StepSpec> specs;
  for (int64_t dim : {1032, 1536}) {  // a second vector on few threads, on all
    for (int64_t tokens : {1, 7, 1031, 65539}) specs.push_back(RowsSpec(tokens, dim, true));
  }
  specs.push_back(RowsSpec(16387, 1536, true));
  specs.back().set_residual(true);
  specs.back().set_residual_grad_in(true);
  specs.push_back(RowsSpec(4099, 1536, true));
  specs.back().set_weight_dtype(FP32);
  specs.push_back(RowsSpec(4099, 1536, true));
  specs.back().set_dw_dtype(BF16);
  for (StepSpec spec : specs) {
    spec.clear_phases();
    spec.add_phases(FORWARD);
    spec.add_phases(BACKWARD);
    const Plan plan = testing::ForceStage(MustPlan(spec), lockstep, device);
    const Launch* l = testing::LaunchOf(plan, lockstep);
    ASSERT_NE(l, nullptr) << Label(spec);
    const int tpr = BackwardRowConfig(spec.layout().dim()).threads_per_row;
    ASSERT_GT(static_cast<int>(l->block().x()), tpr) << Label(spec);  // lockstep row groups
    const auto buf = MustBuffers(plan);
    const testing::Worst worst = testing::WorstOfPlan(plan, *buf, 3);
    std::printf("budget multiples  lockstep %-51s y %.3f dx %.3f dw %.3f\n", Label(spec).c_str(),
                worst.y, worst.dx, worst.dw);
    EXPECT_TRUE(worst.Within()) << Label(spec) << ": dx " << worst.dx << " dw " << worst.dw;
  }
  ExpectBitwiseDeterministic(RowsSpec(46593, 1032), lockstep);
  StepSpec residual = RowsSpec(16387, 1536);
  residual.set_residual(true);
  residual.set_residual_grad_in(true);
  ExpectBitwiseDeterministic(residual, lockstep);
}

// The warp rows of the backward's ring (BwdRing at 32 threads): 2 vectors a
// thread at H = 264..512 (the last lanes' second vector empty below 512),
// 3 at 520..768 (kMaxBackwardWarpRow3Dim) and 4 at 776..1024
// (kMaxBackwardWarpRow4Dim), with the gate too (z through the ring; to
// D = 1016). det.partials and kb in place of the routed backward: blocks of
// whole steps of 8 rows short of their last rows (7, 1031, 4099 rows), an
// FP32 weight, the fused residual's dh_in instance, dw in BF16; and bitwise
// across runs and grids, where a CTA takes several blocks and reuses its
// fold (grid 1 and 66).
TEST_F(GpuTest, WarpRowsThroughTheRingWithinBudget) {
  const TargetDevice device = *TargetDevice::Current();
  std::vector<StepSpec> specs;
  for (int64_t dim : {264, 384, 512, 520, 640, 768, 776, 1024}) {
    for (int64_t tokens : {7, 1031, 4099}) specs.push_back(RowsSpec(tokens, dim, true));
    specs.push_back(RowsSpec(1031, dim, true));
    specs.back().set_weight_dtype(FP32);
    specs.push_back(WithResidualGradIn(RowsSpec(1031, dim, true)));
  }
  specs.push_back(RowsSpec(4099, 768, true));
  specs.back().set_dw_dtype(BF16);
  // The gate's warp rows of 3 and 4 vectors (x, dy and z through two
  // stages; D = 1024 keeps its rows of 64 threads).
  for (int64_t dim : {520, 640, 768, 776, 1016}) {
    for (int64_t tokens : {7, 1031, 4099}) specs.push_back(Gated(RowsSpec(tokens, dim, true)));
  }
  specs.push_back(Gated(RowsSpec(1031, 768, true)));
  specs.back().set_weight_dtype(FP32);
  for (const StepSpec& routed : specs) {
    const bool gated = routed.op() == RMSNORM_SILU_GATE;
    for (const char* program :
         {gated ? "rmsnorm_silu_gate.bwd.det.partials" : "rmsnorm.bwd.det.partials",
          gated ? "rmsnorm_silu_gate.bwd.kb" : "rmsnorm.bwd.kb"}) {
      StepSpec spec = routed;
      spec.clear_phases();
      spec.add_phases(FORWARD);
      spec.add_phases(BACKWARD);
      spec.set_deterministic(std::string(program).find(".bwd.kb") == std::string::npos);
      const absl::StatusOr<Plan> plan =
          testing::PlanRoutedTo(spec, *FindProgram(program), device, "a test");
      ASSERT_TRUE(plan.ok()) << plan.status();
      const Launch* l = testing::LaunchOf(*plan, program);
      ASSERT_NE(l, nullptr) << Label(spec);
      const RowConfig c = BackwardRowConfigOf(spec.layout().dim(), gated);
      ASSERT_EQ(c.threads_per_row, 32) << Label(spec);
      ASSERT_TRUE(BwdRing(c.threads_per_row, c.vecs_per_thread, gated)) << Label(spec);
      const auto buf = MustBuffers(*plan);
      const testing::Worst w = testing::WorstOfPlan(*plan, *buf, 2);
      std::printf("budget multiples  warp ring %-50s y %.3f dx %.3f dz %.3f dw %.3f h %.3f\n",
                  Label(spec).c_str(), w.y, w.dx, w.dz, w.dw, w.h);
      EXPECT_TRUE(w.Within()) << Label(spec) << " " << program << ": dx " << w.dx << " dz "
                              << w.dz << " dw " << w.dw << " h " << w.h;
    }
  }
  for (int64_t dim : {384, 768, 1024}) {
    ExpectBitwiseDeterministic(RowsSpec(16387, dim), "rmsnorm.bwd.det.partials");
  }
  ExpectBitwiseDeterministic(WithResidualGradIn(RowsSpec(16387, 640)), "rmsnorm.bwd.det.partials");
  // The gate's warp rows of 3 and of 4 vectors.
  for (int64_t dim : {704, 1016}) {
    ExpectBitwiseDeterministic(Gated(RowsSpec(16387, dim)), "rmsnorm_silu_gate.bwd.det.partials");
  }
}

TEST_F(GpuTest, NondeterministicBackwardStaysWithinBudgetOver20Runs) {
  // The kb program (FP64 atomics): routed at [65537, 512] (the sm_90a
  // table keeps it at H <= 512 from 16385 rows since table .48), and in
  // place of det.partials at [23297, 12288], a CTA-wide row of 4 vectors a
  // thread whose atomics come from every CTA.
  const TargetDevice& device = *TargetDevice::Current();
  const Plan narrow = MustPlan(RowsSpec(65537, 512, false, {FORWARD, BACKWARD}));
  ASSERT_EQ(narrow.launches(2).program(), "rmsnorm.bwd.kb");
  const absl::StatusOr<Plan> wide = testing::PlanRoutedTo(
      RowsSpec(23297, 12288, false, {FORWARD, BACKWARD}), *FindProgram("rmsnorm.bwd.kb"), device,
      "a test");
  ASSERT_TRUE(wide.ok()) << wide.status();
  ASSERT_EQ(wide->launches(2).program(), "rmsnorm.bwd.kb");
  for (const Plan* plan : {&narrow, &*wide}) {
    const auto buf = MustBuffers(*plan);
    buf->Fill(13);
    std::vector<double> ref;
    testing::CheckRows(buf->Inputs(), testing::RefOutputs{}, &ref);
    double worst = 0;
    for (int i = 0; i < 20; ++i) {
      RunPlan(*plan, buf->b);
      worst = std::max(worst, testing::DwViolation(buf->Dw(), ref));
    }
    std::printf("nondet dw over 20 runs %s: worst %.3f of budget\n", Label(plan->spec()).c_str(),
                worst);
    EXPECT_LE(worst, 1.0) << Label(plan->spec());
  }
}

// --- forward -----------------------------------------------------------------------

// Runs `forward` on inputs from `seed`, then `recompute` on the same buffers
// with the outputs poisoned in between: the output elements whose bits differ.
int64_t RecomputeBitsDiffer(const Plan& forward, const Plan& recompute, int seed) {
  const auto buf = MustBuffers(forward);
  buf->Fill(seed);
  RunPlan(forward, buf->b);
  const testing::Outputs written(*buf);
  buf->Poison();
  RunPlan(recompute, buf->b);
  return written.Diff(*buf);
}

// The recompute walks its rows from the last past 16 MiB of x
// (WalksRowsFromTheLast, ReverseRows): through every forward program, forced
// where the table routes another, both instances write the forward's y, rstd
// and h bit for bit, every row once (the outputs poisoned in between), over
// row counts that leave the last row group, CTA or grid stride partial.
TEST_F(GpuTest, RecomputeEqualsForwardBitForBit) {
  std::vector<StepSpec> specs;
  for (int64_t tokens : {1, 7, 4099}) {
    for (int64_t dim : {64, 512, 2048, 6144}) specs.push_back(RowsSpec(tokens, dim, true));
  }
  specs.push_back(RowsSpec(40000, 256, true));  // several row groups per persistent CTA
  specs.push_back(RowsSpec(33001, 512, true));
  specs.push_back(RowsSpec(46593, 1536, true));
  specs.push_back(RowsSpec(3001, 4096, true));
  specs.back().set_residual(true);
  specs.push_back(RowsSpec(1100, 8192, true));
  specs.back().set_weight_dtype(FP32);
  specs.push_back(HeadsSpec(4096, 24, 256, 8192, 256));
  specs.push_back(HeadsSpec(33001, 4, 128));
  specs.back().set_op(RMSNORM_SILU_GATE);
  specs.push_back(RowsSpec(4099, 2048, true));
  specs.back().set_op(RMSNORM_SILU_GATE);
  specs.push_back(RowsSpec(16411, 768, true));  // gated 64-thread groups, 24 MiB of x
  specs.back().set_op(RMSNORM_SILU_GATE);
  std::set<std::string> ran, reversed;
  for (const ProgramInfo& program : Programs()) {
    if (program.stage != Stage::kForward) continue;
    for (StepSpec spec : specs) {
      spec.clear_phases();
      spec.add_phases(FORWARD);
      const Plan routed = MustPlan(spec);
      if (!CheckSupports(program, routed.spec()).ok()) continue;  // a canonical spec
      StepSpec re = spec;
      re.set_phases(0, RECOMPUTE);
      const std::string id(program.id);
      const TargetDevice device = *TargetDevice::Current();
      const Plan pf = testing::ForceStage(routed, id, device);
      const Plan pr = testing::ForceStage(MustPlan(re), id, device);
      ASSERT_EQ(pf.launches(0).program(), id);
      ASSERT_EQ(pr.launches(0).program(), id);
      ASSERT_EQ(pr.launches(0).phase(), RECOMPUTE);
      EXPECT_EQ(RecomputeBitsDiffer(pf, pr, 21), 0) << id << " " << Label(spec);
      ran.insert(id);
      if (WalksRowsFromTheLast(pr.spec(), pr.launches(0))) reversed.insert(id);
    }
  }
  for (const ProgramInfo& p : Programs()) {
    if (p.stage == Stage::kForward) {
      EXPECT_EQ(ran.count(std::string(p.id)), 1u) << p.id;
      EXPECT_EQ(reversed.count(std::string(p.id)), 1u) << p.id << " never ran from the last";
    }
  }
}

// A PHASE_KIND_RECOMPUTE window routes the recompute to another program than
// the forward's: over every such window of the embedded table, at its
// corners with either weight (the last row count past 16 MiB of x, so that
// the recompute walks from the last row), the recompute as routed writes the
// routed forward's y, rstd and h bit for bit.
TEST_F(GpuTest, EveryRecomputeWindowWritesTheForwardsBits) {
  const RoutingTable& table = **RoutingTableFor(TargetDevice::Current()->arch);
  int windows = 0, differ = 0;
  bool reversed = false;
  for (int i = 0; i < table.windows_size(); ++i) {
    const Window& w = table.windows(i);
    if (w.phase_kind() != PHASE_KIND_RECOMPUTE) continue;
    ++windows;
    const std::string tag = absl::StrCat("[", i, "] ");
    // Open edges (0) stand for the other edge.
    const int64_t dim_min = std::max<int64_t>(w.dim_min(), 8);
    const int64_t rows_min = std::max<int64_t>(w.rows_min(), 1);
    for (int64_t dim : {dim_min, w.dim_max() == 0 ? dim_min : w.dim_max()}) {
      for (int64_t rows : {rows_min, w.rows_max() == 0 ? rows_min : w.rows_max()}) {
        for (DType weight : {BF16, FP32}) {
          if (w.weight_dtype() != DTYPE_UNSPECIFIED && w.weight_dtype() != weight) continue;
          StepSpec spec = RowsSpec(rows, dim, true, {FORWARD});
          spec.set_op(w.op());
          spec.set_weight_dtype(weight);
          spec.set_residual(w.residual() == RESIDUAL_WITH);
          StepSpec re = spec;
          re.set_phases(0, RECOMPUTE);
          const Plan pf = MustPlan(spec);
          const Plan pr = MustPlan(re);
          ASSERT_EQ(pr.launches(0).phase(), RECOMPUTE);
          ASSERT_THAT(pr.launches(0).reason(), HasSubstr(tag)) << Label(spec);
          if (pf.launches(0).program() != pr.launches(0).program()) ++differ;
          reversed |= WalksRowsFromTheLast(pr.spec(), pr.launches(0));
          EXPECT_EQ(RecomputeBitsDiffer(pf, pr, 23), 0)
              << Label(spec) << ": " << pf.launches(0).program() << " then "
              << pr.launches(0).program();
        }
      }
    }
  }
  // The table has such windows, and they route the recompute elsewhere.
  EXPECT_GT(windows, 0);
  EXPECT_GT(differ, 0);
  EXPECT_TRUE(reversed);
}

// --- edge cases ------------------------------------------------------------------

TEST_F(GpuTest, ZeroTokensRunsNothing) {
  const Plan plan = MustPlan(RowsSpec(0, 4096, true));
  EXPECT_EQ(plan.launches_size(), 0);
  EXPECT_TRUE(LaunchEager(plan, Bindings{}, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(GpuTest, NonFiniteRowStaysInItsRow) {
  for (bool det : {true, false}) {
    const int64_t dim = 2048, tokens = 64;
    const Plan plan = MustPlan(RowsSpec(tokens, dim, det, {FORWARD, BACKWARD}));
    const auto buf = MustBuffers(plan);
    buf->Fill(17);
    testing::SetBf16(const_cast<void*>(buf->b.x), 5 * dim + 3, NAN);
    testing::SetBf16(const_cast<void*>(buf->b.x), 9 * dim + 100, INFINITY);
    RunPlan(plan, buf->b);
    std::vector<uint16_t> y(tokens * dim), dx(tokens * dim);
    CUDA_OK(cudaMemcpy(y.data(), buf->b.y, y.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(dx.data(), buf->b.dx, dx.size() * 2, cudaMemcpyDeviceToHost));
    auto finite = [](uint16_t bits) { return (bits & 0x7f80) != 0x7f80; };
    for (int64_t r = 0; r < tokens; ++r) {
      int64_t nonfinite_y = 0, nonfinite_dx = 0;
      for (int64_t c = 0; c < dim; ++c) {
        nonfinite_y += !finite(y[r * dim + c]);
        nonfinite_dx += !finite(dx[r * dim + c]);
      }
      if (r == 5 || r == 9) {
        EXPECT_GT(nonfinite_y, 0) << "row " << r;
        EXPECT_GT(nonfinite_dx, 0) << "row " << r;
      } else {
        EXPECT_EQ(nonfinite_y + nonfinite_dx, 0) << "row " << r << " was touched";
      }
    }
  }
}

TEST_F(GpuTest, AllZeroRowGivesFiniteRstd) {
  const Plan plan = MustPlan(RowsSpec(16, 4096, true, {FORWARD, BACKWARD}));
  const auto buf = MustBuffers(plan);
  buf->Fill(19);
  CUDA_OK(cudaMemset(const_cast<void*>(buf->b.x), 0, 4096 * 2 * 3));  // rows 0..2
  RunPlan(plan, buf->b);
  std::vector<float> rstd(16);
  CUDA_OK(cudaMemcpy(rstd.data(), buf->b.rstd, 16 * 4, cudaMemcpyDeviceToHost));
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(rstd[r], 1.0 / std::sqrt(1e-6), 1e-3 * 1000);
  std::vector<double> ref;
  const testing::Violations v = testing::CheckRows(
      buf->Inputs(), testing::RefOutputs{nullptr, buf->b.y, buf->b.rstd, buf->b.dx, nullptr}, &ref);
  EXPECT_LE(v.y, 1);
  EXPECT_LE(v.dx, 1);
  EXPECT_LE(v.rstd, 1);
}

// --- bindings ------------------------------------------------------------------------

TEST_F(GpuTest, BadBindingsLaunchNothing) {
  StepSpec spec = RowsSpec(256, 1024, true, {FORWARD, BACKWARD});
  const Plan plan = MustPlan(spec);
  const auto buf = MustBuffers(plan);
  buf->Fill(23);
  std::vector<uint16_t> before(256 * 1024), after(256 * 1024);
  CUDA_OK(cudaMemcpy(before.data(), buf->b.y, before.size() * 2, cudaMemcpyDeviceToHost));

  Bindings missing = buf->b;
  missing.dy = nullptr;
  absl::Status s = LaunchEager(plan, missing, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("bindings.dy: null"));

  Bindings misaligned = buf->b;
  misaligned.x = static_cast<const char*>(buf->b.x) + 2;
  s = LaunchEager(plan, misaligned, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("bindings.x = "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("not 16-byte aligned"));

  Bindings no_ws = buf->b;
  no_ws.workspace = nullptr;
  s = LaunchEager(plan, no_ws, nullptr);
  EXPECT_THAT(std::string(s.message()), HasSubstr("bindings.workspace: null"));

  Bindings small_ws = buf->b;
  small_ws.workspace_bytes = plan.workspace_bytes() - 256;
  s = LaunchEager(plan, small_ws, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("bindings.workspace_bytes = "));

  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(after.data(), buf->b.y, after.size() * 2, cudaMemcpyDeviceToHost));
  EXPECT_EQ(before, after) << "a refused launch wrote y";
}

// --- the gated op through the same programs ---------------------------------------------

TEST_F(GpuTest, GatedStepWithinBudget) {
  for (bool det : {true, false}) {
    StepSpec spec = HeadsSpec(8192, 32, 128);
    spec.set_op(RMSNORM_SILU_GATE);
    spec.set_deterministic(det);
    ExpectWithinBudget(spec);
  }
}

}  // namespace
}  // namespace cake
