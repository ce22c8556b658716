#include <cuda_runtime.h>

#include <cstdint>

#include "bench/timing.h"

namespace cake::bench {
namespace {

// Plain 16-byte stores over the buffer, grid-stride: the way a framework's
// fill kernel writes it (PyTorch's `fill_`), as opposed to cudaMemsetAsync.
__global__ void __launch_bounds__(256) FillWords(uint4* p, int64_t n, uint32_t value) {
  const uint4 v = make_uint4(value, value, value, value);
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = v;
  }
}

}  // namespace

cudaError_t LaunchFillKernel(void* buffer, int64_t bytes, uint32_t value, cudaStream_t stream) {
  const int64_t words = bytes / 16;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  FillWords<<<sms * 8, 256, 0, stream>>>(static_cast<uint4*>(buffer), words, value);
  return cudaGetLastError();
}

}  // namespace cake::bench
