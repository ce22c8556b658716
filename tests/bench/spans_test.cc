// The parts of a CUPTI span (bench/cupti_spans.h): every kernel and memset of
// the work, in start order, named, and ending where the span ends.
#include "bench/cupti_spans.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "bench/l2_flush.h"
#include "tests/testing/gpu_test.h"

namespace cake::bench {
namespace {

class CuptiSpansGpuTest : public testing::GpuTest {};

TEST_F(CuptiSpansGpuTest, PartsAreTheWorkInStartOrder) {
  std::string why;
  CuptiSpans* spans = CuptiSpans::Open(&why);
  if (spans == nullptr) GTEST_SKIP() << why;
  constexpr int64_t kBytes = int64_t{8} << 20;
  void* d = nullptr;
  CUDA_OK(cudaMalloc(&d, kBytes));
  CUDA_OK(cudaDeviceSynchronize());
  spans->Begin();
  CUDA_OK(cudaMemsetAsync(d, 0, kBytes, nullptr));
  CUDA_OK(LaunchFillKernel(d, kBytes, 0x01010101u, nullptr));
  CUDA_OK(LaunchFillKernel(d, kBytes, 0x02020202u, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  GpuSpan span;
  ASSERT_TRUE(spans->End(&span, &why)) << why;
  CUDA_OK(cudaFree(d));

  EXPECT_EQ(span.kernels, 2);
  EXPECT_EQ(span.memops, 1);
  ASSERT_EQ(span.parts.size(), 3u);
  EXPECT_EQ(span.parts[0].name, "memset");
  EXPECT_EQ(span.parts[0].start_us, 0.0);
  double last_end = 0;
  for (size_t i = 0; i < span.parts.size(); ++i) {
    const SpanPart& p = span.parts[i];
    if (i > 0) {
      EXPECT_GE(p.start_us, span.parts[i - 1].start_us) << i;
      // Demangled: the source's name, not the symbol.
      EXPECT_NE(p.name.find("FillWords"), std::string::npos) << p.name;
      EXPECT_NE(p.name.rfind("_Z", 0), 0u) << p.name;
    }
    EXPECT_GT(p.us, 0.0) << i;
    last_end = std::max(last_end, p.start_us + p.us);
  }
  EXPECT_NEAR(last_end, span.us, 1e-6);
}

}  // namespace
}  // namespace cake::bench
