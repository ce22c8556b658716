#include "bench/timing.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/l2_flush.h"
#include "ops/status.h"

namespace cake::bench {

absl::StatusOr<ColdL2> ColdL2::Create(FlushMethod method) {
  int device = 0, l2 = 0;
  CAKE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CAKE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  // Whole 128-byte lines (LaunchL2Scrub).
  const int64_t bytes = (std::max<int64_t>(2 * int64_t{l2}, 64 << 20) + 127) / 128 * 128;
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
  CAKE_CUDA_RETURN_IF_ERROR(LaunchL2Scrub(buffer_, bytes_, value * 0x01010101u, stream));
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

absl::StatusOr<std::unique_ptr<SpanTimer>> SpanTimer::Create(bool force_events, std::string* why) {
  std::unique_ptr<SpanTimer> t(new SpanTimer());
  if (force_events) {
    *why = "CUDA events asked for (--timer events)";
  } else {
    t->cupti_ = CuptiSpans::Open(why);
  }
  if (t->cupti_ == nullptr) {
    CAKE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&t->start_));
    CAKE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&t->stop_));
  }
  return t;
}

SpanTimer::~SpanTimer() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}

absl::StatusOr<GpuSpan> SpanTimer::Time(const std::function<absl::Status(cudaStream_t)>& work,
                                        ColdL2& l2, cudaStream_t stream) {
  CAKE_RETURN_IF_ERROR(l2.Flush(stream));
  CAKE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  GpuSpan span;
  if (cupti_ != nullptr) {
    cupti_->Begin();
    CAKE_RETURN_IF_ERROR(work(stream));
    CAKE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::string why;
    if (!cupti_->End(&span, &why)) return absl::InternalError(absl::StrCat("CUPTI span: ", why));
    return span;
  }
  CAKE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_, stream));
  CAKE_RETURN_IF_ERROR(work(stream));
  CAKE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_, stream));
  CAKE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_));
  float ms = 0;
  CAKE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_));
  span.us = 1000.0 * ms;
  span.kernels = -1;
  span.memops = -1;
  return span;
}

absl::StatusOr<std::vector<double>> TimeSpans(const std::function<absl::Status(cudaStream_t)>& work,
                                              ColdL2& l2, cudaStream_t stream, int reps,
                                              int warmup) {
  std::string why;
  CAKE_ASSIGN_OR_RETURN(std::unique_ptr<SpanTimer> timer,
                        SpanTimer::Create(/*force_events=*/true, &why));
  std::vector<double> spans;
  for (int i = 0; i < warmup + reps; ++i) {
    CAKE_ASSIGN_OR_RETURN(const GpuSpan span, timer->Time(work, l2, stream));
    if (i >= warmup) spans.push_back(span.us);
  }
  return spans;
}

absl::StatusOr<double> CopyMedianUs(int64_t bytes, CopyBy by, ColdL2& l2, cudaStream_t stream,
                                    int reps, SpanTimer* timer, int warmup) {
  if (bytes <= 0 || reps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a copy of ", bytes, " bytes timed ", reps, " times: both must be positive"));
  }
  if (by == CopyBy::kKernel && bytes % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a copy kernel of ", bytes, " bytes: a multiple of 16 is needed"));
  }
  std::unique_ptr<SpanTimer> events;
  if (timer == nullptr) {
    std::string why;
    CAKE_ASSIGN_OR_RETURN(events, SpanTimer::Create(/*force_events=*/true, &why));
    timer = events.get();
  }
  void *src = nullptr, *dst = nullptr;
  CAKE_CUDA_RETURN_IF_ERROR(cudaMalloc(&src, bytes));
  if (cudaMalloc(&dst, bytes) != cudaSuccess) {
    cudaFree(src);
    return absl::ResourceExhaustedError("cannot allocate the copy buffers");
  }
  std::vector<double> spans;
  absl::Status status = absl::OkStatus();
  if (cudaMemsetAsync(src, 1, bytes, stream) != cudaSuccess) {
    status = absl::InternalError("cudaMemsetAsync of the copy source failed");
  }
  for (int i = 0; i < warmup + reps && status.ok(); ++i) {
    absl::StatusOr<GpuSpan> span = timer->Time(
        [&](cudaStream_t s) -> absl::Status {
          if (by == CopyBy::kKernel) {
            CAKE_CUDA_RETURN_IF_ERROR(LaunchCopyKernel(dst, src, bytes, s));
          } else {
            CAKE_CUDA_RETURN_IF_ERROR(
                cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
          }
          return absl::OkStatus();
        },
        l2, stream);
    status = span.status();
    if (status.ok() && i >= warmup) spans.push_back(span->us);
  }
  cudaFree(src);
  cudaFree(dst);
  CAKE_RETURN_IF_ERROR(status);
  return Median(spans);
}

absl::StatusOr<double> CopyBandwidth(int64_t bytes, ColdL2& l2, cudaStream_t stream, int reps,
                                     SpanTimer* timer, int warmup) {
  CAKE_ASSIGN_OR_RETURN(const double us,
                        CopyMedianUs(bytes, CopyBy::kMemcpy, l2, stream, reps, timer, warmup));
  return 2.0 * static_cast<double>(bytes) / (us * 1e-6);
}

}  // namespace cake::bench
