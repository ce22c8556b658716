// The L2 scrub of the benchmark's flush (bench/l2_flush.h): what it leaves
// written and what it refuses. That it evicts lines kept with the evict-last policy is
// measured with ncu on the GPU machine (bench/results), not here.
#include "bench/l2_flush.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/gpu_test.h"

namespace cake::bench {
namespace {

// Refused before anything is launched, so no device is needed.
TEST(L2ScrubTest, RefusesPartLinesAndMisalignedBuffers) {
  void* aligned = reinterpret_cast<void*>(uintptr_t{1} << 20);
  void* misaligned = reinterpret_cast<void*>((uintptr_t{1} << 20) + 64);
  EXPECT_EQ(LaunchL2Scrub(aligned, (1 << 20) + 16, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchL2Scrub(misaligned, 1 << 20, 1, nullptr), cudaErrorInvalidValue);
}

class L2ScrubGpuTest : public testing::GpuTest {};

// The flush of the benchmark: the scrub (which leaves the buffer's contents
// undefined), then the fill kernel's value over the whole buffer; neither
// touches a byte past it.
TEST_F(L2ScrubGpuTest, ScrubThenFillWritesTheBufferOnly) {
  constexpr int64_t kBytes = int64_t{3} << 20;
  constexpr int64_t kGuard = 4096;
  unsigned char* d = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&d), kBytes + kGuard));
  CUDA_OK(cudaMemset(d, 0x11, kBytes + kGuard));
  std::vector<unsigned char> h(kBytes + kGuard);
  for (const uint32_t value : {0x5a5a5a5au, 0xc3c3c3c3u}) {
    CUDA_OK(LaunchL2Scrub(d, kBytes, value, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h.data() + kBytes, d + kBytes, kGuard, cudaMemcpyDeviceToHost));
    int64_t guard = 0;
    for (int64_t i = kBytes; i < kBytes + kGuard; ++i) guard += h[i] != 0x11;
    EXPECT_EQ(guard, 0) << "after the scrub, " << std::hex << value;
    CUDA_OK(LaunchFillKernel(d, kBytes, value, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h.data(), d, h.size(), cudaMemcpyDeviceToHost));
    int64_t wrong = 0;
    guard = 0;
    for (int64_t i = 0; i < kBytes; ++i) wrong += h[i] != (value & 0xff);
    for (int64_t i = kBytes; i < kBytes + kGuard; ++i) guard += h[i] != 0x11;
    EXPECT_EQ(wrong, 0) << std::hex << value;
    EXPECT_EQ(guard, 0) << "after the fill, " << std::hex << value;
  }
  CUDA_OK(cudaFree(d));
}

}  // namespace
}  // namespace cake::bench
