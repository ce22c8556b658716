// How `cake bench --program` plans a case, on the CPU.
#include "bench/runner.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "ops/target.h"
#include "planner/planner.h"
#include "tests/testing/specs.h"

namespace cake::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Programs(const Plan& plan) {
  std::vector<std::string> ids;
  for (const Launch& l : plan.launches()) ids.push_back(l.program());
  return ids;
}

const TargetDevice& H200() {
  static const TargetDevice d = *TargetDevice::ForArch("sm_90a");
  return d;
}

TEST(PlanCaseTest, WithoutProgramItIsTheRoutedPlan) {
  const BenchCase c{"[65536, 2048] bf16w", "bwd", testing::RowsSpec(65536, 2048, false, {BACKWARD}), ""};
  const absl::StatusOr<Plan> plan = PlanCase(c, H200());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->fingerprint(), MakePlan(c.spec, H200())->fingerprint());
}

// kb where the table routes det.partials (non-deterministic, D 520..4096):
// the planner adds its zeroed accumulator and dw.finish.
TEST(PlanCaseTest, ABackwardOfAnotherDwFormBringsItsOwnCompanions) {
  const StepSpec spec = testing::RowsSpec(65536, 2048, false, {BACKWARD});
  EXPECT_THAT(Programs(*MakePlan(spec, H200())), ElementsAre("rmsnorm.bwd.det.partials", "dw.reduce"));
  const absl::StatusOr<Plan> plan = PlanCase({"s", "bwd", spec, "rmsnorm.bwd.kb"}, H200());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Programs(*plan), ElementsAre("memset", "rmsnorm.bwd.kb", "dw.finish"));
  EXPECT_THAT(plan->routing_table_version(), HasSubstr("+rmsnorm.bwd.kb"));
  EXPECT_NE(plan->fingerprint(), MakePlan(spec, H200())->fingerprint());
  // And back: det.partials where kb is routed.
  const StepSpec narrow = testing::RowsSpec(65536, 512, false, {BACKWARD});
  EXPECT_THAT(Programs(*MakePlan(narrow, H200())), ElementsAre("memset", "rmsnorm.bwd.kb", "dw.finish"));
  const absl::StatusOr<Plan> det = PlanCase({"s", "bwd", narrow, "rmsnorm.bwd.det.partials"}, H200());
  ASSERT_TRUE(det.ok()) << det.status();
  EXPECT_THAT(Programs(*det), ElementsAre("rmsnorm.bwd.det.partials", "dw.reduce"));
}

TEST(PlanCaseTest, AForwardReplacesBothForwardPhases) {
  const StepSpec spec = testing::RowsSpec(65536, 4096, true);
  const absl::StatusOr<Plan> plan = PlanCase({"s", "ckpt", spec, "rmsnorm.fwd.flat"}, H200());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Programs(*plan), ElementsAre("rmsnorm.fwd.flat", "rmsnorm.fwd.flat",
                                           "rmsnorm.bwd.det.partials", "dw.reduce"));
  // Where a recompute window routes the recompute to another program
  // (table .60: the gated D = 640..768 from 1025 rows), the forced one
  // replaces it too.
  StepSpec gate = testing::RowsSpec(4096, 768, true);
  gate.set_op(RMSNORM_SILU_GATE);
  EXPECT_THAT(Programs(*MakePlan(gate, H200())),
              ElementsAre("rmsnorm_silu_gate.fwd.flat", "rmsnorm_silu_gate.fwd.flat.groups",
                          "rmsnorm_silu_gate.bwd.det.partials", "dw.reduce"));
  const absl::StatusOr<Plan> forced = PlanCase({"g", "ckpt", gate, "rmsnorm_silu_gate.fwd.flat"}, H200());
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_THAT(Programs(*forced),
              ElementsAre("rmsnorm_silu_gate.fwd.flat", "rmsnorm_silu_gate.fwd.flat",
                          "rmsnorm_silu_gate.bwd.det.partials", "dw.reduce"));
}

