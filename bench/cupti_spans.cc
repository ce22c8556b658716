#include "bench/cupti_spans.h"

#include <cupti_activity.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cake::bench {
namespace {

// The CUPTI entry points used, resolved from the loaded library.
struct Cupti {
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*dropped)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*timestamp)(uint64_t*) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
};

struct Record {
  uint64_t start, end;
  bool kernel;
  std::string name;
};

Cupti api;
std::mutex mu;
std::vector<Record> records;  // delivered, not yet taken by End()
size_t dropped_total = 0;

constexpr size_t kBufferBytes = 8 << 20;

// A kernel's name as its source spells it, or as recorded where it cannot
// be demangled.
std::string Demangled(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || text == nullptr) return name;
  std::string out(text);
  std::free(text);
  return out;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                              size_t valid) {
  std::vector<Record> got;
  CUpti_Activity* r = nullptr;
  while (api.next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      got.push_back({k->start, k->end, true, Demangled(k->name)});
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
      got.push_back({m->start, m->end, false, "memset"});
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
      got.push_back({m->start, m->end, false, "memcpy"});
    }
  }
  size_t dropped = 0;
  if (api.dropped(ctx, stream, &dropped) != CUPTI_SUCCESS) dropped = 0;
  std::free(buffer);
  std::lock_guard<std::mutex> lock(mu);
  records.insert(records.end(), got.begin(), got.end());
  dropped_total += dropped;
}

std::string ResultString(CUptiResult r) {
  const char* s = nullptr;
  if (api.result_string == nullptr || api.result_string(r, &s) != CUPTI_SUCCESS || !s) {
    return "CUPTI error " + std::to_string(static_cast<int>(r));
  }
  return s;
}

bool Load(std::string* why) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("CAKE_CUPTI")) candidates.push_back(env);
  for (const char* c : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"}) {
    candidates.push_back(c);
  }
  void* handle = nullptr;
  std::string tried;
  for (const std::string& c : candidates) {
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    tried += (tried.empty() ? "" : "; ") + std::string(dlerror());
  }
  if (handle == nullptr) {
    *why = "cannot load libcupti (" + tried + ")";
    return false;
  }
  bool ok = true;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr) {
      ok = false;
      *why = std::string("libcupti has no ") + name;
    }
  };
  sym(api.register_callbacks, "cuptiActivityRegisterCallbacks");
  sym(api.enable, "cuptiActivityEnable");
  sym(api.flush_all, "cuptiActivityFlushAll");
  sym(api.next_record, "cuptiActivityGetNextRecord");
  sym(api.dropped, "cuptiActivityGetNumDroppedRecords");
  sym(api.timestamp, "cuptiGetTimestamp");
  sym(api.result_string, "cuptiGetResultString");
  return ok;
}

}  // namespace

CuptiSpans* CuptiSpans::Open(std::string* why) {
  static std::string failure;
  static CuptiSpans* spans = [] () -> CuptiSpans* {
    if (!Load(&failure)) return nullptr;
    CUptiResult r = api.register_callbacks(BufferRequested, BufferCompleted);
    for (CUpti_ActivityKind kind :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
          CUPTI_ACTIVITY_KIND_MEMCPY}) {
      if (r == CUPTI_SUCCESS) r = api.enable(kind);
    }
    if (r != CUPTI_SUCCESS) {
      failure = "CUPTI activity tracing unavailable: " + ResultString(r);
      return nullptr;
    }
    return new CuptiSpans();
  }();
  if (spans == nullptr && why != nullptr) *why = failure;
  return spans;
}

void CuptiSpans::Begin() {
  api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  {
    std::lock_guard<std::mutex> lock(mu);
    records.clear();
  }
  api.timestamp(&begin_ns_);
}

bool CuptiSpans::End(GpuSpan* span, std::string* why) {
  api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<Record> taken;
  size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    taken.swap(records);
    std::swap(dropped, dropped_total);
  }
  if (dropped > 0) {
    *why = "CUPTI dropped " + std::to_string(dropped) + " activity records";
    return false;
  }
  uint64_t first = UINT64_MAX, last = 0;
  std::vector<std::string> names;
  std::vector<const Record*> kept;
  GpuSpan s;
  for (const Record& r : taken) {
    if (r.start < begin_ns_ || r.end < r.start) continue;
    kept.push_back(&r);
    first = std::min(first, r.start);
    last = std::max(last, r.end);
    if (r.kernel) {
      ++s.kernels;
      names.push_back(r.name);
    } else {
      ++s.memops;
    }
  }
  if (s.kernels + s.memops == 0) {
    *why = "no kernel, memset or memcpy records since Begin()";
    return false;
  }
  std::sort(names.begin(), names.end());
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&h](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (const std::string& n : names) {
    for (unsigned char c : n) mix(c);
    mix(0);
  }
  mix(static_cast<unsigned char>(s.memops));
  s.set_hash = h;
  s.us = static_cast<double>(last - first) * 1e-3;
  std::sort(kept.begin(), kept.end(),
            [](const Record* a, const Record* b) { return a->start < b->start; });
  for (const Record* r : kept) {
    s.parts.push_back({r->name, static_cast<double>(r->start - first) * 1e-3,
                       static_cast<double>(r->end - r->start) * 1e-3});
  }
  *span = std::move(s);
  return true;
}

}  // namespace cake::bench
