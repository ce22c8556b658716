#include "planner/routing.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "planner/planner.h"
#include "planner/validate.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::testing::HasSubstr;
using testing::HeadsSpec;
using testing::RowsSpec;

// Windows with row edges at 100..200 and 201..: kb inside 100..200 is
// replaced by the det programs, the way an accuracy edge would be set.
constexpr char kTable[] = R"pb(
  arch: "sm_test"
  version: "t1"
  windows {
    op: RMSNORM phase_kind: PHASE_KIND_BACKWARD mode: MODE_NONDETERMINISTIC
    dim_min: 4096 dim_max: 4096 rows_min: 100 rows_max: 200
    program: "rmsnorm.bwd.det.partials"
    evidence: "test window"
  }
  windows {
    op: RMSNORM phase_kind: PHASE_KIND_BACKWARD mode: MODE_NONDETERMINISTIC
    program: "rmsnorm.bwd.kb"
    evidence: "test catch-all"
  }
  windows {
    op: RMSNORM phase_kind: PHASE_KIND_FORWARD heads_form: HEADS_FORM_STRIDED
    program: "rmsnorm.fwd.cta"
    evidence: "strided heads"
  }
  windows {
    op: RMSNORM phase_kind: PHASE_KIND_FORWARD weight_dtype: FP32 dim_max: 1024
    program: "rmsnorm.fwd.cta"
    evidence: "fp32 weight"
  }
)pb";

RoutingTable TestTable() {
  absl::StatusOr<RoutingTable> t = ParseRoutingTable(kTable, "test");
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

std::string RouteBackward(int64_t rows) {
  StepSpec spec = *Canonicalize(RowsSpec(rows, 4096));
  absl::StatusOr<Route> r = RouteLaunch(TestTable(), spec, PHASE_KIND_BACKWARD);
  EXPECT_TRUE(r.ok()) << r.status();
  return std::string(r->program->id);
}

TEST(RoutingTest, WindowEdgesAreInclusive) {
  EXPECT_EQ(RouteBackward(99), "rmsnorm.bwd.kb");
  EXPECT_EQ(RouteBackward(100), "rmsnorm.bwd.det.partials");
  EXPECT_EQ(RouteBackward(200), "rmsnorm.bwd.det.partials");
  EXPECT_EQ(RouteBackward(201), "rmsnorm.bwd.kb");
}

TEST(RoutingTest, ReasonNamesWindowAndEvidence) {
  StepSpec spec = *Canonicalize(RowsSpec(150, 4096));
  absl::StatusOr<Route> r = RouteLaunch(TestTable(), spec, PHASE_KIND_BACKWARD);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->default_rule);
  EXPECT_THAT(r->reason, HasSubstr("window sm_test/t1[0]"));
  EXPECT_THAT(r->reason, HasSubstr("evidence: test window"));
}

TEST(RoutingTest, MatchesHeadsFormAndWeightDtype) {
  const RoutingTable table = TestTable();
  StepSpec strided = *Canonicalize(HeadsSpec(64, 24, 256, 8192, 256));
  EXPECT_EQ(RouteLaunch(table, strided, PHASE_KIND_FORWARD)->program->id, "rmsnorm.fwd.cta");
  StepSpec contiguous = *Canonicalize(HeadsSpec(64, 4, 256));
  absl::StatusOr<Route> c = RouteLaunch(table, contiguous, PHASE_KIND_FORWARD);
  EXPECT_EQ(c->program->id, "rmsnorm.fwd.warp");
  EXPECT_TRUE(c->default_rule);
  StepSpec fp32 = RowsSpec(64, 512);
  fp32.set_weight_dtype(FP32);
  EXPECT_EQ(RouteLaunch(table, *Canonicalize(fp32), PHASE_KIND_FORWARD)->program->id,
            "rmsnorm.fwd.cta");
}

TEST(RoutingTest, SkipsWindowWhoseProgramCannotRunTheSpec) {
  // A window that names a program the spec's dim is out of range for falls
  // through to the next window (here: none, so the default rule).
  absl::StatusOr<RoutingTable> t = ParseRoutingTable(R"pb(
    arch: "sm_test" version: "t2"
    windows { op: RMSNORM phase_kind: PHASE_KIND_FORWARD program: "rmsnorm.fwd.warp" evidence: "x" }
  )pb", "t2");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<Route> r = RouteLaunch(*t, *Canonicalize(RowsSpec(8, 4096)), PHASE_KIND_FORWARD);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->program->id, "rmsnorm.fwd.cta");
  EXPECT_TRUE(r->default_rule);
  EXPECT_THAT(r->reason, HasSubstr("default rule: forward with dim 4096 > 1024"));
}

TEST(RoutingTest, DefaultRulePerMode) {
  RoutingTable empty;
  empty.set_arch("sm_test");
  empty.set_version("e");
  EXPECT_EQ(RouteLaunch(empty, *Canonicalize(RowsSpec(8, 64, true)), PHASE_KIND_BACKWARD)
                ->program->id,
            "rmsnorm.bwd.det.partials");
  EXPECT_EQ(RouteLaunch(empty, *Canonicalize(RowsSpec(8, 64, false)), PHASE_KIND_BACKWARD)
                ->program->id,
            "rmsnorm.bwd.kb");
  StepSpec gate = RowsSpec(8, 128);
  gate.set_op(RMSNORM_SILU_GATE);
  EXPECT_EQ(RouteLaunch(empty, *Canonicalize(gate), PHASE_KIND_FORWARD)->program->id,
            "rmsnorm_silu_gate.fwd.warp");
}

// A recompute takes a PHASE_KIND_RECOMPUTE window ahead of every forward
// window, wherever it stands in the table, and the forward windows where no
// recompute window matches; a forward never takes a recompute window.
TEST(RoutingTest, RecomputeTakesItsWindowsBeforeTheForwards) {
  absl::StatusOr<RoutingTable> t = ParseRoutingTable(R"pb(
    arch: "sm_90a" version: "t3"
    windows { op: RMSNORM phase_kind: PHASE_KIND_FORWARD dim_max: 2048 program: "rmsnorm.fwd.flat" evidence: "a" }
    windows { op: RMSNORM phase_kind: PHASE_KIND_RECOMPUTE dim_max: 1024 program: "rmsnorm.fwd.cta" evidence: "b" }
  )pb", "t3");
  ASSERT_TRUE(t.ok()) << t.status();
  const StepSpec narrow = *Canonicalize(RowsSpec(64, 512));
  const StepSpec wide = *Canonicalize(RowsSpec(64, 2048));
  const StepSpec wider = *Canonicalize(RowsSpec(64, 4096));
  absl::StatusOr<Route> recompute = RouteLaunch(*t, narrow, PHASE_KIND_RECOMPUTE);
  ASSERT_TRUE(recompute.ok()) << recompute.status();
  EXPECT_EQ(recompute->program->id, "rmsnorm.fwd.cta");
  EXPECT_THAT(recompute->reason, HasSubstr("window sm_90a/t3[1] RMSNORM PHASE_KIND_RECOMPUTE"));
  EXPECT_EQ(RouteLaunch(*t, narrow, PHASE_KIND_FORWARD)->program->id, "rmsnorm.fwd.flat");
  absl::StatusOr<Route> fallback = RouteLaunch(*t, wide, PHASE_KIND_RECOMPUTE);
  EXPECT_EQ(fallback->program->id, "rmsnorm.fwd.flat");
  EXPECT_THAT(fallback->reason, HasSubstr("window sm_90a/t3[0]"));
  // Neither kind of window: the forward's default rule.
  absl::StatusOr<Route> none = RouteLaunch(*t, wider, PHASE_KIND_RECOMPUTE);
  EXPECT_EQ(none->program->id, "rmsnorm.fwd.cta");
  EXPECT_TRUE(none->default_rule);
  EXPECT_THAT(none->reason, HasSubstr("default rule: forward with dim 4096 > 1024"));
  // The plan's recompute takes it; its forward does not.
  const TargetDevice h200 = *TargetDevice::ForArch("sm_90a");
  absl::StatusOr<Plan> plan = MakePlan(RowsSpec(64, 512, true, {FORWARD, RECOMPUTE}), h200, *t);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->launches_size(), 2);
  EXPECT_EQ(plan->launches(0).program(), "rmsnorm.fwd.flat");
  EXPECT_EQ(plan->launches(1).program(), "rmsnorm.fwd.cta");
  EXPECT_EQ(plan->launches(1).phase(), RECOMPUTE);
}

struct BadTable {
  const char* text;
  const char* message;
};

