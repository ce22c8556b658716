// The benchmark suite of BENCH.md as data: its size, its specs, and the bytes
// each case must move (BENCH.md's formulas, written out by hand here).
#include "bench/suite.h"

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/validate.h"

namespace cake::bench {
namespace {

using ::testing::HasSubstr;

const SuiteShape& ShapeNamed(const std::vector<SuiteShape>& suite, const std::string& name) {
  for (const SuiteShape& s : suite) {
    if (s.shape == name) return s;
  }
  ADD_FAILURE() << "no shape " << name;
  return suite.front();
}

TEST(SuiteTest, DefaultSuiteIsBenchMd) {
  const std::vector<SuiteShape> suite = DefaultSuite();
  // 2 weight dtypes x 5 H x 5 T, 2 views x 3 T, 2 H x 2 T residual, 5 gated.
  EXPECT_EQ(suite.size(), 50u + 6 + 4 + 5);
  std::set<std::string> names;
  size_t cases = 0;
  for (const SuiteShape& s : suite) {
    EXPECT_TRUE(names.insert(s.shape).second) << "two shapes named " << s.shape;
    for (const std::string& op : OpsOf(s)) {
      absl::StatusOr<StepSpec> spec = SpecFor(s, op, /*deterministic=*/true);
      ASSERT_TRUE(spec.ok()) << spec.status();
      EXPECT_TRUE(Canonicalize(*spec).ok()) << s.shape << " " << op;
      ++cases;
    }
  }
  // fwd, bwd, ckpt everywhere; ckpt.cast where the weight is BF16 (all but 25).
  EXPECT_EQ(cases, 65u * 3 + 40);
  const StepSpec strided = ShapeNamed(suite, "[65536, 24, 256] strided").base;
  EXPECT_EQ(strided.layout().token_stride(), 32 * 256);
  EXPECT_EQ(ShapeNamed(suite, "gate 1031x48x128").base.op(), RMSNORM_SILU_GATE);
}

TEST(SuiteTest, SpecForSetsPhasesAndDw) {
  const SuiteShape s = ShapeNamed(DefaultSuite(), "[16384, 4096] residual");
  const StepSpec fwd = *SpecFor(s, "fwd", false);
  EXPECT_THAT(fwd.phases(), ::testing::ElementsAre(FORWARD));
  EXPECT_FALSE(fwd.residual_grad_in()) << "dh_in belongs to the backward";
  const StepSpec ckpt = *SpecFor(s, "ckpt", true);
  EXPECT_THAT(ckpt.phases(), ::testing::ElementsAre(FORWARD, RECOMPUTE, BACKWARD));
  EXPECT_EQ(ckpt.dw_dtype(), FP32);
  EXPECT_TRUE(ckpt.deterministic());
  EXPECT_TRUE(ckpt.residual_grad_in());
  EXPECT_EQ(SpecFor(s, "ckpt.cast", true)->dw_dtype(), BF16);
  const absl::StatusOr<StepSpec> bad = SpecFor(s, "step", true);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("op \"step\""));
}

TEST(SuiteTest, BytesMovedFollowsBenchMd) {
  const std::vector<SuiteShape> suite = DefaultSuite();
  const double T = 65536, H = 4096;
  const SuiteShape& rows = ShapeNamed(suite, "[65536, 4096] bf16w");
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(rows, "fwd", true)), 4 * T * H + 4 * T);
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(rows, "bwd", true)), 6 * T * H + 4 * T + 4 * H);
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(rows, "ckpt", true)),
                   2 * (4 * T * H + 4 * T) + 6 * T * H + 4 * T + 4 * H);
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(rows, "ckpt.cast", true)),
                   2 * (4 * T * H + 4 * T) + 6 * T * H + 4 * T + 2 * H);
  // Gated, T x heads x D rows: forward 6 bytes per element, backward 10.
  const double n = 16384.0 * 48 * 128, r = 16384.0 * 48;
  const SuiteShape& gate = ShapeNamed(suite, "gate 16384x48x128");
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(gate, "fwd", true)), 6 * n + 4 * r);
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(gate, "bwd", true)), 10 * n + 4 * r + 4 * 128);
  // Residual: x and residual read, h and y written; the backward also reads dh_in.
  const SuiteShape& res = ShapeNamed(suite, "[16384, 4096] residual");
  const double m = 16384.0 * 4096;
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(res, "fwd", true)), 8 * m + 4 * 16384);
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(res, "bwd", true)), 8 * m + 4 * 16384 + 4 * 4096);
  // A strided view counts the normalized elements, not the gaps.
  const SuiteShape& view = ShapeNamed(suite, "[4096, 24, 256] strided");
  EXPECT_DOUBLE_EQ(BytesMoved(*SpecFor(view, "fwd", true)),
                   4 * 4096.0 * 24 * 256 + 4 * 4096.0 * 24);
}

}  // namespace
}  // namespace cake::bench
