// `cake bench`'s engine on the GPU (bench/runner.h): every row gets the time
// of a copy of its bytes alone, once per size.
#include "bench/runner.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/gpu_test.h"
#include "tests/testing/specs.h"

namespace cake::bench {
namespace {

using ::testing::HasSubstr;

class RunBenchGpuTest : public testing::GpuTest {};

TEST_F(RunBenchGpuTest, EachRowHasTheCopyOfItsBytes) {
  // Two rows that move the same bytes and one that moves a quarter of them.
  const std::vector<BenchCase> cases = {
      {"[4096, 1024] a", "fwd", testing::RowsSpec(4096, 1024, true, {FORWARD}), ""},
      {"[4096, 1024] b", "fwd", testing::RowsSpec(4096, 1024, true, {FORWARD}), ""},
      {"[1024, 1024]", "fwd", testing::RowsSpec(1024, 1024, true, {FORWARD}), ""},
  };
  BenchOptions options;
  options.warmup = 1;
  options.rounds = 1;
  options.replays_per_round = 2;
  options.copy_bytes = int64_t{64} << 20;
  const absl::StatusOr<BenchReport> report = RunBench(cases, options, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->rows_size(), 3);
  for (const BenchRow& row : report->rows()) {
    EXPECT_GT(row.cake_us(), 0) << row.shape();
    EXPECT_GT(row.same_bytes_copy_us(), 0) << row.shape();
  }
  EXPECT_EQ(report->rows(0).bytes(), report->rows(1).bytes());
  EXPECT_EQ(report->rows(0).same_bytes_copy_us(), report->rows(1).same_bytes_copy_us())
      << "one copy per size";
  EXPECT_LT(report->rows(2).bytes(), report->rows(0).bytes());
  EXPECT_THAT(FormatTable(*report), HasSubstr("copy us"));
}

}  // namespace
}  // namespace cake::bench