TEST(RoutingTableCheckTest, RejectsBadWindows) {
  const BadTable cases[] = {
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM phase_kind: PHASE_KIND_FORWARD program: "nope" evidence: "e" })pb",
       "windows[0].program = \"nope\": no such program"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM phase_kind: PHASE_KIND_FORWARD program: "rmsnorm.bwd.kb" evidence: "e" })pb",
       "is a backward program of RMSNORM"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM_SILU_GATE phase_kind: PHASE_KIND_FORWARD program: "rmsnorm.fwd.cta" evidence: "e" })pb",
       "is a forward program of RMSNORM"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM phase_kind: PHASE_KIND_FORWARD program: "rmsnorm.fwd.cta" })pb",
       "windows[0].evidence: empty"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM phase_kind: PHASE_KIND_FORWARD rows_min: 10 rows_max: 5 program: "rmsnorm.fwd.cta" evidence: "e" })pb",
       "rows 10..5 is empty"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM phase_kind: PHASE_KIND_FORWARD dim_min: 10 dim_max: 5 program: "rmsnorm.fwd.cta" evidence: "e" })pb",
       "dim 10..5 is empty"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM program: "rmsnorm.fwd.cta" evidence: "e" })pb",
       "phase_kind: must be set"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM phase_kind: PHASE_KIND_FORWARD residual: RESIDUAL_WITH_GRAD_IN program: "rmsnorm.fwd.cta" evidence: "e" })pb",
       "windows[0].residual = RESIDUAL_WITH_GRAD_IN: a backward form"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM phase_kind: PHASE_KIND_RECOMPUTE residual: RESIDUAL_WITH_GRAD_IN program: "rmsnorm.fwd.cta" evidence: "e" })pb",
       "windows[0].residual = RESIDUAL_WITH_GRAD_IN: a backward form"},
      {R"pb(arch: "a" version: "v" windows { op: RMSNORM phase_kind: PHASE_KIND_RECOMPUTE program: "rmsnorm.bwd.split" evidence: "e" })pb",
       "is a backward program of RMSNORM"},
      {R"pb(version: "v")pb", "arch is empty"},
      {R"pb(arch: "a" version: "v" windows { bogus: 1 })pb", "t:1:"},
  };
  for (const BadTable& c : cases) {
    absl::StatusOr<RoutingTable> t = ParseRoutingTable(c.text, "t");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(RoutingTableTest, EmbeddedSm90aLoadsAndCoversTheExamples) {
  absl::StatusOr<const RoutingTable*> t = RoutingTableFor("sm_90a");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->arch(), "sm_90a");
  EXPECT_FALSE((*t)->version().empty());
  // Every form of both ops is routed by a window, not the default rule.
  for (bool det : {false, true}) {
    StepSpec rows = *Canonicalize(RowsSpec(65536, 4096, det));
    StepSpec heads = *Canonicalize(HeadsSpec(4096, 24, 256, 8192, 256));
    for (const StepSpec& s : {rows, heads}) {
      for (PhaseKind k : {PHASE_KIND_FORWARD, PHASE_KIND_BACKWARD}) {
        absl::StatusOr<Route> r = RouteLaunch(**t, s, k);
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_FALSE(r->default_rule) << r->reason;
      }
    }
  }
  // Measured windows: the backward takes the split program up to 16384 rows
  // (below 16384 at H 1536..4096; below 4096-12288 at H = 2048, 3072, 4096
  // and 4104..8192) and above H = 8192 in both modes, else the
  // fused det program (and in the non-deterministic mode kb below H = 520
  // above 16384 rows: since table .48 not from H = 4104, where it had the
  // rows from 16384, nor above 8192); the forward takes the
  // looped program from 2560 (with or without the residual), the flat
  // program up to 2048, between them flat at few rows and cta at many.
  auto backward = [&](const StepSpec& spec) {
    return std::string(RouteLaunch(**t, *Canonicalize(spec), PHASE_KIND_BACKWARD)->program->id);
  };
  // The backward of `spec` at `rows` rows.
  auto backward_at = [&](StepSpec spec, int64_t rows) {
    spec.mutable_layout()->set_tokens(rows);
    return backward(spec);
  };
  for (bool det : {true, false}) {
    EXPECT_EQ(backward(RowsSpec(16385, 1024, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(2559, 4096, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(4096, 4096, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(16383, 4096, det)), "rmsnorm.bwd.det.partials");
    // Below 16384 rows det.partials from 6144 rows at H = 2048, from 6144
    // at 3072 (12288 before table .47, 8192 before .48), from 4096 at 4096, from 6144 at
    // 4104..6552 (up to 16384 rows at 4104..6136, table .19; from 2048 since
    // table .47, below) and from 4096 at 6560..8192 (two rows a ring step;
    // tables .14, .15; from 1024 since table .47, below).
    EXPECT_EQ(backward(RowsSpec(6143, 2048, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(6144, 2048, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(16383, 2048, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(6143, 3072, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(6144, 3072, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(12288, 3072, det)), "rmsnorm.bwd.det.partials");
    // Table .20: the widths between, from 6144 rows at H = 1544..2040, from
    // 10240 at 2056..3064 (6144 at 2312..3064 since table .47), from 4096 at
    // 3280..4088 (the 256-thread lockstep rows, as H = 4096); 3080..3272
    // stays split. Table .35: at H = 520..1024
    // (the split program's 64-thread rows) split again up to 16384 rows, to
    // 24576 at 520..768 without the residual; tables .55-.56 (det.partials'
    // warp rows through the ring): det.partials at 384..1024 from 16384 rows
    // (520..768 and 896..1024 from 12288 since table .57), with the residual
    // or without (tables .37-.38 had split with the residual at any rows).
    for (int64_t dim : {520, 768, 1024}) {
      EXPECT_EQ(backward(RowsSpec(6144, dim, det)), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(RowsSpec(12287, dim, det)), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(RowsSpec(16383, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(16384, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      StepSpec residual = RowsSpec(1, dim, det);
      residual.set_residual(true);
      EXPECT_EQ(backward_at(residual, 12287), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward_at(residual, 12288), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward_at(residual, 16384), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward_at(residual, 16385), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward_at(residual, 32769), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward_at(residual, 262144), "rmsnorm.bwd.det.partials") << dim;
      // The gated backward (det.partials serves both modes): split up to
      // 2560 rows (2048 before table .38).
      StepSpec gate = RowsSpec(1, dim, det);
      gate.set_op(RMSNORM_SILU_GATE);
      EXPECT_EQ(backward_at(gate, 2560), "rmsnorm_silu_gate.bwd.split") << dim;
      EXPECT_EQ(backward_at(gate, 2561), "rmsnorm_silu_gate.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(16385, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(24576, dim, det)), "rmsnorm.bwd.det.partials") << dim;
    }
    // Table .55: det.partials at 16384 rows of H = 384..632 (split below),
    // from 12288 at 640..768; H = 376 keeps split there; table .56: at 16384
    // rows of 776..1024 too; table .57: from 12288 rows at 520..768 and
    // 896..1024.
    for (int64_t dim : {384, 512, 520, 632, 640, 768, 776, 888, 896, 1024}) {
      const int64_t from = dim >= 520 && (dim <= 768 || dim >= 896) ? 12288 : 16384;
      EXPECT_EQ(backward(RowsSpec(from - 1, dim, det)), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(RowsSpec(from, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(16384, dim, det)), "rmsnorm.bwd.det.partials") << dim;
    }
    EXPECT_EQ(backward(RowsSpec(16384, 376, det)), "rmsnorm.bwd.split");
    // Tables .58-.60: with the fused residual and its incoming gradient,
    // det.partials from 12288 rows at H = 384..512, from 8192 at 520..568,
    // from 6144 at 576..1024, from 4096 at 2560..3072, from 768 at
    // 4104..6144 (from 1536 since table .47, 1024 in table .59) and from 384
    // at 6152..8192 (from 1024 at 6560..8192 since table .47); split below.
    // The residual without the incoming gradient (a backward without dh_in)
    // keeps the windows above; H = 264 keeps split.
    auto grad_in_at = [&](int64_t dim, int64_t rows) {
      StepSpec spec = RowsSpec(rows, dim, det);
      spec.set_residual(true);
      spec.set_residual_grad_in(true);
      return spec;
    };
    const struct {
      int64_t dim, from;
    } grad_in_edges[] = {{384, 12288}, {512, 12288}, {520, 8192},  {568, 8192},
                         {576, 6144},  {832, 6144},  {1024, 6144}, {2560, 4096},
                         {3072, 4096}, {4104, 768},  {5120, 768},  {6144, 768},
                         {6152, 384},  {6400, 384},  {6552, 384},  {6560, 384},
                         {8192, 384}};
    for (const auto& e : grad_in_edges) {
      EXPECT_EQ(backward(grad_in_at(e.dim, e.from - 1)), "rmsnorm.bwd.split") << e.dim;
      EXPECT_EQ(backward(grad_in_at(e.dim, e.from)), "rmsnorm.bwd.det.partials") << e.dim;
      EXPECT_EQ(backward(grad_in_at(e.dim, 16384)), "rmsnorm.bwd.det.partials") << e.dim;
      StepSpec residual_only = grad_in_at(e.dim, e.from);
      residual_only.set_residual_grad_in(false);
      EXPECT_EQ(backward(residual_only), "rmsnorm.bwd.split") << e.dim;
    }
    EXPECT_EQ(backward(grad_in_at(264, 12288)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(grad_in_at(6152, 1535)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(grad_in_at(6144, 1535)), "rmsnorm.bwd.det.partials");
    // Table .60: with an FP32 weight and without the residual det.partials
    // at H = 5632..6144 from 1024 rows (1280 with a BF16 weight, table .48).
    for (int64_t dim : {5632, 6144}) {
      StepSpec fp32 = RowsSpec(1024, dim, det);
      fp32.set_weight_dtype(FP32);
      EXPECT_EQ(backward(fp32), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward_at(fp32, 1023), "rmsnorm.bwd.split") << dim;
      fp32.set_weight_dtype(BF16);
      EXPECT_EQ(backward(fp32), "rmsnorm.bwd.split") << dim;
      fp32.set_weight_dtype(FP32);
      fp32.set_residual(true);
      EXPECT_EQ(backward(fp32), "rmsnorm.bwd.split") << dim;
    }
    StepSpec fp32_5624 = RowsSpec(1024, 5624, det);
    fp32_5624.set_weight_dtype(FP32);
    EXPECT_EQ(backward(fp32_5624), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(12288, 776, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(16385, 776, det)), "rmsnorm.bwd.det.partials");
    StepSpec residual_1032 = RowsSpec(16385, 1032, det);
    residual_1032.set_residual(true);
    EXPECT_EQ(backward(residual_1032), "rmsnorm.bwd.det.lockstep");
    StepSpec gate_512 = RowsSpec(1024, 512, det);
    gate_512.set_op(RMSNORM_SILU_GATE);
    EXPECT_EQ(backward(gate_512), "rmsnorm_silu_gate.bwd.det.partials");
    // Table .39: the gated split at D = 1032..8192 up to 1024-4096 rows by
    // width; table .41: to 3072 rows at D = 1032..1152, 4096 at 1160..1408,
    // 5120 at 1416..1536; table .44: to 5120 at 5128..6144, and at every row
    // from 1025 at 4104..5120; table .47: to 1023 at 6656..8192; table .48:
    // to 1536 at 6152..6648; table .50 (det.partials' rows of 96..384
    // threads at 768 threads an SM): to 1536 at 3072 and 4104..6144, 2048 at
    // 4096, 1024 at 6152..6648.
    struct GateEdge {
      int64_t dim, last_split_rows;
    } gate_edges[] = {{1032, 3072}, {1152, 3072}, {1160, 4096}, {1408, 4096}, {1416, 5120},
                      {1536, 5120}, {1544, 1024}, {2048, 1024}, {3064, 1024}, {3072, 1536},
                      {3080, 1024}, {4088, 1024}, {4096, 2048}, {4104, 1536}, {5120, 1536},
                      {5128, 1536}, {6144, 1536}, {6152, 1024}, {6648, 1024}, {6656, 1023},
                      {8192, 1023}};
    for (const GateEdge& e : gate_edges) {
      StepSpec gate_wide = RowsSpec(1, e.dim, det);
      gate_wide.set_op(RMSNORM_SILU_GATE);
      EXPECT_EQ(backward_at(gate_wide, e.last_split_rows), "rmsnorm_silu_gate.bwd.split") << e.dim;
      // Above 16384 rows the non-deterministic gated backward is kb's.
      EXPECT_EQ(backward_at(gate_wide, e.last_split_rows + 1),
                det || e.last_split_rows < 16384 ? "rmsnorm_silu_gate.bwd.det.partials"
                                                 : "rmsnorm_silu_gate.bwd.kb")
          << e.dim;
    }
    // Table .50: the gated D = 4104..5120 no longer split at every row
    // count; det.partials from 1537 rows, past kb's 16384 in the
    // non-deterministic mode.
    for (int64_t dim : {4104, 5120}) {
      StepSpec gate_wide = RowsSpec(1, dim, det);
      gate_wide.set_op(RMSNORM_SILU_GATE);
      for (int64_t rows : {1, 1024, 1025, 1536}) {
        EXPECT_EQ(backward_at(gate_wide, rows), "rmsnorm_silu_gate.bwd.split")
            << dim << " " << rows;
      }
      for (int64_t rows : {1537, 16384, 32769, 262144}) {
        EXPECT_EQ(backward_at(gate_wide, rows), det || rows <= 16384
                                                    ? "rmsnorm_silu_gate.bwd.det.partials"
                                                    : "rmsnorm_silu_gate.bwd.kb")
            << dim << " " << rows;
      }
    }
    // Table .60: the gated forward on fwd.flat.groups at D = 640..896 for
    // 512..1024 rows, and the recompute alone at D = 520..536 for 1025..8191
    // rows, 544..768 for 1025..65535 and 776..1024 for 4096..16384 (fwd.flat
    // had them; the forward's windows from 16384-65536 rows, the warp
    // program's at 520..536 from 8192).
    auto gated = [&](int64_t rows, int64_t dim, PhaseKind kind) {
      StepSpec spec = RowsSpec(rows, dim, det);
      spec.set_op(RMSNORM_SILU_GATE);
      return std::string(RouteLaunch(**t, *Canonicalize(spec), kind)->program->id);
    };
    const std::string groups = "rmsnorm_silu_gate.fwd.flat.groups";
    const std::string flat = "rmsnorm_silu_gate.fwd.flat";
    for (int64_t dim : {640, 704, 768}) {
      for (int64_t rows : {512, 1024, 1025, 4096, 65535}) {
        EXPECT_EQ(gated(rows, dim, PHASE_KIND_RECOMPUTE), groups) << dim << " " << rows;
        const bool forward_groups = rows <= 1024 || (dim == 640 && rows >= 16384);
        EXPECT_EQ(gated(rows, dim, PHASE_KIND_FORWARD), forward_groups ? groups : flat)
            << dim << " " << rows;
      }
      EXPECT_EQ(gated(511, dim, PHASE_KIND_RECOMPUTE), flat) << dim;
      EXPECT_EQ(gated(65536, dim, PHASE_KIND_FORWARD), groups) << dim;
    }
    for (int64_t dim : {544, 632}) {
      EXPECT_EQ(gated(1025, dim, PHASE_KIND_RECOMPUTE), groups) << dim;
      EXPECT_EQ(gated(1025, dim, PHASE_KIND_FORWARD), flat) << dim;
      EXPECT_EQ(gated(1024, dim, PHASE_KIND_RECOMPUTE), flat) << dim;
    }
    for (int64_t dim : {520, 536}) {
      EXPECT_EQ(gated(1024, dim, PHASE_KIND_RECOMPUTE), flat) << dim;
      EXPECT_EQ(gated(1025, dim, PHASE_KIND_RECOMPUTE), groups) << dim;
      EXPECT_EQ(gated(8191, dim, PHASE_KIND_RECOMPUTE), groups) << dim;
      EXPECT_EQ(gated(8191, dim, PHASE_KIND_FORWARD), flat) << dim;
      EXPECT_EQ(gated(8192, dim, PHASE_KIND_RECOMPUTE), "rmsnorm_silu_gate.fwd.warp") << dim;
    }
    for (int64_t dim : {776, 1024}) {
      EXPECT_EQ(gated(4095, dim, PHASE_KIND_RECOMPUTE), flat) << dim;
      EXPECT_EQ(gated(4096, dim, PHASE_KIND_RECOMPUTE), groups) << dim;
      EXPECT_EQ(gated(16384, dim, PHASE_KIND_RECOMPUTE), groups) << dim;
      EXPECT_EQ(gated(16384, dim, PHASE_KIND_FORWARD), flat) << dim;
      EXPECT_EQ(gated(16385, dim, PHASE_KIND_RECOMPUTE), flat) << dim;
    }
    EXPECT_EQ(gated(1024, 896, PHASE_KIND_RECOMPUTE), groups);
    EXPECT_EQ(gated(4096, 1032, PHASE_KIND_RECOMPUTE), flat);
    EXPECT_EQ(gated(1024, 904, PHASE_KIND_FORWARD), flat);
    EXPECT_EQ(gated(1025, 896, PHASE_KIND_FORWARD), flat);
    EXPECT_EQ(backward(RowsSpec(16385, 512, det)),
              det ? "rmsnorm.bwd.det.partials" : "rmsnorm.bwd.kb");
    EXPECT_EQ(backward(RowsSpec(6144, 512, det)), "rmsnorm.bwd.split");
    for (int64_t dim : {1544, 1792, 2040}) {
      EXPECT_EQ(backward(RowsSpec(6143, dim, det)), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(RowsSpec(6144, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(16383, dim, det)), "rmsnorm.bwd.det.partials") << dim;
    }
    // Table .47: from 6144 rows at H = 2312..3064 (10240 before).
    for (int64_t dim : {2312, 2560, 3064}) {
      EXPECT_EQ(backward(RowsSpec(6143, dim, det)), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(RowsSpec(6144, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(16383, dim, det)), "rmsnorm.bwd.det.partials") << dim;
    }
    // Table .36: from 12289 rows at H = 2056..2304 (the split program's rows
    // of 128 threads of three vectors); table .48: from 8192.
    for (int64_t dim : {2056, 2176, 2304}) {
      EXPECT_EQ(backward(RowsSpec(8191, dim, det)), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(RowsSpec(8192, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(16383, dim, det)), "rmsnorm.bwd.det.partials") << dim;
    }
    for (int64_t dim : {3280, 3584, 4088}) {
      EXPECT_EQ(backward(RowsSpec(2559, dim, det)), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(RowsSpec(4096, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(16383, dim, det)), "rmsnorm.bwd.det.partials") << dim;
    }
    // Table .24, without the fused residual: from 3072 rows at H =
    // 3280..4096 and 6560..8184, and at H = 8192 with an FP32 weight (table
    // .25: with either weight). Table .30: from 2560 rows at 6560..8184 and
    // (BF16 weight) 3456..4096; with the residual from 2048 rows at
    // 3280..4096 and 6560..8184, from 2560 at 8192. Table .47: from 1024 rows
    // at 6560..8192, with or without the residual.
    auto fp32 = [](StepSpec spec) {
      spec.set_weight_dtype(FP32);
      return spec;
    };
    auto residual = [](StepSpec spec) {
      spec.set_residual(true);
      return spec;
    };
    for (int64_t dim : {3280, 3584, 4088, 4096, 6560, 7168, 8184}) {
      for (int64_t rows : {3072, 4095}) {
        EXPECT_EQ(backward(RowsSpec(rows, dim, det)), "rmsnorm.bwd.det.partials") << dim;
        EXPECT_EQ(backward(fp32(RowsSpec(rows, dim, det))), "rmsnorm.bwd.det.partials") << dim;
      }
      const bool wide = dim >= 6560;
      const bool bf16_from_2560 = wide || dim >= 3456;
      EXPECT_EQ(backward(RowsSpec(2560, dim, det)),
                bf16_from_2560 ? "rmsnorm.bwd.det.partials" : "rmsnorm.bwd.split")
          << dim;
      EXPECT_EQ(backward(fp32(RowsSpec(2560, dim, det))),
                wide ? "rmsnorm.bwd.det.partials" : "rmsnorm.bwd.split")
          << dim;
      EXPECT_EQ(backward(RowsSpec(2559, dim, det)),
                wide ? "rmsnorm.bwd.det.partials" : "rmsnorm.bwd.split")
          << dim;
      for (int64_t rows : {2048, 3071, 4096}) {
        EXPECT_EQ(backward(residual(RowsSpec(rows, dim, det))), "rmsnorm.bwd.det.partials")
            << dim << " " << rows;
      }
      EXPECT_EQ(backward(residual(RowsSpec(2047, dim, det))),
                wide ? "rmsnorm.bwd.det.partials" : "rmsnorm.bwd.split")
          << dim;
    }
    for (int64_t dim : {6560, 7168, 8184, 8192}) {
      for (bool with_residual : {false, true}) {
        StepSpec spec = RowsSpec(1, dim, det);
        spec.set_residual(with_residual);
        EXPECT_EQ(backward_at(spec, 1023), "rmsnorm.bwd.split") << dim;
        EXPECT_EQ(backward_at(spec, 1024), "rmsnorm.bwd.det.partials") << dim;
        EXPECT_EQ(backward_at(fp32(spec), 1024), "rmsnorm.bwd.det.partials") << dim;
      }
    }
    EXPECT_EQ(backward(RowsSpec(2560, 3448, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(2560, 3456, det)), "rmsnorm.bwd.det.partials");
    for (int64_t rows : {3072, 4095}) {
      EXPECT_EQ(backward(fp32(RowsSpec(rows, 8192, det))), "rmsnorm.bwd.det.partials") << rows;
      EXPECT_EQ(backward(RowsSpec(rows, 8192, det)), "rmsnorm.bwd.det.partials") << rows;
    }
    for (int64_t rows : {2560, 4095}) {
      EXPECT_EQ(backward(residual(RowsSpec(rows, 8192, det))), "rmsnorm.bwd.det.partials") << rows;
    }
    // Table .47 (tables .31-.32 had the residual from 3072 rows at H =
    // 4104..6136 and 6152..6552, from 4096 at 6144): from 1536 rows with the
    // residual at H = 4104..6552 and from 2048 without it; table .48 (the
    // FP32 partial rows' blocks of 4 rows): from 1280 without it at
    // H = 4104..6144.
    for (int64_t dim : {4104, 5120, 6136, 6144, 6152, 6552}) {
      EXPECT_EQ(backward(residual(RowsSpec(1535, dim, det))), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(residual(RowsSpec(1536, dim, det))), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(residual(RowsSpec(6143, dim, det))), "rmsnorm.bwd.det.partials") << dim;
      const char* from_1280 = dim <= 6144 ? "rmsnorm.bwd.det.partials" : "rmsnorm.bwd.split";
      EXPECT_EQ(backward(RowsSpec(1279, dim, det)), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward(RowsSpec(1280, dim, det)), from_1280) << dim;
      EXPECT_EQ(backward(RowsSpec(2047, dim, det)), from_1280) << dim;
      EXPECT_EQ(backward(RowsSpec(2048, dim, det)), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(fp32(RowsSpec(2048, dim, det))), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward(RowsSpec(6143, dim, det)), "rmsnorm.bwd.det.partials") << dim;
    }
    EXPECT_EQ(backward(RowsSpec(8192, 3200, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(8192, 3272, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(6144, 6144, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(4096, 6560, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(6143, 8192, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(16383, 8192, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(6144, 4104, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(8192, 6136, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(16384, 4096, det)), "rmsnorm.bwd.det.partials");
    // H = 1032..1536 (96 threads a row) from 4096 rows (8192 before table
    // .20): the lockstep row groups.
    EXPECT_EQ(backward(RowsSpec(16384, 1032, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(8192, 1280, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(4095, 1536, det)), "rmsnorm.bwd.split");
    // Table .35: split at H = 1408..1536 for 4096..4608 rows without the
    // residual.
    for (int64_t dim : {1408, 1472, 1536}) {
      for (DType w : {BF16, FP32}) {
        StepSpec spec = RowsSpec(1, dim, det);
        spec.set_weight_dtype(w);
        EXPECT_EQ(backward_at(spec, 4096), "rmsnorm.bwd.split") << dim;
        EXPECT_EQ(backward_at(spec, 4608), "rmsnorm.bwd.split") << dim;
        EXPECT_EQ(backward_at(spec, 4609), "rmsnorm.bwd.det.lockstep") << dim;
        spec.set_residual(true);
        EXPECT_EQ(backward_at(spec, 4096), "rmsnorm.bwd.det.lockstep") << dim;
      }
    }
    EXPECT_EQ(backward(RowsSpec(4096, 1400, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(4095, 1032, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(4096, 1032, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(16384, 1536, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(49152, 1536, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(131072, 1536, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(65536, 1032, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(65536, 1544, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(16384, 2048, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(16384, 1528, det)), "rmsnorm.bwd.det.lockstep");
    EXPECT_EQ(backward(RowsSpec(16384, 4104, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(16384, 5120, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(1024, 5120, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(4096, 5120, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(512, 8192, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(2048, 8192, det)), "rmsnorm.bwd.det.partials");
    // From 16384 rows at H >= 6144: det.partials, in the non-deterministic
    // mode too (up to H = 8192 since table .47, above since .48).
    EXPECT_EQ(backward(RowsSpec(16384, 6144, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(131072, 8192, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(16384, 8200, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(1024, 16384, det)), "rmsnorm.bwd.det.partials")
        << "split runs dims up to 8192";
    // Table .31: H = 128..256 at 16384 rows det.partials, fewer rows split
    // (table .32: at H = 128 from 14336).
    StepSpec view = HeadsSpec(4096, 4, 256);
    view.set_deterministic(det);
    EXPECT_EQ(backward(view), "rmsnorm.bwd.det.partials");
    view.mutable_layout()->set_tokens(3072);
    EXPECT_EQ(backward(view), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(16384, 128, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(14336, 128, det)), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward(RowsSpec(14335, 128, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(16383, 256, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(16384, 120, det)), "rmsnorm.bwd.split");
    EXPECT_EQ(backward(RowsSpec(16384, 264, det)), "rmsnorm.bwd.split");
    // Table .38, with the fused residual: det.partials at H = 64..256 for
    // 14336..16384 rows and at 128..192 from 12288.
    StepSpec narrow = RowsSpec(1, 64, det);
    narrow.set_residual(true);
    EXPECT_EQ(backward_at(narrow, 14335), "rmsnorm.bwd.split");
    EXPECT_EQ(backward_at(narrow, 14336), "rmsnorm.bwd.det.partials");
    EXPECT_EQ(backward_at(narrow, 16384), "rmsnorm.bwd.det.partials");
    // Table .60: at 128..192 for 12288..14335 rows only with the incoming
    // gradient; a residual without it runs the split program there.
    for (int64_t dim : {128, 192}) {
      narrow.mutable_layout()->set_dim(dim);
      narrow.set_residual_grad_in(true);
      EXPECT_EQ(backward_at(narrow, 12287), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward_at(narrow, 12288), "rmsnorm.bwd.det.partials") << dim;
      EXPECT_EQ(backward_at(narrow, 14335), "rmsnorm.bwd.det.partials") << dim;
      narrow.set_residual_grad_in(false);
      EXPECT_EQ(backward_at(narrow, 12288), "rmsnorm.bwd.split") << dim;
      EXPECT_EQ(backward_at(narrow, 14335), "rmsnorm.bwd.split") << dim;
    }
    narrow.mutable_layout()->set_dim(256);
    EXPECT_EQ(backward_at(narrow, 14335), "rmsnorm.bwd.split");
    EXPECT_EQ(backward_at(narrow, 14336), "rmsnorm.bwd.det.partials");
    for (int64_t dim : {56, 200, 264}) {
      narrow.mutable_layout()->set_dim(dim);
      EXPECT_EQ(backward_at(narrow, dim == 200 ? 12288 : 16384), "rmsnorm.bwd.split") << dim;
    }
  }
  EXPECT_EQ(backward(RowsSpec(65536, 6144, false)), "rmsnorm.bwd.det.partials");
  EXPECT_EQ(backward(RowsSpec(65536, 6144, true)), "rmsnorm.bwd.det.partials");
  // Table .48: in the non-deterministic mode det.partials at every row count
  // above H = 8192 and from 16384 rows at H = 4104..6136; kb keeps H <= 512.
  for (int64_t rows : {1, 1024, 16383, 16384, 65536}) {
    for (int64_t dim : {8200, 12288, 16384}) {
      EXPECT_EQ(backward(RowsSpec(rows, dim, false)), "rmsnorm.bwd.det.partials") << dim;
    }
  }
  EXPECT_EQ(backward(RowsSpec(16385, 4104, false)), "rmsnorm.bwd.det.partials");
  EXPECT_EQ(backward(RowsSpec(131072, 6136, false)), "rmsnorm.bwd.det.partials");
  EXPECT_EQ(backward(RowsSpec(65536, 512, false)), "rmsnorm.bwd.kb");
  EXPECT_EQ(RouteLaunch(**t, *Canonicalize(RowsSpec(64, 512)), PHASE_KIND_FORWARD)->program->id,
            "rmsnorm.fwd.flat");
  auto forward = [&](const StepSpec& spec) {
    return std::string(RouteLaunch(**t, *Canonicalize(spec), PHASE_KIND_FORWARD)->program->id);
  };
  EXPECT_EQ(forward(RowsSpec(131072, 2048)), "rmsnorm.fwd.flat");
  EXPECT_EQ(forward(RowsSpec(131072, 2304)), "rmsnorm.fwd.flat");
  EXPECT_EQ(forward(RowsSpec(65537, 2560)), "rmsnorm.fwd.flat");
  EXPECT_EQ(forward(RowsSpec(1, 2568)), "rmsnorm.fwd.flat");  // table .23
  StepSpec one_row_residual = RowsSpec(1, 2568);
  one_row_residual.set_residual(true);
  EXPECT_EQ(forward(one_row_residual), "rmsnorm.fwd.flat.dense");  // table .33
  EXPECT_EQ(forward(RowsSpec(131072, 7168)), "rmsnorm.fwd.flat.wide");  // table .28
  // Table .39, H = 520..1024 (the flat programs' rows of 64 threads): dense
  // from 4096 rows (with the fused residual to 8192), warp at H = 520..576
  // from 16384 rows and 584..640 from 65536.
  EXPECT_EQ(forward(RowsSpec(4095, 768)), "rmsnorm.fwd.flat");
  EXPECT_EQ(forward(RowsSpec(4096, 768)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(262144, 1024)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(16383, 576)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(16384, 520)), "rmsnorm.fwd.warp");
  EXPECT_EQ(forward(RowsSpec(16384, 584)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(65536, 640)), "rmsnorm.fwd.warp");
  EXPECT_EQ(forward(RowsSpec(65536, 648)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(65536, 512)), "rmsnorm.fwd.flat");
  // Table .40: dense (its 96-thread rows two to a CTA) at H = 1032..1408
  // from 1024 rows and 1416..1536 for 1024..16384, BF16 weight; table .67:
  // at H = 1032..1408 at any rows and with either weight; table .68: at
  // 1416..1536 with an FP32 weight up to 2640 rows (and for 5120..40960,
  // the weight-edge table below).
  for (int64_t rows : {1, 1023, 1024, 131072}) {
    for (int64_t dim : {1024, 1032, 1408, 1416}) {
      for (DType w : {BF16, FP32}) {
        StepSpec spec = RowsSpec(rows, dim);
        spec.set_weight_dtype(w);
        const bool dense = (dim >= 1032 && dim <= 1408) ||
                           (w == BF16 && dim == 1416 && rows >= 1024 && rows <= 16384) ||
                           (w == FP32 && dim == 1416 && rows <= 2640) ||
                           (dim == 1024 && rows >= 4096);  // table .20's D = 520..1024
        EXPECT_EQ(forward(spec), dense ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.flat")
            << rows << " x " << dim << " " << DType_Name(w);
      }
    }
  }
  EXPECT_EQ(forward(RowsSpec(131072, 1408)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(16384, 1536)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(16385, 1536)), "rmsnorm.fwd.flat");
  // Table .41: dense at H = 1544..2040 from 1585 rows (fwd.flat's grid a
  // second wave there), to 2048 rows with an FP32 weight or the fused
  // residual; with a BF16 one at any rows to H = 1792, to 16384 above.
  EXPECT_EQ(forward(RowsSpec(1584, 1544)), "rmsnorm.fwd.flat");
  EXPECT_EQ(forward(RowsSpec(1585, 1544)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(131072, 1792)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(1585, 1800)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(16384, 2040)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(16385, 1800)), "rmsnorm.fwd.flat");
  // Table .66: the same waves at H = 2048 for 1585..2112 rows (12 and 16
  // 128-thread CTAs an SM) and at 2056..2560 for 1189..1584 (9 and 12
  // 160-thread CTAs), either weight, with or without the fused residual;
  // without it at H = 2568..3072 for 1057..1320 rows (8 and 10 192-thread
  // CTAs) and 3080..4088 for 793..1023 (6 and 8-9), where table .33's dense
  // window has the residual's rows. Past two of these edges table .67 has
  // dense where both grids need two waves, with a BF16 weight and without
  // the residual (bf16_plain_dense).
  struct WaveEdge {
    int64_t rows, dim;
    bool dense, residual_too;
    bool bf16_plain_dense = false;
  };
  const WaveEdge wave_edges[] = {
      {1584, 2048, false, true}, {1585, 2048, true, true},   {2112, 2048, true, true},
      {2113, 2048, false, true, true}, {1188, 2056, false, true}, {1189, 2056, true, true},
      {1584, 2560, true, true},  {1585, 2560, false, true, true}, {1056, 2568, false, false},
      {1057, 2568, true, false}, {1320, 3072, true, false},  {1321, 3072, false, false},
      {792, 3080, false, false}, {793, 3080, true, false},   {1023, 4088, true, false}};
  for (const WaveEdge& e : wave_edges) {
    for (bool fp32 : {false, true}) {
      for (bool residual : {false, true}) {
        if (residual && !e.residual_too) continue;
        StepSpec spec = RowsSpec(e.rows, e.dim);
        if (fp32) spec.set_weight_dtype(FP32);
        spec.set_residual(residual);
        const bool dense = e.dense || (e.bf16_plain_dense && !fp32 && !residual);
        EXPECT_EQ(forward(spec), dense ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.flat")
            << e.rows << " x " << e.dim << (fp32 ? " FP32" : " BF16")
            << (residual ? " residual" : "");
      }
    }
  }
  // Table .67, without the residual: dense with a BF16 weight where both
  // grids need two waves, at H = 2048 for 2113..2304 rows and 2056..2560 for
  // 1585..1792 (fwd.flat with an FP32 weight or the residual); wide where
  // dense's grid needs a second wave and wide's fits one (H = 6152..7168,
  // 529..660 rows; wide's rows of 256 threads from 7176 do not), and with a
  // BF16 weight at 6152..7168 for 1280..2047; fwd.flat with an FP32 weight
  // past dense's one wave at H = 3080..3584 for 1200..1536 rows, 3592..4088
  // for 1057..1536 and 7176..8184 for 529..792. Table .68, without the
  // residual: dense with a BF16 weight at H = 2056..2560 to 4095 rows (the
  // window of 1585..1792 widened) and 2568..3064 for 2305..4095, and with an
  // FP32 weight at H = 1416..1536 up to 2640 rows and for 5120..40960.
  // `residual`, where given: the BF16 weight with the residual.
  const char* const kFlat = "rmsnorm.fwd.flat";
  const char* const kDense = "rmsnorm.fwd.flat.dense";
  const char* const kWide = "rmsnorm.fwd.flat.wide";
  struct WeightEdge {
    int64_t rows, dim;
    const char* bf16;
    const char* fp32;
    const char* residual = nullptr;
  };
  const WeightEdge weight_edges[] = {
      {2304, 2048, kDense, kFlat, kFlat}, {2305, 2048, kFlat, kFlat, kFlat},
      {1585, 2056, kDense, kFlat, kFlat}, {1792, 2056, kDense, kFlat, kFlat},
      {1793, 2056, kDense, kFlat, kFlat}, {1792, 2560, kDense, kFlat, kFlat},
      {4095, 2560, kDense, kFlat, kFlat}, {2304, 2568, kFlat, kFlat, kFlat},
      {2305, 2568, kDense, kFlat, kFlat}, {4095, 3064, kDense, kFlat, kFlat},
      {2305, 3072, kFlat, kFlat, kFlat},  {2640, 1536, kDense, kDense, kFlat},
      {2641, 1416, kDense, kFlat, kFlat}, {2640, 1544, kDense, kFlat},
      {5119, 1536, kDense, kFlat},        {5120, 1416, kDense, kDense},
      {5120, 1544, kDense, kFlat},        {40960, 1536, kFlat, kDense},
      {40961, 1416, kFlat, kFlat},
      {1585, 2568, kFlat, kFlat},         {528, 6152, kDense, kDense},
      {529, 6152, kWide, kWide},          {660, 7168, kWide, kWide},
      {661, 7168, kDense, kDense},        {600, 7176, kDense, kFlat},
      {1279, 6400, kDense, kDense},       {1280, 6152, kWide, kDense},
      {2047, 7168, kWide, kDense},        {1280, 7176, kDense, kDense},
      {1199, 3080, kDense, kDense},       {1200, 3080, kDense, kFlat},
      {1536, 3584, kDense, kFlat},        {1537, 3584, kDense, kDense},
      {1056, 3592, kDense, kDense},       {1057, 3592, kDense, kFlat},
      {1536, 4088, kDense, kFlat},        {1537, 4088, kDense, kDense},
      {528, 7176, kDense, kDense},        {529, 8184, kDense, kFlat},
      {792, 8184, kDense, kFlat},         {793, 7176, kDense, kDense}};
  for (const WeightEdge& e : weight_edges) {
    StepSpec spec = RowsSpec(e.rows, e.dim);
    EXPECT_EQ(forward(spec), e.bf16) << e.rows << " x " << e.dim << " BF16";
    if (e.residual != nullptr) {
      StepSpec residual = spec;
      residual.set_residual(true);
      EXPECT_EQ(forward(residual), e.residual) << e.rows << " x " << e.dim << " residual";
    }
    spec.set_weight_dtype(FP32);
    EXPECT_EQ(forward(spec), e.fp32) << e.rows << " x " << e.dim << " FP32";
  }
  // Table .68's FP32 windows at H = 1416..1536 are without the residual.
  for (int64_t rows : {2640, 5120}) {
    StepSpec residual = RowsSpec(rows, 1536);
    residual.set_weight_dtype(FP32);
    residual.set_residual(true);
    EXPECT_EQ(forward(residual), kFlat) << rows << " x 1536 FP32 residual";
  }
  // Table .68: the dense program in the recompute alone at H = 1416..1536
  // with an FP32 weight for 2641..5119 rows and a BF16 one for 16385..32768,
  // where the forward keeps fwd.flat; without the residual.
  auto recompute = [&](const StepSpec& spec) {
    return std::string(RouteLaunch(**t, *Canonicalize(spec), PHASE_KIND_RECOMPUTE)->program->id);
  };
  struct RecomputeEdge {
    int64_t rows, dim;
    DType weight;
    bool residual;
    const char* recompute;
  };
  const RecomputeEdge recompute_edges[] = {
      {2641, 1416, FP32, false, kDense},  {5119, 1536, FP32, false, kDense},
      {2641, 1544, FP32, false, kFlat},   {2641, 1536, FP32, true, kFlat},
      {16385, 1416, BF16, false, kDense}, {32768, 1536, BF16, false, kDense},
      {32769, 1536, BF16, false, kFlat},  {16385, 1536, BF16, true, kFlat}};
  for (const RecomputeEdge& e : recompute_edges) {
    StepSpec spec = RowsSpec(e.rows, e.dim);
    spec.set_weight_dtype(e.weight);
    spec.set_residual(e.residual);
    const std::string label = absl::StrCat(e.rows, " x ", e.dim, " ", DType_Name(e.weight),
                                           e.residual ? " residual" : "");
    EXPECT_EQ(recompute(spec), e.recompute) << label;
    EXPECT_EQ(forward(spec), kFlat) << label;
  }
  // With the residual, tables .33 and .31 (dense up to 2048 rows at
  // H = 2568..4088, wide at 6152..8184).
  StepSpec residual_3328 = RowsSpec(1280, 3328);
  residual_3328.set_residual(true);
  residual_3328.set_weight_dtype(FP32);
  EXPECT_EQ(forward(residual_3328), kDense);
  StepSpec residual_7424 = RowsSpec(640, 7424);
  residual_7424.set_residual(true);
  residual_7424.set_weight_dtype(FP32);
  EXPECT_EQ(forward(residual_7424), kWide);
  // Table .43: with an FP32 weight at H = 1544..1792 from 8192 rows.
  StepSpec fp32_1664 = RowsSpec(8191, 1664);
  fp32_1664.set_weight_dtype(FP32);
  EXPECT_EQ(forward(fp32_1664), "rmsnorm.fwd.flat");
  fp32_1664.mutable_layout()->set_tokens(8192);
  EXPECT_EQ(forward(fp32_1664), "rmsnorm.fwd.flat.dense");
  fp32_1664.mutable_layout()->set_dim(1800);
  EXPECT_EQ(forward(fp32_1664), "rmsnorm.fwd.flat");
  for (bool fp32 : {false, true}) {
    StepSpec other = RowsSpec(2048, 1664);
    if (fp32) {
      other.set_weight_dtype(FP32);
    } else {
      other.set_residual(true);
    }
    EXPECT_EQ(forward(other), "rmsnorm.fwd.flat.dense") << fp32;
    other.mutable_layout()->set_tokens(2049);
    EXPECT_EQ(forward(other), "rmsnorm.fwd.flat") << fp32;
    other.mutable_layout()->set_tokens(1584);
    EXPECT_EQ(forward(other), "rmsnorm.fwd.flat") << fp32;
  }
  // Table .45: dense with the fused residual at H = 1544..2040 for
  // 3584..6144 rows (either weight); the warp program at H = 584..632 from
  // 32768 rows, 640 from 65536.
  for (int64_t dim : {1544, 2040}) {
    for (bool fp32 : {false, true}) {
      StepSpec residual = RowsSpec(3583, dim);
      residual.set_residual(true);
      if (fp32) residual.set_weight_dtype(FP32);
      EXPECT_EQ(forward(residual), "rmsnorm.fwd.flat") << dim << " " << fp32;
      residual.mutable_layout()->set_tokens(3584);
      EXPECT_EQ(forward(residual), "rmsnorm.fwd.flat.dense") << dim << " " << fp32;
      residual.mutable_layout()->set_tokens(6144);
      EXPECT_EQ(forward(residual), "rmsnorm.fwd.flat.dense") << dim << " " << fp32;
      residual.mutable_layout()->set_tokens(6145);
      EXPECT_EQ(forward(residual), "rmsnorm.fwd.flat") << dim << " " << fp32;
    }
  }
  StepSpec residual_2048 = RowsSpec(4096, 2048);
  residual_2048.set_residual(true);
  EXPECT_EQ(forward(residual_2048), "rmsnorm.fwd.flat") << "H = 2048 is past the window";
  for (int64_t dim : {584, 608, 632}) {
    EXPECT_EQ(forward(RowsSpec(32767, dim)), "rmsnorm.fwd.flat.dense") << dim;
    EXPECT_EQ(forward(RowsSpec(32768, dim)), "rmsnorm.fwd.warp") << dim;
  }
  EXPECT_EQ(forward(RowsSpec(32768, 640)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(65535, 640)), "rmsnorm.fwd.flat.dense");
  StepSpec residual_608 = RowsSpec(32768, 608);
  residual_608.set_residual(true);
  EXPECT_EQ(forward(residual_608), "rmsnorm.fwd.flat") << "no warp window with the residual";
  StepSpec fp32_1280 = RowsSpec(65536, 1280);
  fp32_1280.set_weight_dtype(FP32);
  EXPECT_EQ(forward(fp32_1280), "rmsnorm.fwd.flat.dense");  // table .67
  StepSpec residual_1280 = RowsSpec(65536, 1280);
  residual_1280.set_residual(true);
  EXPECT_EQ(forward(residual_1280), "rmsnorm.fwd.flat");
  StepSpec residual_768 = RowsSpec(4096, 768);
  residual_768.set_residual(true);
  EXPECT_EQ(forward(residual_768), "rmsnorm.fwd.flat.dense");
  residual_768.mutable_layout()->set_tokens(8193);
  EXPECT_EQ(forward(residual_768), "rmsnorm.fwd.flat");
  residual_768.mutable_layout()->set_tokens(65536);
  residual_768.mutable_layout()->set_dim(520);
  EXPECT_EQ(forward(residual_768), "rmsnorm.fwd.flat") << "no warp window with the residual";
  // The flat program at 32 registers: 16-lane rows where that fits one wave
  // and the 40-register one does not, H = 4096 up to 2048 rows, H = 8192
  // at every row count (above 65536 rows with a BF16 weight since table .17,
  // without the fused residual).
  EXPECT_EQ(forward(HeadsSpec(4096, 4, 256)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(12672, 256)), "rmsnorm.fwd.flat");
  EXPECT_EQ(forward(RowsSpec(16896, 136)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(16897, 256)), "rmsnorm.fwd.flat");
  EXPECT_EQ(forward(RowsSpec(16384, 128)), "rmsnorm.fwd.flat");
  EXPECT_EQ(forward(RowsSpec(2048, 4096)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(1024, 6144)), "rmsnorm.fwd.flat.wide");  // table .26
  // At H = 6144 with an FP32 weight the flat program below 2049 rows.
  for (int64_t rows : {1, 1024, 2048}) {
    StepSpec fp32 = RowsSpec(rows, 6144);
    fp32.set_weight_dtype(FP32);
    EXPECT_EQ(forward(fp32), "rmsnorm.fwd.flat") << rows;
  }
  EXPECT_EQ(forward(RowsSpec(1024, 8192)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(2049, 8192)), "rmsnorm.fwd.flat.dense");
  EXPECT_EQ(forward(RowsSpec(16383, 8192)), "rmsnorm.fwd.flat.dense");
  // Table .26, without the fused residual: the wide flat program at H = 8192
  // from 16384 rows (BF16 weight) or 4096 (FP32), at H = 6144 from 6144 rows
  // and for 1024..1535 (BF16) or from 2049 (FP32); not at the widths beside.
  EXPECT_EQ(forward(RowsSpec(16384, 8192)), "rmsnorm.fwd.flat.wide");
  EXPECT_EQ(forward(RowsSpec(131072, 8192)), "rmsnorm.fwd.flat.wide");
  for (int64_t rows : {1023, 1024, 1535, 1536, 2048, 2049, 4095, 4096, 6143, 6144, 262144}) {
    for (int64_t dim : {6144, 8192}) {
      StepSpec fp32 = RowsSpec(rows, dim);
      fp32.set_weight_dtype(FP32);
      const bool wide = dim == 6144 ? rows >= 2049 : rows >= 4096;
      if (wide) {
        EXPECT_EQ(forward(fp32), "rmsnorm.fwd.flat.wide") << rows << " x " << dim;
      } else {
        EXPECT_NE(forward(fp32), "rmsnorm.fwd.flat.wide") << rows << " x " << dim;
      }
      // With the fused residual: at H = 8192 from 16384 rows (tables .27,
      // .30), at 6144 up to 2048 rows (table .31).
      StepSpec with_residual = fp32;
      with_residual.set_residual(true);
      EXPECT_EQ(forward(with_residual) == "rmsnorm.fwd.flat.wide",
                dim == 8192 ? rows >= 16384 : rows <= 2048)
          << rows << " x " << dim << " residual";
    }
    // Table .30: H = 5120 from 16384 rows (FP32 weight) or 65537 (BF16);
    // H = 8184 as 6152..7680, from 2048 rows.
    for (int64_t dim : {5120, 8184}) {
      StepSpec fp32 = RowsSpec(rows, dim);
      fp32.set_weight_dtype(FP32);
      const bool fp32_wide = dim == 5120 ? rows >= 16384 : rows >= 2048;
      const bool bf16_wide = dim == 5120 ? rows >= 65537 : rows >= 2048;
      EXPECT_EQ(forward(fp32) == "rmsnorm.fwd.flat.wide", fp32_wide) << rows << " x " << dim;
      EXPECT_EQ(forward(RowsSpec(rows, dim)) == "rmsnorm.fwd.flat.wide", bf16_wide)
          << rows << " x " << dim;
    }
  }
  // Tables .17-.19, without the fused residual: H = 4096 from 4096 rows
  // with an FP32 weight, 2049..16384 rows with a BF16 one; H = 3072 at
  // 4096..12288 rows, 5120 at 2049..65536, 6144 at 2049..24576. With the
  // residual, H = 6144 takes the flat program for 16384..65536 rows.
  // Table .46: H = 4096 with an FP32 weight takes the wide program from
  // 16384 rows.
  for (int64_t rows : {2049, 4095, 4096, 16383, 16384, 16385, 262144}) {
    StepSpec bf16 = RowsSpec(rows, 4096);
    StepSpec fp32 = bf16;
    fp32.set_weight_dtype(FP32);
    EXPECT_EQ(forward(bf16), rows <= 16384 ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.loop") << rows;
    EXPECT_EQ(forward(fp32), rows >= 16384  ? "rmsnorm.fwd.flat.wide"
                             : rows >= 4096 ? "rmsnorm.fwd.flat.dense"
                                            : "rmsnorm.fwd.flat")
        << rows;
    StepSpec with_residual = fp32;
    with_residual.set_residual(true);
    EXPECT_EQ(forward(with_residual), rows <= 8192 ? "rmsnorm.fwd.flat" : "rmsnorm.fwd.loop")
        << rows;
  }
  // Table .20 (without the residual): H = 3072 takes the flat program at
  // 1024..2048 rows, H = 5120 and (BF16 weight) 6144 the dense one from
  // 1536 rows. Table .21: below 1024 rows H = 3072 the flat program, H =
  // 5120 and 6144 (BF16 weight) the dense one.
  auto flat_or_loop = [](int64_t rows, int64_t dim = 0) {
    if (dim == 3072 && rows <= 2048) return "rmsnorm.fwd.flat";
    return rows >= 2049 && rows <= 8192 ? "rmsnorm.fwd.flat" : "rmsnorm.fwd.loop";
  };
  for (int64_t rows : {1, 768, 1023, 1024, 1535, 1536, 2048, 2049, 4095, 4096, 12288, 12289, 24576,
                       24577, 65536, 65537}) {
    for (int64_t dim : {3072, 5120, 6144}) {
      const int64_t first = dim == 3072 ? 4096 : 1536;
      const int64_t last = dim == 6144 ? 24576 : dim == 5120 ? 65536 : 12288;
      const bool dense = (rows >= first && rows <= last) || (dim == 5120 && rows <= 1535) ||
                         (dim == 6144 && rows <= 1023) ||
                         (dim == 3072 && rows >= 16384 && rows <= 65536);  // table .22
      // Table .26: H = 6144 (BF16 weight) the wide flat program from 6144
      // rows and for 1024..1535; table .30: H = 5120 above 65536 rows;
      // table .31: H = 3072 above 65536 rows.
      const bool wide = (dim == 6144 && (rows >= 6144 || (rows >= 1024 && rows <= 1535))) ||
                        (dim != 6144 && rows >= 65537);
      StepSpec plain = RowsSpec(rows, dim);
      EXPECT_EQ(forward(plain), wide    ? "rmsnorm.fwd.flat.wide"
                                : dense ? "rmsnorm.fwd.flat.dense"
                                        : flat_or_loop(rows, dim))
          << rows << " x " << dim;
    }
    StepSpec residual_6144 = RowsSpec(rows, 6144);
    residual_6144.set_residual(true);
    EXPECT_EQ(forward(residual_6144), rows <= 2048                   ? "rmsnorm.fwd.flat.wide"
                                      : rows >= 16384 && rows <= 65536 ? "rmsnorm.fwd.flat"
                                                                       : flat_or_loop(rows))
        << rows;  // the wide program up to 2048 rows since table .31
  }
  // Table .21: H = 4104..6136 (other than 5120, which has its own
  // windows) the dense program for 2049..16384 rows without the residual,
  // from 1536 rows since table .27. Table .62, below 1536 rows (the loop
  // before): fwd.flat up to 640 rows, then the dense program at
  // H = 4104..5112 and the wide one at 5128..6136. Table .67 (one wave):
  // dense for 529..640 rows at 5128..6136 and wide for 793..924 at
  // 4616..5112; with an FP32 weight fwd.flat for 925..1280 rows at
  // 4104..4608, 925..1023 at 4616..5112 and 793..1023 at 5128..6136.
  for (int64_t dim : {4104, 4608, 4616, 4864, 5112, 5128, 5632, 6136}) {
    for (int64_t rows : {1, 528, 529, 640, 641, 792, 793, 924, 925, 1023, 1024, 1025, 1280, 1281,
                         1535, 1536, 2047, 2048, 2049, 3071, 3072, 16384, 16385}) {
      StepSpec plain = RowsSpec(rows, dim);
      const bool dense = rows >= 1536 && rows <= 16384;
      // Table .28: H = 5632 with a BF16 weight the wide program from 1024
      // rows (with an FP32 one from 4096); table .29: H = 4104..6136 the wide
      // program above 16384 rows; table .30: at H = 4616..6136 from 2048 rows
      // (BF16 weight) or 3072 (FP32).
      const bool wide_dims = dim >= 4616;
      // Below 1536 rows: fwd.flat up to 640 rows (528 from H = 5128), then
      // dense up to H = 5112 (wide for 793..924 rows from 4616) and wide
      // from 5128 (dense for 529..640 rows).
      const bool dense_dims = dim <= 5112;
      const bool wide_wave = dim >= 4616 && dense_dims && rows >= 793 && rows <= 924;
      const char* short_rows;
      if (rows <= (dense_dims ? 640 : 528)) {
        short_rows = "rmsnorm.fwd.flat";
      } else if (dense_dims) {
        short_rows = wide_wave ? "rmsnorm.fwd.flat.wide" : "rmsnorm.fwd.flat.dense";
      } else {
        short_rows = rows <= 640 ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.flat.wide";
      }
      auto routed = [&](int64_t from) {
        return rows >= 16385 || (wide_dims && rows >= from) ? "rmsnorm.fwd.flat.wide"
               : dense                                       ? "rmsnorm.fwd.flat.dense"
                                                             : short_rows;
      };
      const bool wide_5632 = dim == 5632 && rows >= 1024;
      EXPECT_EQ(forward(plain), wide_5632 ? "rmsnorm.fwd.flat.wide" : routed(2048))
          << rows << " x " << dim;
      StepSpec fp32 = plain;
      fp32.set_weight_dtype(FP32);
      // Table .64: fwd.flat at 1024 rows with an FP32 weight; table .67.
      const bool fp32_flat = rows == 1024 ||
                             (dim <= 4608 && rows >= 925 && rows <= 1280) ||
                             (dim >= 4616 && dim <= 5112 && rows >= 925 && rows <= 1023) ||
                             (dim >= 5128 && rows >= 793 && rows <= 1023);
      EXPECT_EQ(forward(fp32), fp32_flat ? "rmsnorm.fwd.flat" : routed(3072))
          << rows << " x " << dim << " FP32";
      // With the residual, the wide program from 16384 rows (table .30) and
      // up to 2048 (table .31), but (table .61) at H = 4104..5120 the dense
      // program below 448 rows and fwd.flat for 448..575.
      StepSpec with_residual = plain;
      with_residual.set_residual(true);
      EXPECT_EQ(forward(with_residual), dim <= 5120 && rows <= 447    ? "rmsnorm.fwd.flat.dense"
                                        : dim <= 5120 && rows <= 575  ? "rmsnorm.fwd.flat"
                                        : rows >= 16384 || rows <= 2048 ? "rmsnorm.fwd.flat.wide"
                                        : rows >= 2049 && rows <= 8192  ? "rmsnorm.fwd.flat"
                                                                        : "rmsnorm.fwd.loop")
          << rows << " x " << dim;
    }
  }
  // Table .22, between the widths measured before, without the residual:
  // the dense program at H = 2056..3064 from 4096 rows (BF16 weight) or
  // 16384 (FP32) to 65536, and at 2568..3064 the flat one for 1024..2048
  // rows; H = 3080..4088 the dense one for 1024..65536 rows; H = 6152..8184
  // for 1024..8192 rows. Table .23: below 1024 rows the flat program at
  // H = 2568..4088 and the dense one at 6152..8184; the dense one at
  // H = 10240 for 1024..16384 rows and 16384 for 1024..8192. Elsewhere, and
  // with the residual, the rule before: the flat program up to H = 2560,
  // above it flat for 2049..8192 rows, else the loop.
  auto before = [](int64_t rows, int64_t dim) {
    if (dim <= 2560) return "rmsnorm.fwd.flat";
    return rows >= 2049 && rows <= 8192 ? "rmsnorm.fwd.flat" : "rmsnorm.fwd.loop";
  };
  for (int64_t dim :
       {2056, 2304, 2560, 2568, 2816, 3064, 3080, 3584, 4088, 6152, 7168, 8184, 10240, 16384}) {
    for (int64_t rows : {1023, 1024, 2048, 2049, 4095, 4096, 8192, 8193, 16383, 16384, 65536,
                         65537}) {
      for (DType w : {BF16, FP32}) {
        StepSpec plain = RowsSpec(rows, dim);
        plain.set_weight_dtype(w);
        const char* want = before(rows, dim);
        if (dim <= 3064 && rows >= (w == BF16 ? 4096 : 16384) && rows <= 65536) {
          want = "rmsnorm.fwd.flat.dense";
        } else if (w == BF16 && rows <= 4095 &&
                   ((dim <= 2560 && rows >= 1585) || (dim >= 2568 && dim <= 3064 && rows >= 2305))) {
          want = "rmsnorm.fwd.flat.dense";  // tables .67, .68 (without the residual)
        } else if (dim >= 2568 && dim <= 3064 && rows >= 1024 && rows <= 2048) {
          want = "rmsnorm.fwd.flat";
        } else if (dim >= 3080 && dim <= 4088 && rows >= 1024 && rows <= 65536) {
          want = "rmsnorm.fwd.flat.dense";
        } else if (dim >= 3080 && dim <= 4088 && rows >= 65537) {
          want = "rmsnorm.fwd.flat.wide";  // table .31
        } else if (dim >= 3080 && dim <= 4088 && rows >= 793 && rows <= 1023) {
          want = "rmsnorm.fwd.flat.dense";  // table .66 (one wave)
        } else if (dim >= 2568 && dim <= 4088 && rows <= 1023) {
          want = "rmsnorm.fwd.flat";
        } else if (dim >= 6152 && dim <= 8184 && rows >= 2048) {
          want = "rmsnorm.fwd.flat.wide";  // tables .28, .30
        } else if (dim >= 6152 && dim <= 8184 && rows <= 8192) {
          want = "rmsnorm.fwd.flat.dense";
        } else if (rows >= 1024 &&
                   ((dim == 10240 && rows <= 16384) || (dim == 16384 && rows <= 8192))) {
          want = "rmsnorm.fwd.flat.dense";
        } else if (w == BF16 && ((dim == 10240 && rows >= 16385) ||
                                 (dim == 16384 && rows >= 16384 && rows <= 32768))) {
          want = "rmsnorm.fwd.flat.dense";  // table .34
        } else if (dim == 10240 && rows >= 16385) {
          want = "rmsnorm.fwd.flat.dense";  // FP32 too since table .51 (H = 9224..10752)
        } else if (w == FP32 && dim == 16384 && rows >= 16384 && rows <= 65536) {
          want = "rmsnorm.fwd.flat.dense";  // FP32 since table .54 (the weight's slots)
        } else if ((dim == 10240 || dim == 16384) && rows <= 1023) {
          want = "rmsnorm.fwd.flat.dense";  // table .61
        }
        EXPECT_EQ(forward(plain), want) << rows << " x " << dim << " " << DType_Name(w);
        // With the residual the rule before but at H = 6152..8184 (tables
        // .30, .31): the wide program up to 2048 rows and from 16384.
        StepSpec with_residual = plain;
        with_residual.set_residual(true);
        // Table .33: the dense program up to 2048 rows at H = 2568..4088.
        const bool residual_wide = dim >= 6152 && dim <= 8184 && (rows <= 2048 || rows >= 16384);
        // Table .34: the flat program at [16384, 16384]; table .59: at
        // H = 8712..12288 from 1024 rows.
        // Table .63: the dense program above H = 8192 below 1024 rows, and at
        // H = 16384 for 1024..2048 (8192 since table .65); table .65: the flat
        // program at 16384 for 8193..16383 rows.
        const bool residual_dense = (dim >= 2568 && dim <= 4088 && rows <= 2048) ||
                                    (dim > 8192 && rows <= 1023) ||
                                    (dim == 16384 && rows >= 1024 && rows <= 8192);
        const bool residual_flat = (dim == 16384 && rows >= 8193 && rows <= 16384) ||
                                   (dim >= 8712 && dim <= 12288 && rows >= 1024);
        EXPECT_EQ(forward(with_residual), residual_wide    ? "rmsnorm.fwd.flat.wide"
                                          : residual_dense ? "rmsnorm.fwd.flat.dense"
                                          : residual_flat  ? "rmsnorm.fwd.flat"
                                                           : before(rows, dim))
            << rows << " x " << dim << " " << DType_Name(w) << " residual";
      }
    }
  }
  // Table .64 at H = 5120, ahead of its own windows: fwd.flat for 1024 rows
  // with an FP32 weight, flat.dense at 1023 and 1025 and with a BF16 one.
  for (int64_t rows : {1023, 1024, 1025}) {
    StepSpec fp32 = RowsSpec(rows, 5120);
    fp32.set_weight_dtype(FP32);
    EXPECT_EQ(forward(fp32), rows == 1024 ? "rmsnorm.fwd.flat" : "rmsnorm.fwd.flat.dense") << rows;
    EXPECT_EQ(forward(RowsSpec(rows, 5120)), "rmsnorm.fwd.flat.dense") << rows;
  }
  // Table .21 with an FP32 weight below 1024 rows: H = 3072 the flat
  // program, 5120 the dense one, 6144 the flat one of its FP32 window; the
  // fused residual has the dense program at H = 3072 (table .33) and the
  // wide one at 5120 and 6144 (table .31).
  for (int64_t rows : {1, 512, 1023}) {
    for (int64_t dim : {3072, 5120, 6144}) {
      StepSpec fp32 = RowsSpec(rows, dim);
      fp32.set_weight_dtype(FP32);
      EXPECT_EQ(forward(fp32), dim == 5120 ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.flat")
          << rows << " x " << dim;
      StepSpec with_residual = RowsSpec(rows, dim);
      with_residual.set_residual(true);
      // Table .61: at H = 5120 dense below 448 rows, flat for 448..575.
      const char* at_5120 = rows <= 447   ? "rmsnorm.fwd.flat.dense"
                            : rows <= 575 ? "rmsnorm.fwd.flat"
                                          : "rmsnorm.fwd.flat.wide";
      EXPECT_EQ(forward(with_residual), dim == 3072   ? "rmsnorm.fwd.flat.dense"
                                        : dim == 5120 ? at_5120
                                                      : "rmsnorm.fwd.flat.wide")
          << rows << " x " << dim;
    }
  }
  // Table .20: H = 2048 with a BF16 weight takes the dense program at
  // 4096..8192 rows (without the residual).
  for (int64_t rows : {4095, 4096, 8192, 8193}) {
    StepSpec bf16 = RowsSpec(rows, 2048);
    StepSpec fp32 = bf16;
    fp32.set_weight_dtype(FP32);
    StepSpec with_residual = bf16;
    with_residual.set_residual(true);
    EXPECT_EQ(forward(bf16), rows >= 4096 && rows <= 8192 ? "rmsnorm.fwd.flat.dense"
                                                          : "rmsnorm.fwd.flat")
        << rows;
    EXPECT_EQ(forward(fp32), "rmsnorm.fwd.flat") << rows;
    EXPECT_EQ(forward(with_residual), "rmsnorm.fwd.flat") << rows;
  }
  // Table .27: the wide flat program at H = 7680 from 16384 rows (2048 since
  // table .28) and, with the fused residual, at H = 8192 for 16384..65536
  // rows (H = 6152..8192 from 16384 since table .30; at 6152..8184 also for
  // 512..2048).
  for (int64_t rows : {8192, 16383, 16384, 65536, 65537, 262144}) {
    for (DType w : {BF16, FP32}) {
      StepSpec at_7680 = RowsSpec(rows, 7680);
      at_7680.set_weight_dtype(w);
      EXPECT_EQ(forward(at_7680), "rmsnorm.fwd.flat.wide") << rows;  // from 2048 rows
      at_7680.set_residual(true);
      EXPECT_EQ(forward(at_7680) == "rmsnorm.fwd.flat.wide", rows >= 16384) << rows << " residual";
      StepSpec residual = RowsSpec(rows, 8192);
      residual.set_weight_dtype(w);
      residual.set_residual(true);
      EXPECT_EQ(forward(residual) == "rmsnorm.fwd.flat.wide", rows >= 16384) << rows << " residual";
    }
  }
  for (int64_t rows : {1, 1024, 131072}) {
    StepSpec fp32 = RowsSpec(rows, 8192);
    fp32.set_weight_dtype(FP32);
    EXPECT_EQ(forward(fp32), rows >= 4096 ? "rmsnorm.fwd.flat.wide" : "rmsnorm.fwd.flat.dense")
        << rows;  // the wide program since table .26
    fp32.set_residual(true);
    EXPECT_EQ(forward(fp32), rows >= 16384 ? "rmsnorm.fwd.flat.wide" : "rmsnorm.fwd.flat.dense")
        << rows << " residual";
  }
  EXPECT_EQ(forward(RowsSpec(8, 16384)), "rmsnorm.fwd.flat.dense");  // table .61
  // Table .34 at H = 12288: the flat program for 1024..2048 rows (either
  // weight; 2049..8192 by the rule), for 16384..32768 with a BF16 weight,
  // and at 16384 rows with the residual; the loop elsewhere. Table .59: with
  // the residual, the flat program from 1024 rows (either weight).
  for (int64_t rows : {1023, 1024, 2048, 4096, 8193, 16383, 16384, 32768, 32769}) {
    StepSpec bf16 = RowsSpec(rows, 12288);
    StepSpec fp32 = bf16;
    fp32.set_weight_dtype(FP32);
    StepSpec with_residual = bf16;
    with_residual.set_residual(true);
    const bool flat = rows >= 1024 && rows <= 8192;
    EXPECT_EQ(forward(bf16), flat || (rows >= 16384 && rows <= 32768) ? "rmsnorm.fwd.flat"
                                                                      : "rmsnorm.fwd.loop")
        << rows;
    // Table .67: fwd.flat with an FP32 weight for 513..1023 rows too.
    EXPECT_EQ(forward(fp32), flat || rows == 1023 ? "rmsnorm.fwd.flat" : "rmsnorm.fwd.loop")
        << rows;
    // Table .63: below 1024 rows the dense program.
    EXPECT_EQ(forward(with_residual), rows >= 1024 ? "rmsnorm.fwd.flat" : "rmsnorm.fwd.flat.dense")
        << rows << " residual";
    StepSpec fp32_residual = fp32;
    fp32_residual.set_residual(true);
    EXPECT_EQ(forward(fp32_residual),
              rows >= 1024 ? "rmsnorm.fwd.flat" : "rmsnorm.fwd.flat.dense")
        << rows << " residual FP32";
  }
  // Table .51, between the measured widths above H = 8192, without the
  // residual: the dense program at H = 8200..8704 for 1025..8192 rows,
  // 8712..9216 for 1024..16384, 9224..10752 and 13320..16376 from 1024,
  // 12296..13312 for 1024..8192; elsewhere the rule (the loop, fwd.flat for
  // 2049..8192 rows), and so at H = 10760..12280. With the residual the rule
  // but (table .53) the dense program at H = 13312..16376 from 1024 rows and
  // (table .59) fwd.flat at 8712..12288 from 1024 rows. Table .61, below
  // 1024 rows without the residual: the dense program at H = 8200..10752
  // and 12296..16384, and at 10760..12288 up to 512 rows; table .67:
  // fwd.flat there for 513..1023 rows with an FP32 weight.
  struct Wide {
    int64_t dim_min, dim_max, rows_min, rows_max;
  } dense_windows[] = {{8200, 8704, 1025, 8192},   {8712, 9216, 1024, 16384},
                       {9224, 10752, 1024, INT64_MAX}, {12296, 13312, 1024, 8192},
                       {13320, 16376, 1024, INT64_MAX}, {8200, 10752, 0, 1023},
                       {10760, 12288, 0, 512},        {12296, 16384, 0, 1023}};
  for (int64_t dim : {8200, 8704, 8712, 9216, 9224, 10232, 10248, 10752, 10760, 11264, 12280,
                      12296, 13312, 13320, 16376}) {
    for (int64_t rows :
         {1, 128, 512, 513, 767, 1023, 1024, 1025, 2049, 8192, 8193, 16384, 16385, 262144}) {
      bool dense = false;
      for (const Wide& win : dense_windows) {
        dense = dense || (dim >= win.dim_min && dim <= win.dim_max && rows >= win.rows_min &&
                          rows <= win.rows_max);
      }
      const char* rule = rows >= 2049 && rows <= 8192 ? "rmsnorm.fwd.flat" : "rmsnorm.fwd.loop";
      for (DType w : {BF16, FP32}) {
        StepSpec plain = RowsSpec(rows, dim);
        plain.set_weight_dtype(w);
        const bool fp32_flat =
            w == FP32 && dim >= 10760 && dim <= 12288 && rows >= 513 && rows <= 1023;
        EXPECT_EQ(forward(plain), dense       ? "rmsnorm.fwd.flat.dense"
                                  : fp32_flat ? "rmsnorm.fwd.flat"
                                              : rule)
            << rows << " x " << dim << " " << DType_Name(w);
        plain.set_residual(true);
        // Table .63: the dense program below 1024 rows, and at H = 8200..8704
        // for 1024..2048; table .65: the flat program there from 8193 rows.
        const bool residual_dense = (dim >= 13312 && rows >= 1024) || rows <= 1023 ||
                                    (dim <= 8704 && rows >= 1024 && rows <= 2048);
        const bool residual_flat =
            (dim >= 8712 && dim <= 12288 && rows >= 1024) || (dim <= 8704 && rows >= 8193);
        EXPECT_EQ(forward(plain), residual_dense  ? "rmsnorm.fwd.flat.dense"
                                  : residual_flat ? "rmsnorm.fwd.flat"
                                                  : rule)
            << rows << " x " << dim << " " << DType_Name(w) << " residual";
      }
    }
  }
  // Table .61, with the fused residual (fwd.flat.wide up to 2048 rows
  // before, at H = 4104..6144 and 6152..8184): the dense program below 448
  // rows at H = 4104..5120 and for 256..447 rows at 6656..7680, fwd.flat
  // for 448..575 rows at 4104..5120.
  for (int64_t dim : {4104, 4600, 5120, 5128, 6144, 6648, 6656, 7168, 7680, 7688}) {
    for (int64_t rows : {1, 255, 256, 447, 448, 575, 576, 2048}) {
      for (DType w : {BF16, FP32}) {
        StepSpec with_residual = RowsSpec(rows, dim);
        with_residual.set_weight_dtype(w);
        with_residual.set_residual(true);
        const bool low = dim >= 4104 && dim <= 5120;
        const bool high = dim >= 6656 && dim <= 7680;
        const char* want = "rmsnorm.fwd.flat.wide";
        if ((low && rows <= 447) || (high && rows >= 256 && rows <= 447)) {
          want = "rmsnorm.fwd.flat.dense";
        } else if (low && rows >= 448 && rows <= 575) {
          want = "rmsnorm.fwd.flat";
        }
        EXPECT_EQ(forward(with_residual), want) << rows << " x " << dim << " " << DType_Name(w);
      }
    }
  }
  // Table .52: the dense program on plain rows without the residual at
  // H = 136..224 from 16897 rows (12673..16896 at 136..256 in any form since
  // table .13) and 264..448 from 16384; table .53: on the contiguous views
  // too. fwd.flat elsewhere up to H = 512, on the strided views and with the
  // residual.
  for (int64_t dim : {128, 136, 224, 232, 256, 264, 448, 456, 512}) {
    for (int64_t rows : {12672, 12673, 16383, 16384, 16896, 16897, 1 << 20}) {
      const bool narrow = dim >= 136 && dim <= 224 && rows >= 16897;
      const bool wider = dim >= 264 && dim <= 448 && rows >= 16384;
      const bool any_form = dim >= 136 && dim <= 256 && rows >= 12673 && rows <= 16896;
      StepSpec plain = RowsSpec(rows, dim);
      EXPECT_EQ(forward(plain),
                narrow || wider || any_form ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.flat")
          << rows << " x " << dim;
      plain.set_residual(true);
      EXPECT_EQ(forward(plain), any_form ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.flat")
          << rows << " x " << dim << " residual";
      if (rows % 4 == 0) {
        const StepSpec contiguous = HeadsSpec(rows / 4, 4, dim);
        EXPECT_EQ(forward(contiguous),
                  narrow || wider || any_form ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.flat")
            << rows << " x " << dim << " contiguous";
        const StepSpec strided = HeadsSpec(rows / 4, 4, dim, 8 * dim, dim);
        EXPECT_EQ(forward(strided), any_form ? "rmsnorm.fwd.flat.dense" : "rmsnorm.fwd.flat")
            << rows << " x " << dim << " strided";
      }
    }
  }
  StepSpec residual = RowsSpec(131072, 6144);
  residual.set_residual(true);
  EXPECT_EQ(forward(residual), "rmsnorm.fwd.loop");
  residual.mutable_layout()->set_dim(3072);
  EXPECT_EQ(forward(residual), "rmsnorm.fwd.loop");
  residual.mutable_layout()->set_dim(2048);
  EXPECT_EQ(forward(residual), "rmsnorm.fwd.flat");
  StepSpec gate = HeadsSpec(16384, 48, 128);
  gate.set_op(RMSNORM_SILU_GATE);
  EXPECT_EQ(forward(gate), "rmsnorm_silu_gate.fwd.flat");
  // Table .42: the gated forward at D = 520..768, where fwd.flat holds one
  // row a CTA: warp from 131072 rows (and at D = 520..536 from 8192), the
  // 64-thread groups from 16384 rows at 544..640 and 65536 at 648..768.
  struct GateForward {
    int64_t rows, dim;
    const char* program;
  } gate_forwards[] = {
      {8191, 520, "rmsnorm_silu_gate.fwd.flat"},
      {8192, 520, "rmsnorm_silu_gate.fwd.warp"},
      {65536, 536, "rmsnorm_silu_gate.fwd.warp"},
      {16383, 544, "rmsnorm_silu_gate.fwd.flat"},
      {16384, 544, "rmsnorm_silu_gate.fwd.flat.groups"},
      {131072, 552, "rmsnorm_silu_gate.fwd.warp"},
      {131071, 640, "rmsnorm_silu_gate.fwd.flat.groups"},
      {131072, 640, "rmsnorm_silu_gate.fwd.warp"},
      {65535, 648, "rmsnorm_silu_gate.fwd.flat"},
      {65536, 648, "rmsnorm_silu_gate.fwd.flat.groups"},
      {131072, 768, "rmsnorm_silu_gate.fwd.warp"},
      {131072, 776, "rmsnorm_silu_gate.fwd.flat"},
      // Table .49: the dense CTA-wide rows at D = 7168..16384, and at
      // 4608..7160 from 16384 rows.
      {65536, 4600, "rmsnorm_silu_gate.fwd.flat"},
      {16383, 4608, "rmsnorm_silu_gate.fwd.flat"},
      {16384, 4608, "rmsnorm_silu_gate.fwd.flat.dense"},
      {16384, 7160, "rmsnorm_silu_gate.fwd.flat.dense"},
      {16383, 7160, "rmsnorm_silu_gate.fwd.flat"},
      {1, 7168, "rmsnorm_silu_gate.fwd.flat.dense"},
      {1024, 16384, "rmsnorm_silu_gate.fwd.flat.dense"},
  };
  for (const GateForward& g : gate_forwards) {
    StepSpec spec = RowsSpec(g.rows, g.dim);
    spec.set_op(RMSNORM_SILU_GATE);
    EXPECT_EQ(forward(spec), g.program) << g.rows << " x " << g.dim;
  }
  EXPECT_EQ(RoutingTableFor("sm_42").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(RoutingTableFor("sm_42").status().message()),
              HasSubstr("arch = \"sm_42\": no routing table"));
}

// Every window of the embedded table routes some spec: one that an earlier
// window covers wholly, or whose program cannot run any spec it matches, is
// dead weight that a table edit left behind. Tried at each window's edges and
// middle (dims on the 8-element grid), with the weight, mode, residual and
// heads form it asks for (a view of two heads a token).
TEST(RoutingTableTest, EveryEmbeddedWindowRoutesSomeSpec) {
  absl::StatusOr<const RoutingTable*> t = RoutingTableFor("sm_90a");
  ASSERT_TRUE(t.ok()) << t.status();
  const RoutingTable& table = **t;
  auto points = [](int64_t lo, int64_t hi, int64_t open_top, int64_t step) {
    const int64_t top = hi == 0 ? open_top : hi;
    const int64_t first = (std::max<int64_t>(lo, step) + step - 1) / step * step;
    const int64_t last = top / step * step;
    const int64_t mid = (first + last) / 2 / step * step;
    return std::vector<int64_t>{first, mid, last};
  };
  for (int i = 0; i < table.windows_size(); ++i) {
    const Window& w = table.windows(i);
    const std::string tag = absl::StrCat("/", table.version(), "[", i, "] ");
    bool routed = false;
    for (int64_t dim : points(w.dim_min(), w.dim_max(), 16384, 8)) {
      for (int64_t rows : points(w.rows_min(), w.rows_max(), 262144, 1)) {
        if (routed || dim < 8 || dim > 16384 || rows < 1) continue;
        StepSpec spec = RowsSpec(rows, dim, w.mode() != MODE_NONDETERMINISTIC);
        if (w.heads_form() == HEADS_FORM_CONTIGUOUS || w.heads_form() == HEADS_FORM_STRIDED) {
          if (rows % 2 != 0) continue;
          const bool strided = w.heads_form() == HEADS_FORM_STRIDED;
          spec = HeadsSpec(rows / 2, 2, dim, strided ? 3 * dim : 0, strided ? dim : 0);
          spec.set_deterministic(w.mode() != MODE_NONDETERMINISTIC);
        }
        spec.set_op(w.op());
        if (w.weight_dtype() != DTYPE_UNSPECIFIED) spec.set_weight_dtype(w.weight_dtype());
        spec.set_residual(w.residual() == RESIDUAL_WITH || w.residual() == RESIDUAL_WITH_GRAD_IN);
        spec.set_residual_grad_in(w.residual() == RESIDUAL_WITH_GRAD_IN);
        absl::StatusOr<StepSpec> canonical = Canonicalize(spec);
        if (!canonical.ok()) continue;
        absl::StatusOr<Route> r = RouteLaunch(table, *canonical, w.phase_kind());
        routed = r.ok() && absl::StrContains(r->reason, tag);
      }
    }
    EXPECT_TRUE(routed) << "window " << i << " routes none of the specs tried: " << DescribeWindow(w);
  }
}

}  // namespace
}  // namespace cake
