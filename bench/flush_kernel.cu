#include <cuda_runtime.h>

#include <cstdint>

#include "bench/l2_flush.h"

namespace cake::bench {
namespace {

constexpr int kFlushBlock = 256;
constexpr int64_t kLineBytes = 128;

// Plain 16-byte stores over the buffer, grid-stride: the way a framework's
// fill kernel writes it (PyTorch's `fill_`), as opposed to cudaMemsetAsync.
__global__ void __launch_bounds__(kFlushBlock) FillWords(uint4* p, int64_t n, uint32_t value) {
  const uint4 v = make_uint4(value, value, value, value);
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = v;
  }
}

// The same stores with the L2 evict-last policy.
__global__ void __launch_bounds__(kFlushBlock) ClaimLines(uint4* p, int64_t n, uint32_t value) {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %1, %1, %1}, %2;" ::"l"(p + i),
                 "r"(value), "l"(policy)
                 : "memory");
  }
}

// Drops each 128-byte line of the buffer from L2 without writing it back
// (its contents become undefined).
__global__ void __launch_bounds__(kFlushBlock) DiscardLines(char* p, int64_t lines) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < lines;
       i += int64_t{gridDim.x} * blockDim.x) {
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(p + i * kLineBytes) : "memory");
  }
}

// LaunchCopyKernel: a CTA's kCopyVecs vectors per thread, block-strided
// (each load instruction of a warp covers 512 contiguous bytes).
constexpr int kCopyVecs = 4;
__global__ void __launch_bounds__(kFlushBlock) CopyWords(uint4* dst, const uint4* src, int64_t n) {
  const int64_t base = int64_t{blockIdx.x} * kFlushBlock * kCopyVecs + threadIdx.x;
  uint4 v[kCopyVecs];
#pragma unroll
  for (int k = 0; k < kCopyVecs; ++k) {
    const int64_t i = base + int64_t{k} * kFlushBlock;
    if (i < n) v[k] = src[i];
  }
#pragma unroll
  for (int k = 0; k < kCopyVecs; ++k) {
    const int64_t i = base + int64_t{k} * kFlushBlock;
    if (i < n) dst[i] = v[k];
  }
}

int FlushGrid() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms * 8;
}

}  // namespace

cudaError_t LaunchFillKernel(void* buffer, int64_t bytes, uint32_t value, cudaStream_t stream) {
  FillWords<<<FlushGrid(), kFlushBlock, 0, stream>>>(static_cast<uint4*>(buffer), bytes / 16,
                                                      value);
  return cudaGetLastError();
}

cudaError_t LaunchL2Scrub(void* buffer, int64_t bytes, uint32_t value, cudaStream_t stream) {
  if (bytes % kLineBytes != 0 || reinterpret_cast<uintptr_t>(buffer) % kLineBytes != 0) {
    return cudaErrorInvalidValue;
  }
  const int grid = FlushGrid();
  ClaimLines<<<grid, kFlushBlock, 0, stream>>>(static_cast<uint4*>(buffer), bytes / 16, value);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  DiscardLines<<<grid, kFlushBlock, 0, stream>>>(static_cast<char*>(buffer), bytes / kLineBytes);
  return cudaGetLastError();
}

cudaError_t LaunchCopyKernel(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  if (bytes <= 0 || bytes % 16 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(src) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t n = bytes / 16;
  const int64_t per_cta = int64_t{kFlushBlock} * kCopyVecs;
  const int64_t grid = (n + per_cta - 1) / per_cta;
  if (grid > 0x7fffffff) return cudaErrorInvalidValue;
  CopyWords<<<static_cast<unsigned>(grid), kFlushBlock, 0, stream>>>(
      static_cast<uint4*>(dst), static_cast<const uint4*>(src), n);
  return cudaGetLastError();
}

}  // namespace cake::bench
