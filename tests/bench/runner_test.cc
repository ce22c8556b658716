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

}  // namespace
}  // namespace cake::bench
