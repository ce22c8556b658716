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
#include "bench/suite.h"
#include "bench/timing.h"
#include "ops/launch.h"
#include "ops/status.h"
#include "planner/planner.h"
#include "ops/registry.h"
#include "planner/validate.h"
#include "tests/testing/plans.h"
#include "tests/testing/reference.h"
#include "tests/testing/step_buffers.h"

namespace cake {
namespace {

struct Row {
  std::string shape, op, mode;
  double us, gbps, fraction;
};

// One shape of the rows form ([T, H], heads = 1) or of the gated op
// (T x heads x D, contiguous heads).
struct Shape {
  int64_t tokens, heads, dim;
  bool gate;
  std::string Name() const {
    return gate ? absl::StrFormat("gate %dx%dx%d", tokens, heads, dim)
                : absl::StrFormat("[%d, %d]", tokens, dim);
  }
};

absl::Status Run(int reps, const std::vector<Shape>& shapes, bool compare_forward) {
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
  for (const Shape& shape : shapes) {
    auto spec_of = [&](Phase phase, bool det) {
      StepSpec spec;
      spec.set_op(shape.gate ? RMSNORM_SILU_GATE : RMSNORM);
      spec.mutable_layout()->set_tokens(shape.tokens);
      spec.mutable_layout()->set_heads(shape.heads);
      spec.mutable_layout()->set_dim(shape.dim);
      spec.set_deterministic(det);
      spec.add_phases(phase);
      return spec;
    };
    // Buffers for every role (and the largest workspace) of this shape.
    CAKE_ASSIGN_OR_RETURN(Plan bwd_det, MakePlan(spec_of(BACKWARD, true), target));
    CAKE_ASSIGN_OR_RETURN(std::unique_ptr<testing::StepBuffers> buf,
                          testing::StepBuffers::Create(bwd_det));
    buf->Fill(1);
    Bindings& b = buf->b;
    void* workspace = nullptr;
    // The ops: the routed forward, (with --compare-forward) every forward
    // program of the op that can run the shape, and the routed backwards.
    std::vector<std::string> ops = {"fwd"};
    if (compare_forward) {
      const StepSpec probe = *Canonicalize(spec_of(FORWARD, true));
      for (const ProgramInfo& p : Programs()) {
        if (p.stage == Stage::kForward && CheckSupports(p, probe).ok()) ops.push_back(std::string(p.id));
      }
    }
    ops.push_back("bwd");
    for (const std::string& op : ops) {
      const bool backward = op == "bwd";
      const bool candidate = op != "fwd" && !backward;
      for (bool det : {true, false}) {
        if (!backward && !det) continue;  // the forward is shared
        CAKE_ASSIGN_OR_RETURN(Plan plan, MakePlan(spec_of(backward ? BACKWARD : FORWARD, det), target));
        if (candidate) {
          const std::string routed = plan.launches(0).program();
          plan = testing::ForceProgram(plan, routed, op, target);
        }
        if (plan.workspace_bytes() > b.workspace_bytes) {
          cudaFree(workspace);
          CAKE_CUDA_RETURN_IF_ERROR(cudaMalloc(&workspace, plan.workspace_bytes()));
          b.workspace = workspace;
          b.workspace_bytes = plan.workspace_bytes();
        }
        CAKE_ASSIGN_OR_RETURN(
            std::vector<double> spans,
            bench::TimeSpans([&](cudaStream_t s) { return LaunchEager(plan, b, s); }, l2, stream,
                             reps));
        const double us = bench::Median(spans);
        const double gbps = bench::BytesMoved(plan.spec()) / (us * 1e-6) / 1e9;
        rows.push_back({shape.Name(), op, !backward ? "both" : det ? "det" : "nondet", us, gbps,
                        gbps * 1e9 / copy});
        std::fprintf(stderr, "  %s %s %s: %.1f us\n", shape.Name().c_str(), op.c_str(),
                     rows.back().mode.c_str(), us);
      }
    }
    cudaFree(workspace);
  }
  std::printf("\n%-22s %-36s %-7s %10s %9s %9s\n", "shape", "op", "mode", "median us", "GB/s",
              "of copy");
  for (const Row& r : rows) {
    std::printf("%-22s %-36s %-7s %10.1f %9.1f %9.3f\n", r.shape.c_str(), r.op.c_str(),
                r.mode.c_str(), r.us, r.gbps, r.fraction);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace cake

int main(int argc, char** argv) {
  using cake::Shape;
  int reps = 100;
  bool compare_forward = false;
  std::vector<Shape> shapes;
  const std::vector<Shape> kDefault = {{65536, 1, 2048, false},
                                       {131072, 1, 2048, false},
                                       {65536, 1, 6144, false},
                                       {131072, 1, 6144, false}};
  // The gated rows of the benchmark suite, D = 128.
  const std::vector<Shape> kGateSuite = {{260, 48, 128, true},
                                         {1031, 48, 128, true},
                                         {3534, 48, 128, true},
                                         {8192, 32, 128, true},
                                         {16384, 48, 128, true}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    long long t = 0, h = 0, d = 0;
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: cake_speed [--reps N] [--shape TxH ...] [--gate TxHEADSxD ...] [--gate-suite]\n"
          "                  [--compare-forward]\n"
          "Times the forward and both backwards of each shape against the copy bandwidth.\n"
          "Default shapes: [65536|131072, 2048|6144]. --gate-suite: the gated rows of the\n"
          "benchmark suite (D = 128). --compare-forward also times every forward program\n"
          "of the op that can run the shape (the routing table's candidates).\n");
      return 0;
    }
    if (a == "--compare-forward") {
      compare_forward = true;
    } else if (a == "--gate-suite") {
      shapes.insert(shapes.end(), kGateSuite.begin(), kGateSuite.end());
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--shape" && i + 1 < argc && std::sscanf(argv[++i], "%lldx%lld", &t, &h) == 2) {
      shapes.push_back({t, 1, h, false});
    } else if (a == "--gate" && i + 1 < argc &&
               std::sscanf(argv[++i], "%lldx%lldx%lld", &t, &h, &d) == 3) {
      shapes.push_back({t, h, d, true});
    } else {
      std::fprintf(stderr, "cake_speed: bad argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (shapes.empty()) shapes = kDefault;
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
