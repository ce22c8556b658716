// Launches built from a plan without running them (no device needed).
#include "ops/launch.h"

#include <cstdint>
#include <cstring>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/row_kernels.h"
#include "ops/target.h"
#include "planner/planner.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::testing::HasSubstr;

// A MEMSET launch is the zero kernel over the start of its workspace region;
// bytes that are not whole words or run past the region, and a region the
// plan does not have, are refused naming the field, before anything runs.
TEST(LaunchTest, MemsetLaunchIsTheZeroKernelOverItsRegion) {
  absl::StatusOr<Plan> made = MakePlan(testing::RowsSpec(65536, 6144, false),
                                       *TargetDevice::ForArch("sm_90a"));
  ASSERT_TRUE(made.ok()) << made.status();
  Plan plan = *made;
  ASSERT_EQ(plan.launches(2).kind(), MEMSET);
  const WorkspaceRegion& region = plan.workspace(0);
  ASSERT_EQ(region.name(), plan.launches(2).region());
  ASSERT_EQ(region.bytes(), 6144 * 8);
  Bindings b;
  char* const workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  b.workspace = workspace;

  absl::StatusOr<KernelLaunch> k = MakeKernelLaunch(plan, plan.launches(2), b);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->function, ZeroWordsKernel());
  EXPECT_EQ(k->block.x, static_cast<unsigned>(kZeroBlock));
  EXPECT_GE(k->grid.x, 1u);
  ASSERT_EQ(k->params_bytes, sizeof(ZeroParams));
  ZeroParams p;
  std::memcpy(&p, k->params, sizeof p);
  EXPECT_EQ(reinterpret_cast<char*>(p.dst), workspace + region.offset());
  EXPECT_EQ(p.words, 6144 * 8 / 4);

  plan.mutable_launches(2)->set_memset_bytes(6144 * 8 + 4);
  absl::Status s = MakeKernelLaunch(plan, plan.launches(2), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[2].memset_bytes = 49156"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("49152 bytes"));

  plan.mutable_launches(2)->set_memset_bytes(6);
  s = MakeKernelLaunch(plan, plan.launches(2), b).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[2].memset_bytes = 6"));

  plan.mutable_launches(2)->set_memset_bytes(8);
  plan.mutable_launches(2)->set_region("nope");
  s = MakeKernelLaunch(plan, plan.launches(2), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[2].region = \"nope\""));
}

}  // namespace
}  // namespace cake
