#include "planner/validate.h"

#include <functional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::testing::HasSubstr;
using testing::HeadsSpec;
using testing::RowsSpec;

struct BadCase {
  const char* name;
  std::function<void(StepSpec&)> mutate;
  const char* message;  // a substring the error must hold
};

class ValidateBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ValidateBadTest, NamesFieldAndValue) {
  StepSpec spec = RowsSpec(1024, 4096);
  GetParam().mutate(spec);
  const absl::Status s = Validate(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(GetParam().message));
  // Canonicalize refuses with the same message.
  EXPECT_EQ(Canonicalize(spec).status(), s);
}

const BadCase kBadCases[] = {
    {"MissingOp", [](StepSpec& s) { s.clear_op(); },
     "op = OP_UNSPECIFIED: expected RMSNORM or RMSNORM_SILU_GATE"},
    {"UnknownOp", [](StepSpec& s) { s.set_op(static_cast<Op>(9)); }, "op = 9: expected"},
    {"MissingLayout", [](StepSpec& s) { s.clear_layout(); }, "layout: missing"},
    {"NegativeTokens", [](StepSpec& s) { s.mutable_layout()->set_tokens(-1); },
     "layout.tokens = -1: must be >= 0"},
    {"NegativeHeads", [](StepSpec& s) { s.mutable_layout()->set_heads(-2); },
     "layout.heads = -2: must be >= 0"},
    {"DimNotMultipleOf8", [](StepSpec& s) { s.mutable_layout()->set_dim(300); },
     "layout.dim = 300: must be a multiple of 8 (16-byte vector loads)"},
    {"DimZero", [](StepSpec& s) { s.mutable_layout()->set_dim(0); }, "layout.dim = 0: must be"},
    {"DimAboveMax", [](StepSpec& s) { s.mutable_layout()->set_dim(16392); },
     "layout.dim = 16392: must be a multiple of 8 (16-byte vector loads) from 8 to 16384"},
    {"TooManyRows",
     [](StepSpec& s) {
       s.mutable_layout()->set_tokens(int64_t{1} << 30);
       s.mutable_layout()->set_heads(4);
     },
     "layout.tokens = 1073741824: tokens * heads"},
    {"HeadStrideMisaligned",
     [](StepSpec& s) {
       s = HeadsSpec(16, 4, 256, 0, 260);
     },
     "layout.head_stride = 260: must be >= 0 and a multiple of 8"},
    {"HeadsOverlap", [](StepSpec& s) { s = HeadsSpec(16, 4, 256, 0, 128); },
     "layout.head_stride = 128: heads overlap; must be >= layout.dim (256)"},
    {"TokensOverlap", [](StepSpec& s) { s = HeadsSpec(16, 24, 256, 4096, 256); },
     "layout.token_stride = 4096: tokens overlap; must be >= 6144"},
    {"RowStrideBelowDim", [](StepSpec& s) { s.mutable_layout()->set_token_stride(2048); },
     "layout.token_stride = 2048: tokens overlap; must be >= 4096"},
    {"TokenStrideMisaligned", [](StepSpec& s) { s.mutable_layout()->set_token_stride(4100); },
     "layout.token_stride = 4100: must be >= 0 and a multiple of 8"},
    {"TokenStrideHuge", [](StepSpec& s) { s.mutable_layout()->set_token_stride(int64_t{1} << 50); },
     "layout.token_stride = 1125899906842624: must be <="},
    {"WeightDtypeUnknown", [](StepSpec& s) { s.set_weight_dtype(static_cast<DType>(7)); },
     "weight_dtype = 7: expected BF16 or FP32"},
    {"DwDtypeOther",
     [](StepSpec& s) {
       s.set_weight_dtype(FP32);
       s.set_dw_dtype(BF16);
     },
     "dw_dtype = BF16: expected FP32 or the weight dtype (FP32)"},
    {"ResidualWithHeads",
     [](StepSpec& s) {
       s = HeadsSpec(16, 4, 256);
       s.set_residual(true);
     },
     "residual = true: not supported with per-head views (layout.heads = 4)"},
    {"ResidualOnGate",
     [](StepSpec& s) {
       s.set_op(RMSNORM_SILU_GATE);
       s.set_residual(true);
     },
     "residual = true: the fused residual add is an RMSNORM form"},
    {"ResidualGradWithoutResidual", [](StepSpec& s) { s.set_residual_grad_in(true); },
     "residual_grad_in = true: needs residual = true"},
    {"EpsZero", [](StepSpec& s) { s.set_eps(0); }, "eps = 0: must be finite and > 0"},
    {"EpsNegative", [](StepSpec& s) { s.set_eps(-1e-5); }, "eps = -1e-05: must be finite"},
    {"EpsNan", [](StepSpec& s) { s.set_eps(std::nan("")); }, "eps = nan: must be finite"},
    {"AccumulateBf16",
     [](StepSpec& s) {
       s.set_dw_dtype(BF16);
       s.set_accumulate_dw(true);
     },
     "accumulate_dw = true: needs dw_dtype FP32, not BF16"},
    {"AccumulateWithoutBackward",
     [](StepSpec& s) {
       s.clear_phases();
       s.add_phases(FORWARD);
       s.set_accumulate_dw(true);
     },
     "accumulate_dw = true: needs the BACKWARD phase"},
    {"NoPhases", [](StepSpec& s) { s.clear_phases(); }, "phases: empty"},
    {"UnspecifiedPhase", [](StepSpec& s) { s.set_phases(1, PHASE_UNSPECIFIED); },
     "phases[1] = PHASE_UNSPECIFIED: expected FORWARD, RECOMPUTE or BACKWARD"},
    {"UnknownPhase", [](StepSpec& s) { s.set_phases(0, static_cast<Phase>(12)); },
     "phases[0] = 12: expected"},
    {"PhaseRepeated", [](StepSpec& s) { s.set_phases(1, FORWARD); },
     "phases[1] = FORWARD: phases must be listed in the order FORWARD, RECOMPUTE, BACKWARD"},
    {"PhasesOutOfOrder",
     [](StepSpec& s) {
       s.clear_phases();
       s.add_phases(BACKWARD);
       s.add_phases(FORWARD);
     },
     "phases[1] = FORWARD: phases must be listed in the order"},
};