// recompute:ID runs ID in the recompute alone, the forward as routed: the
// candidate of a recompute window.
TEST(PlanCaseTest, ARecomputeOnlyProgramLeavesTheForwardRouted) {
  const StepSpec spec = testing::RowsSpec(65536, 4096, true);
  const absl::StatusOr<Plan> plan =
      PlanCase({"s", "ckpt", spec, "recompute:rmsnorm.fwd.flat"}, H200());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Programs(*plan), ElementsAre("rmsnorm.fwd.loop", "rmsnorm.fwd.flat",
                                           "rmsnorm.bwd.det.partials", "dw.reduce"));
  EXPECT_EQ(plan->launches(1).phase(), RECOMPUTE);
  EXPECT_THAT(plan->routing_table_version(), HasSubstr("+recompute:rmsnorm.fwd.flat"));
  EXPECT_EQ(RowOp({"s", "ckpt", spec, "recompute:rmsnorm.fwd.flat"}),
            "ckpt @recompute:rmsnorm.fwd.flat");
  // A spec without a recompute, and a backward program, are refused.
  const StepSpec forward_only = testing::RowsSpec(65536, 4096, true, {FORWARD});
  absl::Status s =
      PlanCase({"s", "fwd", forward_only, "recompute:rmsnorm.fwd.flat"}, H200()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("the spec has no RECOMPUTE phase"));
  s = PlanCase({"s", "ckpt", spec, "recompute:rmsnorm.bwd.split"}, H200()).status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("\"recompute:rmsnorm.bwd.split\": a backward program; pick a forward for "
                        "the recompute"));
  s = PlanCase({"s", "ckpt", spec, "recompute:nope"}, H200()).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"recompute:nope\": no such program"));
}

