#include "bench/timing.h"

#include <algorithm>
#include <utility>

#include "ops/status.h"

namespace cake::bench {

absl::StatusOr<ColdL2> ColdL2::Create(FlushMethod method) {
  int device = 0, l2 = 0;
  CAKE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CAKE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  const int64_t bytes = std::max<int64_t>(2 * int64_t{l2}, 64 << 20);
  void* p = nullptr;
  CAKE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
  return ColdL2(p, bytes, method);
}

ColdL2::ColdL2(ColdL2&& other) noexcept
    : buffer_(other.buffer_), bytes_(other.bytes_), method_(other.method_) {
  other.buffer_ = nullptr;
}

ColdL2::~ColdL2() {
  if (buffer_ != nullptr) cudaFree(buffer_);
}

absl::Status ColdL2::Flush(cudaStream_t stream) {
  // A varying byte so the writes are never elided.
  static unsigned char value = 0;
  ++value;
  if (method_ == FlushMethod::kKernel) {
    CAKE_CUDA_RETURN_IF_ERROR(LaunchFillKernel(buffer_, bytes_, value * 0x01010101u, stream));
  } else {
    CAKE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer_, value, bytes_, stream));
  }
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

absl::StatusOr<std::vector<double>> TimeSpans(const std::function<absl::Status(cudaStream_t)>& work,
                                              ColdL2& l2, cudaStream_t stream, int reps,
                                              int warmup) {
  cudaEvent_t start, stop;
  CAKE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  CAKE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<double> spans;
  absl::Status status;
  for (int i = 0; i < warmup + reps && status.ok(); ++i) {
    status = l2.Flush(stream);
    if (!status.ok()) break;
    if (cudaStreamSynchronize(stream) != cudaSuccess) {
      status = absl::InternalError("cudaStreamSynchronize failed before a timed span");
      break;
    }
    cudaEventRecord(start, stream);
    status = work(stream);
    cudaEventRecord(stop, stream);
    if (!status.ok()) break;
    if (cudaEventSynchronize(stop) != cudaSuccess) {
      status = absl::InternalError("timed work failed on the device");
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= warmup) spans.push_back(1000.0 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.ok()) return status;
  return spans;
}

absl::StatusOr<double> CopyBandwidth(int64_t bytes, ColdL2& l2, cudaStream_t stream, int reps) {
  void *src = nullptr, *dst = nullptr;
  CAKE_CUDA_RETURN_IF_ERROR(cudaMalloc(&src, bytes));
  if (cudaMalloc(&dst, bytes) != cudaSuccess) {
    cudaFree(src);
    return absl::ResourceExhaustedError("cannot allocate the copy buffers");
  }
  cudaMemsetAsync(src, 1, bytes, stream);
  absl::StatusOr<std::vector<double>> spans = TimeSpans(
      [&](cudaStream_t s) -> absl::Status {
        CAKE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        return absl::OkStatus();
      },
      l2, stream, reps);
  cudaFree(src);
  cudaFree(dst);
  if (!spans.ok()) return spans.status();
  return 2.0 * static_cast<double>(bytes) / (Median(*spans) * 1e-6);
}

}  // namespace cake::bench