INSTANTIATE_TEST_SUITE_P(Fields, ValidateBadTest, ::testing::ValuesIn(kBadCases),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(ValidateTest, AcceptsEveryForm) {
  EXPECT_TRUE(Validate(RowsSpec(65536, 4096)).ok());
  EXPECT_TRUE(Validate(RowsSpec(0, 64)).ok()) << "T = 0 is valid";
  EXPECT_TRUE(Validate(HeadsSpec(4096, 24, 256, 8192, 256)).ok());
  EXPECT_TRUE(Validate(HeadsSpec(4096, 4, 256)).ok());
  StepSpec residual = RowsSpec(16, 6144);
  residual.set_residual(true);
  residual.set_residual_grad_in(true);
  EXPECT_TRUE(Validate(residual).ok());
  StepSpec one_phase = RowsSpec(16, 64, true, {RECOMPUTE});
  EXPECT_TRUE(Validate(one_phase).ok());
  StepSpec gate = HeadsSpec(8192, 32, 128);
  gate.set_op(RMSNORM_SILU_GATE);
  gate.set_weight_dtype(FP32);
  gate.set_dw_dtype(FP32);
  EXPECT_TRUE(Validate(gate).ok());
}

TEST(CanonicalizeTest, FillsDefaults) {
  absl::StatusOr<StepSpec> c = Canonicalize(RowsSpec(8, 4096));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layout().heads(), 1);
  EXPECT_EQ(c->layout().head_stride(), 4096);
  EXPECT_EQ(c->layout().token_stride(), 4096);
  EXPECT_EQ(c->weight_dtype(), BF16);
  EXPECT_EQ(c->dw_dtype(), FP32);
  ASSERT_TRUE(c->has_eps());
  EXPECT_EQ(c->eps(), kDefaultEps);

  absl::StatusOr<StepSpec> h = Canonicalize(HeadsSpec(8, 4, 256));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->layout().head_stride(), 256);
  EXPECT_EQ(h->layout().token_stride(), 1024);
}

TEST(CanonicalizeTest, EqualStepsCanonicalizeEqual) {
  StepSpec implicit = HeadsSpec(8, 4, 256);
  StepSpec explicit_strides = HeadsSpec(8, 4, 256, 1024, 256);
  explicit_strides.set_eps(1e-6);
  explicit_strides.set_weight_dtype(BF16);
  EXPECT_EQ(Canonicalize(implicit)->SerializeAsString(),
            Canonicalize(explicit_strides)->SerializeAsString());
}

}  // namespace
}  // namespace cake
