#include "bench/spans_c_api.h"

#include <cstring>
#include <string>

#include "bench/cupti_spans.h"
#include "bench/l2_flush.h"

namespace {

cake::bench::CuptiSpans* spans = nullptr;

void Copy(const std::string& text, char* out, size_t bytes) {
  if (out == nullptr || bytes == 0) return;
  std::strncpy(out, text.c_str(), bytes - 1);
  out[bytes - 1] = '\0';
}

}  // namespace

extern "C" {

int cake_spans_open(char* why, size_t why_bytes) {
  std::string reason;
  spans = cake::bench::CuptiSpans::Open(&reason);
  Copy(reason, why, why_bytes);
  return spans != nullptr;
}

void cake_spans_begin(void) {
  if (spans != nullptr) spans->Begin();
}

int cake_spans_end(double* us, int* kernels, int* memops, uint64_t* set_hash, char* why,
                   size_t why_bytes) {
  if (spans == nullptr) {
    Copy("cake_spans_open has not succeeded", why, why_bytes);
    return 0;
  }
  cake::bench::GpuSpan span;
  std::string reason;
  if (!spans->End(&span, &reason)) {
    Copy(reason, why, why_bytes);
    return 0;
  }
  *us = span.us;
  *kernels = span.kernels;
  *memops = span.memops;
  *set_hash = span.set_hash;
  return 1;
}

int cake_spans_scrub_l2(void* buffer, uint64_t bytes, uint32_t value, void* stream, char* why,
                        size_t why_bytes) {
  const cudaError_t e = cake::bench::LaunchL2Scrub(buffer, static_cast<int64_t>(bytes), value,
                                                   static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {
    Copy(std::string("L2 scrub: ") + cudaGetErrorString(e), why, why_bytes);
    return 0;
  }
  return 1;
}

}  // extern "C"