TEST(PlanCaseTest, ProgramsThatCannotRunAreRefusedByName) {
  const StepSpec det = testing::RowsSpec(65536, 2048, true, {BACKWARD});
  absl::Status s = PlanCase({"s", "bwd", det, "rmsnorm.bwd.kb"}, H200()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rmsnorm.bwd.kb is not deterministic"));
  s = PlanCase({"s", "bwd", det, "dw.reduce"}, H200()).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("--program \"dw.reduce\": a reduce program"));
  s = PlanCase({"s", "bwd", det, "rmsnorm.bwd.nope"}, H200()).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("no such program"));
  s = PlanCase({"s", "bwd", det, "rmsnorm_silu_gate.bwd.det.partials"}, H200()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// The line of a row in the table: its same-bytes copy time where timed, "-"
// where not (a report of bench/peers.py).
TEST(FormatTableTest, RowsShowTheCopyOfTheirBytes) {
  BenchReport report;
  BenchRow* timed = report.add_rows();
  timed->set_shape("[1024, 1536] bf16w");
  timed->set_op("fwd");
  timed->set_cake_us(3.4);
  timed->set_same_bytes_copy_us(2.75);
  BenchRow* untimed = report.add_rows();
  untimed->set_shape("[4096, 1536] bf16w");
  untimed->set_op("fwd");
  untimed->set_cake_us(7.6);
  const std::vector<std::string> lines = absl::StrSplit(FormatTable(report), '\n');
  ASSERT_GE(lines.size(), 6u);
  EXPECT_THAT(lines[3], HasSubstr(" copy us "));
  EXPECT_THAT(lines[4], ::testing::StartsWith("[1024, 1536] bf16w"));
  EXPECT_THAT(lines[4], ::testing::ContainsRegex("0\\.000 +2\\.8 *$"));
  EXPECT_THAT(lines[5], ::testing::ContainsRegex("0\\.000 +- *$"));
}

void AddRow(BenchReport& report, const std::string& shape, const std::string& op, double us,
            double aa_floor = 0.005) {
  BenchRow* row = report.add_rows();
  row->set_shape(shape);
  row->set_op(op);
  row->set_cake_us(us);
  row->set_aa_floor(aa_floor);
}

// A forced program's op ("fwd @rmsnorm.fwd.flat.dense") widens the op
// column, so that every row's time stands under "cake us".
TEST(FormatTableTest, ForcedProgramsKeepTheColumns) {
  BenchReport report;
  AddRow(report, "[4096, 2048] bf16w", "fwd", 9.8);
  AddRow(report, "[4096, 2048] bf16w", "fwd @rmsnorm.fwd.flat.dense", 12.3);
  const std::vector<std::string> lines = absl::StrSplit(FormatTable(report), '\n');
  ASSERT_GE(lines.size(), 6u);
  const size_t end = lines[3].find("cake us") + std::string("cake us").size();
  ASSERT_NE(lines[3].find("cake us"), std::string::npos);
  EXPECT_EQ(lines[4].substr(end - 3, 3), "9.8") << lines[4];
  EXPECT_EQ(lines[5].substr(end - 4, 4), "12.3") << lines[5];
}

// `--program routed,...`: per shape and op, the routed time against the
// fastest entry, marked only where the routed one is more than 2% slower and
// slower by more than either row's A/A floor; shapes timed one way only have
// no line.
TEST(FormatCandidatesTest, RoutedAgainstTheFastestEntry) {
  BenchReport report;
  AddRow(report, "[4096, 2560] residual", "bwd", 38.10);
  AddRow(report, "[4096, 2560] residual", "bwd @rmsnorm.bwd.det.partials", 33.91);
  AddRow(report, "[4096, 2560] residual", "bwd @rmsnorm.bwd.split", 38.05);
  AddRow(report, "[16384, 2048] bf16w", "bwd", 80.29);
  AddRow(report, "[16384, 2048] bf16w", "bwd @rmsnorm.bwd.det.lockstep", 80.00);
  AddRow(report, "[16384, 2048] bf16w", "fwd", 64.70);
  AddRow(report, "[1024, 64] bf16w", "fwd @rmsnorm.fwd.flat", 2.0);
  AddRow(report, "[1024, 64] bf16w", "fwd @rmsnorm.fwd.warp", 2.5);
  // 5% slower, but within the forced row's A/A floor of 6%: noise.
  AddRow(report, "[4096, 2048] bf16w", "fwd", 10.5);
  AddRow(report, "[4096, 2048] bf16w", "fwd @rmsnorm.fwd.flat.dense", 10.0, 0.06);
  const std::vector<std::string> lines = absl::StrSplit(FormatCandidates(report), '\n');
  ASSERT_EQ(lines.size(), 6u);  // a title, a header, three shapes and the last newline
  EXPECT_THAT(lines[0], HasSubstr("more than 2% slower"));
  EXPECT_THAT(lines[2], ::testing::StartsWith("[4096, 2560] residual"));
  EXPECT_THAT(lines[2], ::testing::ContainsRegex(
                            "38\\.10 +rmsnorm\\.bwd\\.det\\.partials +33\\.91 +1\\.124  <--$"));
  EXPECT_THAT(lines[3], ::testing::StartsWith("[16384, 2048] bf16w"));
  EXPECT_THAT(lines[3], ::testing::EndsWith(" 1.004"));
  EXPECT_THAT(lines[4], ::testing::StartsWith("[4096, 2048] bf16w"));
  EXPECT_THAT(lines[4], ::testing::EndsWith(" 1.050"));
  EXPECT_EQ(lines[5], "");
  BenchReport routed_only;
  AddRow(routed_only, "[16384, 2048] bf16w", "bwd", 80.29);
  AddRow(routed_only, "[16384, 2048] bf16w", "fwd", 64.70);
  EXPECT_EQ(FormatCandidates(routed_only), "");
}

}  // namespace
}  // namespace cake::bench
