// Bindings (device pointers by role) and KernelLaunch: what one plan launch
// becomes once buffers are bound. The same KernelLaunch feeds the eager path
// (cudaLaunchKernel) and the graph builder, so there is one source of truth.
#ifndef CAKE_OPS_LAUNCH_H_
#define CAKE_OPS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cake/plan.pb.h"

namespace cake {

// Device pointers by role. Activations (x, residual, h, y, dy, dh_in, dx, z,
// dz) are BF16 in the spec's layout; w and dw are [dim] in the weight and dw
// dtypes; rstd is FP32 [tokens * heads]. Bindings are not part of a plan.
struct Bindings {
  const void* x = nullptr;
  const void* residual = nullptr;
  void* h = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  float* rstd = nullptr;
  const void* z = nullptr;
  const void* dy = nullptr;
  const void* dh_in = nullptr;
  void* dx = nullptr;
  void* dz = nullptr;
  void* dw = nullptr;
  void* workspace = nullptr;  // 256-byte aligned
  int64_t workspace_bytes = 0;  // the size of `workspace`: at least plan.workspace_bytes

  bool operator==(const Bindings& o) const {
    return x == o.x && residual == o.residual && h == o.h && w == o.w && y == o.y &&
           rstd == o.rstd && z == o.z && dy == o.dy && dh_in == o.dh_in && dx == o.dx &&
           dz == o.dz && dw == o.dw && workspace == o.workspace &&
           workspace_bytes == o.workspace_bytes;
  }
  bool operator!=(const Bindings& o) const { return !(*this == o); }
};

inline constexpr size_t kMaxParamsBytes = 256;

struct KernelLaunch {
  const void* function = nullptr;
  dim3 grid;
  dim3 block;
  unsigned dynamic_smem_bytes = 0;
  alignas(16) unsigned char params[kMaxParamsBytes] = {};
  size_t params_bytes = 0;

  template <typename Params>
  void SetParams(const Params& p) {
    static_assert(sizeof(Params) <= kMaxParamsBytes, "Params too large");
    std::memcpy(params, &p, sizeof(Params));
    params_bytes = sizeof(Params);
  }
  // The kernelParams array for cudaLaunchKernel / cudaKernelNodeParams; valid
  // while this object lives and is not moved.
  void** args() {
    arg_ = params;
    return &arg_;
  }

 private:
  void* arg_ = nullptr;
};

// Checks that every role the plan's launches read or write is bound, not
// null, and aligned for its accesses (activations, w: 16 bytes; rstd, FP32
// dw: 4; workspace: 256), and that the workspace is large enough.
// InvalidArgumentError naming the role otherwise.
absl::Status CheckBindings(const Plan& plan, const Bindings& bindings);

// The kernel launch of one launch of `plan` with `bindings` (which
// CheckBindings accepted): its program's kernel, or for a MEMSET launch the
// zero kernel over its workspace region (ZeroWordsKernel).
absl::StatusOr<KernelLaunch> MakeKernelLaunch(const Plan& plan, const Launch& launch,
                                              const Bindings& bindings);

// Whether a launch of a plan for `spec` walks its rows from the last
// (ReverseRows, the forward kernels' reverse instances): the recompute,
// where its x holds more than kRecomputeFromLastMinBytes. It then first
// reads the rows the forward before it left in L2 (x is loaded evict-last)
// and leaves the first rows there for the backward after it, which starts
// at them; each row's outputs are the forward's, bit for bit. On the H200
// the suite's checkpointed steps with more than 16 MiB of x ran 0.93-0.99x
// the time at 4096-16384 rows ([16384, 4096] 233.5 -> 228.7 us, its
// recompute 66.8 -> 62.2) and 0.985-1.000x from 65536; with x in L2
// alongside y (1024 rows, [4096, 1536]) 1.003-1.020x, at [4096, 2048]
// (16 MiB) 0.99-1.00x (2026-11-30,
// bench/results/2026-11-30-h200-recompute-from-last.txt).
inline constexpr int64_t kRecomputeFromLastMinBytes = int64_t{16} << 20;
bool WalksRowsFromTheLast(const StepSpec& spec, const Launch& launch);

// Whether a backward launch's kernel loads its first rows of x, dy and z
// and the weight before it waits for the kernels of the step before it
// (RowBackwardParams::inputs_before_wait), so that they are in flight while
// the recompute before it ends; rstd and dh_in come after the wait. The
// fused backward loads its ring's first steps, or, where a block's first
// step goes to registers ahead of its loop (the warp rows up to D = 512,
// gated or not), the CTA's first step, and stages its weight; the split backward
// loads its dx CTAs' rows and its dw CTAs' first batch. True where the
// launch follows another (depends_on) and no kernel of the step writes
// those inputs, which is always but for the fused residual's h (the
// backward's x), which the forward and the recompute write. The first
// kernel of a graph waits for nothing; there, loads first ran the backward
// 1.00-1.02x the time on the H200. The flat forward loads x, z and the
// weight before its wait always: no kernel of a step writes them, and as a
// flag of its launch it spilled.
bool InputsBeforeWait(const StepSpec& spec, const Launch& launch);

// Whether a plan launch belongs to `phases` (empty: every phase).
bool InPhases(const Launch& launch, absl::Span<const Phase> phases);

// Runs the plan's launches of `phases` (empty: all) in order on `stream`,
// without a graph. Safe inside a stream capture of `stream`. Checks the
// bindings and builds every launch first: on error nothing is launched.
absl::Status LaunchEager(const Plan& plan, const Bindings& bindings, cudaStream_t stream,
                         absl::Span<const Phase> phases = {});

}  // namespace cake

#endif  // CAKE_OPS_LAUNCH_H_
