#include "planner/plan_io.h"

#include <cstdio>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/util/message_differencer.h"
#include "planner/planner.h"
#include "planner/text_proto.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using testing::RowsSpec;

TargetDevice H200() { return *TargetDevice::ForArch("sm_90a"); }

Plan ExamplePlan() {
  StepSpec spec = RowsSpec(46593, 6144, true);
  spec.set_dw_dtype(BF16);
  spec.set_residual(true);
  spec.set_residual_grad_in(true);
  return *MakePlan(spec, H200());
}

TEST(PlanIoTest, BinaryAndTextRoundTripsAreEqual) {
  const Plan plan = ExamplePlan();
  for (Encoding e : {Encoding::kBinary, Encoding::kText}) {
    absl::StatusOr<std::string> bytes = SerializePlan(plan, e);
    ASSERT_TRUE(bytes.ok());
    absl::StatusOr<Plan> back = LoadPlan(*bytes, e, H200());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(plan, *back));
  }
}

TEST(PlanIoTest, FilesByExtension) {
  const Plan plan = ExamplePlan();
  const std::string dir = ::testing::TempDir();
  for (const char* name : {"p.binpb", "p.textproto"}) {
    const std::string path = dir + "/" + name;
    ASSERT_TRUE(SavePlanFile(plan, path).ok());
    absl::StatusOr<Plan> back = LoadPlanFile(path, H200());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(plan, *back));
    std::remove(path.c_str());
  }
  const absl::Status bad_ext = SavePlanFile(plan, dir + "/p.json");
  EXPECT_EQ(bad_ext.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_ext.message()), HasSubstr("p.json\": expected a .binpb"));
  EXPECT_EQ(LoadPlanFile(dir + "/missing.binpb", H200()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(PlanIoTest, FailedSaveLeavesNoFile) {
  const std::string path = "/nonexistent-dir/p.binpb";
  EXPECT_FALSE(SavePlanFile(ExamplePlan(), path).ok());
  EXPECT_FALSE(ReadFile(path).ok());
}

absl::Status LoadEdited(void (*edit)(Plan&)) {
  Plan plan = ExamplePlan();
  edit(plan);
  return LoadPlan(*SerializePlan(plan, Encoding::kBinary), Encoding::kBinary, H200()).status();
}

TEST(PlanIoTest, WrongFormatVersionIsFailedPrecondition) {
  const absl::Status s = LoadEdited([](Plan& p) { p.set_format_version(kPlanFormatVersion + 1); });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("plan format_version = 2: this build reads 1"));
}

TEST(PlanIoTest, OtherArchIsFailedPrecondition) {
  Plan plan = ExamplePlan();
  const std::string bytes = *SerializePlan(plan, Encoding::kBinary);
  const absl::Status s = LoadPlan(bytes, Encoding::kBinary, *TargetDevice::ForArch("sm_100a")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("plan arch = \"sm_90a\": the target device is sm_100a"));
}

TEST(PlanIoTest, UnknownProgramIsInvalidArgument) {
  const absl::Status s = LoadEdited([](Plan& p) { p.mutable_launches(1)->set_program("rmsnorm.fwd.v9"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("plan launches[1].program = \"rmsnorm.fwd.v9\": no such program"));
}

TEST(PlanIoTest, TamperedPlansAreRefused) {
  EXPECT_THAT(std::string(LoadEdited([](Plan& p) { p.mutable_spec()->mutable_layout()->set_tokens(7); })
                              .message()),
              HasSubstr("does not match its spec"));
  EXPECT_THAT(std::string(LoadEdited([](Plan& p) { p.mutable_launches(0)->add_depends_on(3); }).message()),
              HasSubstr("launches[0].depends_on = 3: must name an earlier launch"));
  EXPECT_THAT(std::string(LoadEdited([](Plan& p) { p.mutable_spec()->mutable_layout()->set_dim(12); })
                              .message()),
              HasSubstr("layout.dim = 12"));
  EXPECT_THAT(std::string(LoadEdited([](Plan& p) { p.mutable_launches(2)->set_index(5); }).message()),
              HasSubstr("launches[2].index = 5: expected 2"));
}

TEST(PlanIoTest, GarbageIsInvalidArgument) {
  EXPECT_EQ(LoadPlan("\xff\xff\xff", Encoding::kBinary, H200()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status text = LoadPlan("format_version: 1\nbogus: 2\n", Encoding::kText, H200()).status();
  EXPECT_EQ(text.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.message()), HasSubstr("plan:2:"));
}

TEST(SpecIoTest, ParseErrorsNameLineAndColumn) {
  const absl::StatusOr<StepSpec> s = ParseSpecText("op: RMSNORM\nlayout { dimm: 4 }\n", "s.textproto");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("s.textproto:2:"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("dimm"));
}

}  // namespace
}  // namespace cake
