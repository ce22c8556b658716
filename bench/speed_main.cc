// cake_speed: the first speed figures of rmsnorm_train on the GPU.
//
// For each shape: the forward and the backward of both modes, launched
// eagerly from their plans, timed with CUDA events with L2 flushed before
// every span (a write of 2x L2, outside the span), median over --reps spans;
// and the same run's device-to-device copy bandwidth (bytes read + written)
// as the speed of light. Bytes an op must move: forward 4*T*H + 4*T, backward
// 6*T*H + 4*T (x, dy read; dx written; rstd) + the dw row.
//
// Events include the launch gaps between a plan's kernels; the graph
// benchmark (CUPTI spans of one graph replay) replaces them.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/timing.h"
#include "ops/launch.h"
#include "ops/status.h"
#include "planner/planner.h"
#include "ops/row_config.h"
#include "tests/testing/plans.h"
#include "tests/testing/reference.h"

namespace cake {
namespace {

struct Row {
  std::string shape, op, mode;
  double us, gbps, fraction;
};

absl::Status Run(int reps, const std::vector<std::pair<int64_t, int64_t>>& shapes,
                 bool compare_forward) {
  CAKE_ASSIGN_OR_RETURN(TargetDevice target, TargetDevice::Current());
  cudaStream_t stream;
  CAKE_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  CAKE_ASSIGN_OR_RETURN(bench::ColdL2 l2, bench::ColdL2::Create());
  CAKE_ASSIGN_OR_RETURN(double copy, bench::CopyBandwidth(int64_t{4} << 30, l2, stream));
  cudaDeviceProp prop;
  CAKE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, L2 %d MB; flush %lld MB before each span; CUDA events; "
              "median of %d spans\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              static_cast<long long>(l2.bytes() >> 20), reps);
  std::printf("speed of light: device-to-device copy of 4 GiB = %.1f GB/s (read + write)\n",
              copy / 1e9);
  std::vector<Row> rows;
  for (const auto& [tokens, dim] : shapes) {
    const int64_t n = tokens * dim;
    std::vector<void*> owned;
    auto alloc = [&](int64_t bytes) -> void* {
      void* p = nullptr;
      if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
      owned.push_back(p);
      return p;
    };
    Bindings b;
    b.x = alloc(n * 2);
    b.dy = alloc(n * 2);
    b.y = alloc(n * 2);
    b.dx = alloc(n * 2);
    b.w = alloc(dim * 2);
    b.rstd = static_cast<float*>(alloc(tokens * 4));
    b.dw = alloc(dim * 4);
    testing::FillBf16(const_cast<void*>(b.x), n, 1, 2.f);
    testing::FillBf16(const_cast<void*>(b.dy), n, 2, 1.f);
    testing::FillBf16(const_cast<void*>(b.w), dim, 3, 0.5f, 1.f);
    const std::string shape = absl::StrFormat("[%d, %d]", tokens, dim);
    for (const char* op : {"fwd", "fwd.warp", "fwd.cta", "bwd"}) {
      const bool candidate = op != std::string("fwd") && op != std::string("bwd");
      if (candidate && (!compare_forward || dim > kMaxWarpRowDim || dim < 64)) continue;
      for (bool det : {true, false}) {
        if (op != std::string("bwd") && !det) continue;  // the forward is shared
        StepSpec spec;
        spec.set_op(RMSNORM);
        spec.mutable_layout()->set_tokens(tokens);
        spec.mutable_layout()->set_dim(dim);
        spec.set_deterministic(det);
        spec.add_phases(op == std::string("bwd") ? BACKWARD : FORWARD);
        CAKE_ASSIGN_OR_RETURN(Plan plan, MakePlan(spec, target));
        if (candidate) {
          const std::string routed = plan.launches(0).program();
          plan = testing::ForceProgram(plan, routed, absl::StrCat("rmsnorm.", op), target);
        }
        b.workspace = plan.workspace_bytes() > 0 ? alloc(plan.workspace_bytes()) : nullptr;
        b.workspace_bytes = plan.workspace_bytes();
        if (std::any_of(owned.begin(), owned.end(), [](void* p) { return p == nullptr; })) {
          return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", shape));
        }
        CAKE_ASSIGN_OR_RETURN(
            std::vector<double> spans,
            bench::TimeSpans([&](cudaStream_t s) { return LaunchEager(plan, b, s); }, l2, stream,
                             reps));
        const double us = bench::Median(spans);
        const double bytes = op != std::string("bwd") ? 4.0 * n + 4.0 * tokens
                                                      : 6.0 * n + 4.0 * tokens + 4.0 * dim;
        const double gbps = bytes / (us * 1e-6) / 1e9;
        rows.push_back({shape, op, op != std::string("bwd") ? "both" : det ? "det" : "nondet", us,
                        gbps, gbps * 1e9 / copy});
        std::fprintf(stderr, "  %s %s %s: %.1f us\n", shape.c_str(), op, rows.back().mode.c_str(), us);
      }
    }
    for (void* p : owned) cudaFree(p);
  }
  std::printf("\n%-16s %-8s %-7s %10s %9s %9s\n", "shape [T, H]", "op", "mode", "median us",
              "GB/s", "of copy");
  for (const Row& r : rows) {
    std::printf("%-16s %-8s %-7s %10.1f %9.1f %9.3f\n", r.shape.c_str(), r.op.c_str(),
                r.mode.c_str(), r.us, r.gbps, r.fraction);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace cake

int main(int argc, char** argv) {
  int reps = 100;
  bool compare_forward = false;
  std::vector<std::pair<int64_t, int64_t>> shapes = {
      {65536, 2048}, {131072, 2048}, {65536, 6144}, {131072, 6144}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: cake_speed [--reps N] [--shape TxH ...] [--compare-forward]\n"
                  "Times the rmsnorm_train forward and both backwards against the copy bandwidth.\n"
                  "--compare-forward also times both forward programs where both run (dim 64..1024).\n");
      return 0;
    }
    if (a == "--compare-forward") {
      compare_forward = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--shape" && i + 1 < argc) {
      if (shapes.size() == 4 && shapes[0].first == 65536 && shapes[0].second == 2048) shapes.clear();
      long long t = 0, h = 0;
      if (std::sscanf(argv[++i], "%lldx%lld", &t, &h) != 2) {
        std::fprintf(stderr, "cake_speed: --shape takes TxH, e.g. 65536x4096\n");
        return 2;
      }
      shapes.push_back({t, h});
    } else {
      std::fprintf(stderr, "cake_speed: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "cake_speed: --reps must be >= 1\n");
    return 2;
  }
  const absl::Status s = cake::Run(reps, shapes, compare_forward);
  if (!s.ok()) {
    std::fprintf(stderr, "cake_speed: %s\n", std::string(s.message()).c_str());
    return s.code() == absl::StatusCode::kFailedPrecondition ? 3 : 1;
  }
  return 0;
}
