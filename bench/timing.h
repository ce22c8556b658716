// The timing core of the benchmark: cold L2 between timed spans, CUDA-event
// spans, medians, and the device-to-device copy bandwidth of the same run as
// the speed of light.
#ifndef CAKE_BENCH_TIMING_H_
#define CAKE_BENCH_TIMING_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/cupti_spans.h"

namespace cake::bench {

// How ColdL2 writes its buffer: cudaMemsetAsync, or a kernel of plain
// 16-byte stores (as a framework's fill does).
enum class FlushMethod { kMemset, kKernel };

// A buffer of twice the device's L2; Flush() scrubs L2 with it
// (LaunchL2Scrub), then writes all of it, so whatever the timed work touched
// before is out of L2, lines kept with the evict-last policy included.
class ColdL2 {
 public:
  static absl::StatusOr<ColdL2> Create(FlushMethod method = FlushMethod::kMemset);
  ColdL2(ColdL2&& other) noexcept;
  ColdL2& operator=(ColdL2&&) = delete;
  ~ColdL2();
  absl::Status Flush(cudaStream_t stream);
  int64_t bytes() const { return bytes_; }

 private:
  ColdL2(void* buffer, int64_t bytes, FlushMethod method)
      : buffer_(buffer), bytes_(bytes), method_(method) {}
  void* buffer_;
  int64_t bytes_;
  FlushMethod method_;
};

// One span per call: CUPTI activity records of the work, or CUDA events
// around it. L2 is flushed and the stream synchronized first, outside the
// span.
class SpanTimer {
 public:
  // CUPTI unless `force_events` or CUPTI cannot be used; `why` then says why.
  static absl::StatusOr<std::unique_ptr<SpanTimer>> Create(bool force_events, std::string* why);
  ~SpanTimer();
  absl::StatusOr<GpuSpan> Time(const std::function<absl::Status(cudaStream_t)>& work, ColdL2& l2,
                               cudaStream_t stream);
  bool cupti() const { return cupti_ != nullptr; }

 private:
  SpanTimer() = default;
  CuptiSpans* cupti_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Times `work` on `stream` `reps` times with CUDA events around each span,
// flushing L2 and synchronizing before each (outside the span). Returns the
// spans in microseconds, after `warmup` untimed runs.
absl::StatusOr<std::vector<double>> TimeSpans(const std::function<absl::Status(cudaStream_t)>& work,
                                              ColdL2& l2, cudaStream_t stream, int reps,
                                              int warmup = 3);

double Median(std::vector<double> v);

// How a device-to-device copy is made: cudaMemcpyAsync, or the SMs' copy
// kernel (LaunchCopyKernel; `bytes` a multiple of 16).
enum class CopyBy { kMemcpy, kKernel };

// The median span, in microseconds, of a device-to-device copy of `bytes`
// (read, and as many written): `reps` spans of `timer` (CUDA events when
// null) after `warmup`, L2 flushed before each.
absl::StatusOr<double> CopyMedianUs(int64_t bytes, CopyBy by, ColdL2& l2, cudaStream_t stream,
                                    int reps = 20, SpanTimer* timer = nullptr, int warmup = 3);

// Bytes read plus bytes written per second of a cudaMemcpyAsync copy.
absl::StatusOr<double> CopyBandwidth(int64_t bytes, ColdL2& l2, cudaStream_t stream, int reps = 20,
                                     SpanTimer* timer = nullptr, int warmup = 3);

}  // namespace cake::bench

#endif  // CAKE_BENCH_TIMING_H_
