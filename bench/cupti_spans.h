// GPU spans of one unit of work from CUPTI activity records: the first
// kernel, memset or memcpy start to the last end, on the GPU's own clock, without
// the launch latency that CUDA events around the work include.
//
// CUPTI is loaded at run time (dlopen), so a binary without it still runs
// and falls back to events: Open() says why it could not. CUPTI's activity
// API is process-wide, so there is one recorder per process. Plain C++ (no
// Abseil): bench/spans_c_api.cc exposes it to Python.
#ifndef CAKE_BENCH_CUPTI_SPANS_H_
#define CAKE_BENCH_CUPTI_SPANS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace cake::bench {

// One kernel, memset or memcpy of a span.
struct SpanPart {
  std::string name;     // the kernel's name, or "memset" / "memcpy"
  double start_us = 0;  // from the span's first start
  double us = 0;        // its own duration
};

struct GpuSpan {
  double us = 0;         // first start to last end
  int kernels = 0;       // kernel records in the span
  int memops = 0;        // memset and memcpy records in the span
  uint64_t set_hash = 0; // hash of the sorted kernel names and the memop count
  std::vector<SpanPart> parts;  // in start order; empty with CUDA events
};

class CuptiSpans {
 public:
  // The process's recorder, with kernel, memset and memcpy activity enabled; null,
  // with the reason in `why`, where CUPTI cannot be loaded or enabled.
  static CuptiSpans* Open(std::string* why);

  // Marks the start: records of work that started before are ignored. Call
  // with the device idle (after a synchronize).
  void Begin();
  // After the work has completed (synchronized): the span of every kernel,
  // memset and memcpy that started since Begin(). False, with `why`, when none did or
  // CUPTI dropped records.
  bool End(GpuSpan* span, std::string* why);

 private:
  CuptiSpans() = default;
  uint64_t begin_ns_ = 0;
};

}  // namespace cake::bench

#endif  // CAKE_BENCH_CUPTI_SPANS_H_
