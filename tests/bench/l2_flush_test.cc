// The L2 scrub of the benchmark's flush (bench/l2_flush.h): what it leaves
// written and what it refuses; the copy kernel likewise. That the scrub
// evicts lines kept with the evict-last policy is measured with ncu on the
// GPU machine (bench/results), not here.
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

class CopyKernelGpuTest : public testing::GpuTest {};

// The same-bytes copy of the benchmark (BenchRow.same_bytes_copy_us): every
// byte of a size that leaves the last CTA partial, nothing past it; sizes
// and addresses off 16 bytes refused.
TEST_F(CopyKernelGpuTest, CopiesTheBytesOnly) {
  constexpr int64_t kBytes = (int64_t{3} << 20) + 48;
  constexpr int64_t kGuard = 4096;
  unsigned char *src = nullptr, *dst = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&src), kBytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dst), kBytes + kGuard));
  std::vector<unsigned char> h(kBytes + kGuard);
  for (int64_t i = 0; i < kBytes; ++i) h[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
  CUDA_OK(cudaMemcpy(src, h.data(), kBytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dst, 0x11, kBytes + kGuard));
  CUDA_OK(LaunchCopyKernel(dst, src, kBytes, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned char> out(kBytes + kGuard);
  CUDA_OK(cudaMemcpy(out.data(), dst, out.size(), cudaMemcpyDeviceToHost));
  int64_t wrong = 0, guard = 0;
  for (int64_t i = 0; i < kBytes; ++i) wrong += out[i] != h[i];
  for (int64_t i = kBytes; i < kBytes + kGuard; ++i) guard += out[i] != 0x11;
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(guard, 0);
  EXPECT_EQ(LaunchCopyKernel(dst, src, kBytes - 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchCopyKernel(dst + 8, src, 1024, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchCopyKernel(dst, src, 0, nullptr), cudaErrorInvalidValue);
  CUDA_OK(cudaFree(src));
  CUDA_OK(cudaFree(dst));
}

}  // namespace
}  // namespace cake::bench
