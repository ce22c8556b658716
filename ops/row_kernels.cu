// The row kernels of rmsnorm_train and rmsnorm_silu_gate_train, the dw
// reduce and finish, and the zero kernel of a plan's MEMSET launches. The
// formulas and the bytes each kernel moves are stated with its Params struct
// in ops/row_kernels.h.
//
// A group of TPR threads holds one row in registers, VPT 16-byte vectors of
// 8 BF16 each per thread (ops/row_config.h); a CTA holds BLOCK / TPR rows
// and walks a persistent grid, except in the flat forward (RowForwardFlat),
// where each CTA runs one row group. TPR = 0 is a wide row: one row per CTA,
// as many threads as the CTA has (a multiple of 32). All math is FP32; each
// BF16 output is rounded once.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ops/row_config.h"
#include "ops/row_kernels.h"

namespace cake {
namespace {

// The largest CTA a kernel instance runs (wide rows: up to 512 threads).
constexpr int MaxBlockOf(int tpr) { return tpr == 0 ? kMaxWideBlock : BlockOf(tpr); }
constexpr int MinBlocksOf(int tpr) {
  return MaxBlockOf(tpr) >= kThreadsPerSm ? 1 : kThreadsPerSm / MaxBlockOf(tpr);
}

// Every kernel of a step begins here. The graphs chain consecutive kernels
// with programmatic edges (graphs/step.cc): the next kernel's CTAs may start
// once every CTA of this one has started (LaunchDependents), and wait
// (WaitForPrerequisites) until the kernels before them have finished and
// their writes are visible, so a kernel's gap to the one before is its CTAs'
// launch no longer. Without such an edge (eager launches, the first kernel)
// both instructions return at once. Before the wait a kernel touches no
// global memory but loads of the step's inputs that no kernel of the step
// writes: the flat forward's x, z and weight, and where its launch says so
// (InputsBeforeWait) the backward's x, dy, z and weight.
__device__ __forceinline__ void LaunchDependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void WaitForPrerequisites() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void ChainedKernelPrologue() {
  LaunchDependents();
  WaitForPrerequisites();
}

// The index of row r's rstd: with kReverse the forward's layout runs from
// the last row (ReverseRows), and rstd stays in the tensors' order.
template <bool kReverse>
__device__ __forceinline__ int64_t RstdIndex(const RowLayout& l, int64_t r) {
  return kReverse ? l.rows - 1 - r : r;
}

__device__ __forceinline__ void UnpackHalves(const uint4& v, float (&f)[8]) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(p[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
// A BF16 value is the high half of the FP32 value it stands for: one shift
// or one mask per element (__bfloat1622float2 gave the high element a byte
// permute and a shift).
__device__ __forceinline__ void Unpack(const uint4& v, float (&f)[8]) {
  f[0] = __uint_as_float(v.x << 16), f[1] = __uint_as_float(v.x & 0xffff0000u);
  f[2] = __uint_as_float(v.y << 16), f[3] = __uint_as_float(v.y & 0xffff0000u);
  f[4] = __uint_as_float(v.z << 16), f[5] = __uint_as_float(v.z & 0xffff0000u);
  f[6] = __uint_as_float(v.w << 16), f[7] = __uint_as_float(v.w & 0xffff0000u);
}

__device__ __forceinline__ uint4 Pack(const float (&f)[8]) {
  uint4 v;
  __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

// The fused residual add: h = bf16(x + residual), the h that is normalized.
__device__ __forceinline__ uint4 AddResidual(const uint4& x, const uint4& residual) {
  float a[8], b[8];
  Unpack(x, a);
  Unpack(residual, b);
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] += b[j];
  return Pack(a);
}

// Stores of activations use L2's default policy. Marked evict-first (__stcs
// / __ldcs: touched once per launch) they ran up to 6% slower on the H200
// (flat forward, gated and per-head rows, the backward's dx); only the looped
// forward keeps streaming stores (StoreStreaming). Loads: the forwards' x and
// the backward's register-loaded rows are marked evict-last (LoadEvictLast),
// the rest use the default policy.
__device__ __forceinline__ void Store(uint4* dst, const uint4& v) { *dst = v; }
__device__ __forceinline__ void StoreStreaming(uint4* dst, const uint4& v) { __stcs(dst, v); }

// Element i of the backward's dw partial rows: FP64, or rounded once to FP32
// where the instance may be given such rows (BwdMayWriteFp32Partials).
template <bool kMayFp32>
__device__ __forceinline__ void StorePartial(const RowBackwardParams& p, int64_t i, double sum) {
  if (kMayFp32 && p.partials_fp32) {
    static_cast<float*>(p.partials)[i] = static_cast<float>(sum);
  } else {
    static_cast<double*>(p.partials)[i] = sum;
  }
}

// Elements i..i+7 of the partial rows (i a multiple of 8, so that the
// stores are aligned), as StorePartial rounds them, in 16-byte stores: a
// thread's 8 columns of a vector stored one element at a time (32 lanes
// 32-64 bytes apart, a sector each) ran [16384, 6144]'s backward 1.06x the
// time on the H200 and [16384, 8192]'s 1.03x (2026-12-01).
template <bool kMayFp32>
__device__ __forceinline__ void StorePartialVector(const RowBackwardParams& p, int64_t i,
                                                   const double (&sum)[8]) {
  if (kMayFp32 && p.partials_fp32) {
    float4* const dst = reinterpret_cast<float4*>(static_cast<float*>(p.partials) + i);
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      dst[q] = make_float4(static_cast<float>(sum[4 * q]), static_cast<float>(sum[4 * q + 1]),
                           static_cast<float>(sum[4 * q + 2]), static_cast<float>(sum[4 * q + 3]));
    }
  } else {
    double2* const dst = reinterpret_cast<double2*>(static_cast<double*>(p.partials) + i);
#pragma unroll
    for (int q = 0; q < 4; ++q) dst[q] = make_double2(sum[2 * q], sum[2 * q + 1]);
  }
}

__device__ __forceinline__ void LoadWeight(const void* w, int w_fp32, int64_t v, float (&f)[8]) {
  if (w_fp32) {
    const float4* p = reinterpret_cast<const float4*>(w) + 2 * v;
    const float4 a = p[0], b = p[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
    f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    Unpack(__ldg(reinterpret_cast<const uint4*>(w) + v), f);
  }
}

// The weight in shared memory for the whole CTA: as FP32, or with kBf16 (a
// BF16 weight, BwdBf16WeightSmem) as given.
template <bool kBf16 = false>
__device__ __forceinline__ void StageWeight(const void* w, int w_fp32, int64_t vecs, float* wsm) {
  for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
    if constexpr (kBf16) {
      reinterpret_cast<uint4*>(wsm)[v] = __ldg(reinterpret_cast<const uint4*>(w) + v);
    } else {
      float f[8];
      LoadWeight(w, w_fp32, v, f);
#pragma unroll
      for (int j = 0; j < 8; ++j) wsm[v * 8 + j] = f[j];
    }
  }
  __syncthreads();
}

// Asks the copy engine to bring `bytes` (a multiple of 16, at a 16-byte
// aligned address) into L2 without waiting for them (sm_90).
__device__ __forceinline__ void PrefetchL2(const void* p, int64_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p),
               "r"(static_cast<unsigned>(bytes))
               : "memory");
}

// Brings the line of `p` into L1 without a register to wait on.
__device__ __forceinline__ void PrefetchL1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// Asynchronous 16-byte copies from global into shared memory (sm_80+),
// bypassing L1, with L2's default policy: marked evict-first (as __ldcs
// loads are), the fused backward ran up to 1.15x the time on the H200. A
// thread's copies form groups (CommitCopies); WaitCopies<N> returns once at
// most N of its groups are still in flight.
__device__ __forceinline__ void CopyAsync(uint4* dst, const uint4* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
// The same through L1 (cp.async.ca), for what every CTA of an SM reads (the
// weight): through L2 only, the flat forward's copies of the weight ran 1.5x
// the time on the D = 256 views and 3-10x with an FP32 weight on the H200,
// every CTA asking the same few L2 lines (2026-11-30).
__device__ __forceinline__ void CopyAsyncL1(uint4* dst, const uint4* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void CommitCopies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void WaitCopies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// The thread's weight slots (FlatWeightSmemBytes): slot k of every thread of
// the CTA side by side, so a warp's 16-byte slot accesses do not conflict.
// Vector v of the weight (one slot as BF16, two as FP32) goes to the
// thread's slots of its i-th vector; only the thread reads them back, after
// WaitCopies, so no barrier is needed.
__device__ __forceinline__ uint4* ThreadSlot(uint4* slots, int k) {
  return &slots[k * blockDim.x + threadIdx.x];
}
__device__ __forceinline__ void CopyWeightToSlots(const void* w, int w_fp32, int64_t v, int i,
                                                  uint4* slots) {
  const int units = w_fp32 ? 2 : 1;
  const uint4* src = static_cast<const uint4*>(w) + v * units;
  CopyAsyncL1(ThreadSlot(slots, i * units), src);
  if (units == 2) CopyAsyncL1(ThreadSlot(slots, i * units + 1), src + 1);
}
__device__ __forceinline__ void WeightFromSlots(uint4* slots, int w_fp32, int i, float (&f)[8]) {
  if (w_fp32) {
    const uint4 a = *ThreadSlot(slots, i * 2), b = *ThreadSlot(slots, i * 2 + 1);
    f[0] = __uint_as_float(a.x), f[1] = __uint_as_float(a.y);
    f[2] = __uint_as_float(a.z), f[3] = __uint_as_float(a.w);
    f[4] = __uint_as_float(b.x), f[5] = __uint_as_float(b.y);
    f[6] = __uint_as_float(b.z), f[7] = __uint_as_float(b.w);
  } else {
    Unpack(*ThreadSlot(slots, i), f);
  }
}

// sigmoid(z) = 1 / (1 + 2^(-z log2(e))) on the special-function unit: one
// ex2.approx and one rcp.approx (relative error about 2^-21 each) in place of
// expf and an IEEE division, which cost the gated kernels a large share of
// their issue slots. Saturates without NaN: z = -100 gives 1 / inf = 0.
__device__ __forceinline__ float Sigmoid(float z) {
  float e, r;
  // .ftz: a result below 2^-126 is 0 (1 + e rounds to 1 either way), which
  // saves the range test and the two scalings exp2f adds around ex2.approx.
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-z * 1.44269504088896341f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
  return r;
}

// The backward's element formulas (the fused RowBackward writes the same
// out; see there). g = dy * w * s with s = silu(z) (1 without the gate),
// xhat = x * rstd and mean = mean(g * xhat) over the row:
//   dx = rstd * (g - xhat * mean) = rstd * g - x * c,  c = rstd^2 * mean,
//   dz = dy * w * xhat * sigmoid(z) * (1 + z * (1 - sigmoid(z)))
//      = dy * w * xhat * (sig + s * (1 - sig)).
// The row sum is taken of g * x and scaled by rstd once (RowCoef), so a
// row's rstd is needed only after its sum.
struct GateTerms {
  float sig;  // sigmoid(z), 1 without the gate
  float s;    // silu(z), 1 without the gate
};
template <bool kGate>
__device__ __forceinline__ GateTerms GateOf(float z) {
  if constexpr (kGate) {
    const float sig = Sigmoid(z);
    return {sig, z * sig};
  } else {
    return {1.f, 1.f};
  }
}

// One element's term of the row sum of g * x.
__device__ __forceinline__ float DotTerm(float x, float dy, float w, float s) { return dy * w * s * x; }

// c of the dx formula from the row sum of g * x.
__device__ __forceinline__ float RowCoef(float sum, float rstd, float inv_dim) {
  return rstd * rstd * (sum * rstd * inv_dim);
}

// dx and (with the gate) dz of one element.
template <bool kGate>
__device__ __forceinline__ void ElementGrads(float x, float dy, float w, GateTerms g, float rstd,
                                             float c, float& dx, float& dz) {
  if constexpr (kGate) {
    dx = fmaf(dy * w, rstd * g.s, -x * c);
    dz = dy * x * w * (rstd * fmaf(g.s, 1.f - g.sig, g.sig));
  } else {
    dx = fmaf(dy * rstd, w, -x * c);
  }
}

// Adds one element's dw term to a Kahan sum: `total`, and `comp`, the low
// part lost so far, negated; the term's last product is an FMA with -comp.
// With the gate, dy * x is exact in FP32 (two BF16 values), so the term
// carries the roundings of rstd * silu(z) only: at |z| near 30 that halved
// the worst dw error.
template <bool kGate>
__device__ __forceinline__ float DwTermPlus(float x, float dy, float s, float rstd, float acc) {
  return kGate ? fmaf(dy * x, rstd * s, acc) : fmaf(dy * rstd, x, acc);
}
// Adds `term` (which already carries -comp) to the Kahan sum.
__device__ __forceinline__ void KahanAdd(float term, float& total, float& comp) {
  const float t = total + term;
  comp = (t - total) - term;
  total = t;
}
template <bool kGate>
__device__ __forceinline__ void AddDwTerm(float x, float dy, float s, float rstd, float& total,
                                          float& comp) {
  KahanAdd(DwTermPlus<kGate>(x, dy, s, rstd, -comp), total, comp);
}

// Stores vector v of a row's dx (plus the incoming gradient of the residual
// branch, dh_in, where there is one) and, with the gate, dz.
template <bool kGate>
__device__ __forceinline__ void StoreGrads(const RowBackwardParams& p, int64_t off, int64_t v,
                                           float (&dxf)[8], const float (&dzf)[8]) {
  if (p.dh_in != nullptr) {
    float d[8];
    Unpack(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.dh_in) + off)[v], d);
#pragma unroll
    for (int j = 0; j < 8; ++j) dxf[j] += d[j];
  }
  Store(reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.dx) + off) + v, Pack(dxf));
  if constexpr (kGate) Store(reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.dz) + off) + v, Pack(dzf));
}

// The shared scratch of the CTA-wide row sums (GroupSums): two halves of
// `half` floats (a warp's partial sum of each of the N values) that the
// sums write in turn. The barrier of sum k + 1 comes after every thread's
// reads of sum k, so sum k + 2 may overwrite sum k's half without a barrier
// before its writes: one barrier per sum (two with a single half).
struct SumScratch {
  float* base;   // [2][half] floats in shared memory, half = N * the CTA's warps
  int half;
  int turn = 0;  // the half the next sum writes
  int first = 0;  // TPR > 32: the first warp of this thread's row group

  // Several row groups of TPR > 32 threads a CTA: thread `thread`'s group's.
  template <int TPR>
  __device__ void SetGroupOf(int thread) {
    first = thread / TPR * (TPR / 32);
  }
};

// Sums of v[0..N) each over the TPR threads of a row group, in a fixed
// order, behind one barrier. Every thread of the CTA must call it (it may
// synchronize the CTA). kTreeOrder (TPR > 32): the group's warp sums are
// added in the order in which a one-row CTA of TPR threads (TPR = 0) adds
// them, halving pairwise (warps i and i + h), so that both give the same
// bits: the flat forwards, whose programs a recompute window may exchange
// (with the butterfly's shuffles in place of that order, the forwards of
// 1024-4096 rows ran 1.02-1.05x the time on the H200); else in warp order.
template <int TPR, int N, bool kTreeOrder = false>
__device__ __forceinline__ void GroupSums(float (&v)[N], SumScratch& sums) {
  constexpr int kWidth = TPR > 0 && TPR < 32 ? TPR : 32;
#pragma unroll
  for (int k = 0; k < N; ++k) {
#pragma unroll
    for (int o = kWidth / 2; o > 0; o >>= 1) v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
  }
  if constexpr (TPR <= 0 || TPR > 32) {
    // The CTA is one row, or (the backward's lockstep row groups,
    // BwdBlockOf) holds several. TPR > 32: the row group's TPR / 32 warps
    // from sums.first on, summed in order (a compile-time loop), or with
    // kTreeOrder in the butterfly's order. TPR = 0
    // (the CTA one row): blockDim.x / 32 warps (up to 32), summed
    // by every warp in the same butterfly order, so all threads get the
    // same bits (a loop of run-time length cost the wide rows' forward
    // 3-8% on the H200).
    const int lane = threadIdx.x % 32;
    const int warps = sums.half / N;
    float* const scratch = sums.base + sums.turn * sums.half;
    sums.turn ^= 1;
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < N; ++k) scratch[k * warps + threadIdx.x / 32] = v[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float* const part = scratch + k * warps;
      if constexpr (TPR > 0 && kTreeOrder) {
        // The butterfly below (TPR = 0) leaves every lane the sum of the
        // warps' values halved pairwise over a power of two, the missing
        // warps adding zeros; the same sums here, without them (the same
        // bits where no value is -0, as for the forward's sums of squares).
        constexpr int kWarps = TPR / 32;
        float t[kWarps];
#pragma unroll
        for (int i = 0; i < kWarps; ++i) t[i] = part[sums.first + i];
#pragma unroll
        for (int h = NextPow2(kWarps) / 2; h >= 1; h /= 2) {
#pragma unroll
          for (int i = 0; i < h; ++i) {
            if (i + h < kWarps) t[i] += t[i + h];
          }
        }
        v[k] = t[0];
      } else if constexpr (TPR > 0) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < TPR / 32; ++i) s += part[sums.first + i];
        v[k] = s;
      } else {
        float s = lane < static_cast<int>(blockDim.x / 32) ? part[lane] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        v[k] = s;
      }
    }
  }
}
template <int TPR, bool kTreeOrder = false>
__device__ __forceinline__ float GroupSum(float v, SumScratch& sums) {
  float one[1] = {v};
  GroupSums<TPR, 1, kTreeOrder>(one, sums);
  return one[0];
}

// A 16-byte load marked evict-last in L1 and L2 (an L2 policy of
// createpolicy.fractional.L2::evict_last over all lines). The forwards load x
// so: on the H200 the flat and looped forwards ran 0.96-0.98x the time at
// 16384 rows and more (H = 1536-8192, the strided D = 256 view, gated and
// residual rows 0.98-1.00x), the checkpointed steps 0.96-0.99x, with the same
// DRAM bytes (ncu); at 1024-4096 rows 0.94-0.99x, [4096, 4, 256] contiguous
// 1.02x (2026-11-30, L2 cold as bench/l2_flush.h leaves it). The lines stay
// in L2 at that priority after the kernel, as torch.compile's forward leaves
// its input.
__device__ __forceinline__ uint4 LoadEvictLast(const uint4* p) {
  uint4 v;
  asm volatile(
      "{.reg .b64 q;\n"
      "createpolicy.fractional.L2::evict_last.b64 q, 1.0;\n"
      "ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], q;}"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Vector v of the row at element offset `off` (zero if !in), through the
// read-only path: for rows that another CTA reads again soon.
__device__ __forceinline__ uint4 LoadCached(const void* base, int64_t off, int64_t v, bool in) {
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(base) + off);
  return in ? __ldg(src + v) : make_uint4(0, 0, 0, 0);
}

// The packed vectors of the row at element offset `off` (zeros where the row
// or the vector is out of range): plain loads, LoadCached (kCached) or
// LoadEvictLast (kEvictLast).
template <int VPT, bool kCached = false, bool kEvictLast = false>
__device__ __forceinline__ void LoadRow(const void* base, int64_t off, bool active, int lane,
                                        int tpr, int64_t vecs, uint4 (&out)[VPT]) {
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(base) + off);
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int64_t v = lane + int64_t{i} * tpr;
    const bool in = active && v < vecs;
    if constexpr (kCached) {
      out[i] = LoadCached(base, off, v, in);
    } else if constexpr (kEvictLast) {
      out[i] = in ? LoadEvictLast(src + v) : make_uint4(0, 0, 0, 0);
    } else {
      out[i] = in ? src[v] : make_uint4(0, 0, 0, 0);
    }
  }
}

template <int TPR, int VPT, bool kReverse>
__global__ void __launch_bounds__(MaxBlockOf(TPR), MinBlocksOf(TPR))
    RowForward(const RowForwardParams p) {
  ChainedKernelPrologue();
  constexpr int kRows = TPR > 0 ? BlockOf(TPR) / TPR : 1;
  extern __shared__ float wsm[];  // [dim] the weight in FP32
  __shared__ float scratch[2][MaxBlockOf(TPR) / 32];
  SumScratch sums{&scratch[0][0], MaxBlockOf(TPR) / 32};
  const int tpr = TPR > 0 ? TPR : static_cast<int>(blockDim.x);
  const int lane = threadIdx.x % tpr;
  const int group = threadIdx.x / tpr;
  const int64_t rows = p.layout.rows;
  const int64_t vecs = p.layout.dim / kVecElems;
  const float inv_dim = 1.0f / static_cast<float>(p.layout.dim);

  StageWeight(p.w, p.w_fp32, vecs, wsm);

  // Each CTA walks row groups g, g + grid, ...; the x of the next group is
  // loaded before the current one is reduced, so a load is always in flight.
  const int64_t groups = (rows + kRows - 1) / kRows;
  int64_t g = blockIdx.x;
  uint4 raw[VPT];
  {
    const int64_t row = g * kRows + group;
    LoadRow<VPT>(p.x, row < rows ? RowOffset(p.layout, row) : 0, row < rows, lane, tpr, vecs, raw);
  }
  for (; g < groups; g += gridDim.x) {
    const int64_t row = g * kRows + group;
    const bool active = row < rows;
    const int64_t off = active ? RowOffset(p.layout, row) : 0;
    uint4 next[VPT];
    {
      const int64_t nrow = (g + gridDim.x) * kRows + group;
      const bool nactive = g + gridDim.x < groups && nrow < rows;
      LoadRow<VPT>(p.x, nactive ? RowOffset(p.layout, nrow) : 0, nactive, lane, tpr, vecs, next);
    }
    if (p.l2_prefetch && threadIdx.x == 0 && g + 2 * gridDim.x < groups) {
      const int64_t first = (g + 2 * gridDim.x) * kRows;
      const int64_t count = min(int64_t{kRows}, rows - first);
      // The group's lowest address: its last row where the rows run from
      // the last (packed rows, a stride of -dim).
      const int64_t lowest = kReverse ? -(first + count - 1) * p.layout.dim : first * p.layout.dim;
      PrefetchL2(static_cast<const __nv_bfloat16*>(p.x) + lowest, count * p.layout.dim * 2);
      if (p.z != nullptr) {
        PrefetchL2(static_cast<const __nv_bfloat16*>(p.z) + lowest, count * p.layout.dim * 2);
      }
    }
    if (p.residual != nullptr) {
      const uint4* r =
          reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.residual) + off);
      uint4* h = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.h) + off);
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int64_t v = lane + int64_t{i} * tpr;
        if (active && v < vecs) {
          // AddResidual written out: through it the residual's load moves
          // ahead of the unpacking of x and this kernel's code changes.
          float a[8], b[8];
          Unpack(raw[i], a);
          Unpack(r[v], b);
#pragma unroll
          for (int j = 0; j < 8; ++j) a[j] += b[j];
          raw[i] = Pack(a);  // normalize h as rounded
          Store(h + v, raw[i]);
        }
      }
    }
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      float xf[8];
      Unpack(raw[i], xf);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += xf[j] * xf[j];
    }
    ss = GroupSum<TPR>(ss, sums);
    const float rstd = 1.0f / sqrtf(ss * inv_dim + p.eps);

    uint4* y = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.y) + off);
    const uint4* z = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.z) + off);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t v = lane + int64_t{i} * tpr;
      if (!(active && v < vecs)) continue;
      float out[8];
      Unpack(raw[i], out);
#pragma unroll
      for (int j = 0; j < 8; ++j) out[j] = out[j] * rstd * wsm[v * 8 + j];
      if (p.z != nullptr) {
        float zf[8];
        Unpack(z[v], zf);
#pragma unroll
        for (int j = 0; j < 8; ++j) out[j] *= zf[j] * Sigmoid(zf[j]);
      }
      Store(y + v, Pack(out));
    }
    if (active && lane == 0) p.rstd[RstdIndex<kReverse>(p.layout, row)] = rstd;
#pragma unroll
    for (int i = 0; i < VPT; ++i) raw[i] = next[i];
  }
}

// The flat forward (FlatRowConfig, FlatWideRowConfig): one row group per CTA,
// loads issued first, each thread's weight vectors copied into shared memory
// through L1 behind them (no staging loop, no barrier), so that the weight has
// arrived by the time y is formed: read through L1 after the row sum, as it
// was, it cost 3-11% of the time at 1024-4096 rows on the H200 ([1024, 4096]
// 5.8 -> 5.2 us, [4096, 1536] 8.3 -> 7.8, [4096, 4, 256] contiguous 5.7 -> 5.4;
// 16384 rows 0.97-1.00x; 2026-11-30), where the tensor has at most 2^26
// elements (kSlots, FlatWeightSlots). At most 32 registers with one vector per
// thread so 2048 threads per SM keep loads in flight, 40 with two (1536
// threads). TPR = 0: one row of blockDim.x threads (two vectors each, or 3-4 in
// FlatWideRowConfig's 96..256 threads, at 47-56 registers); TPR = 64 or 96
// (DenseFlatRowConfig): row groups of that many threads, four or two to a CTA.
// kDense (the fwd.flat.dense programs): 32 registers with two vectors too;
// with the gate (CTA-wide rows only) z is then loaded after the row sum, and
// at D = 7168-16384 that ran 0.73-0.99x fwd.flat's time on the H200 (the
// gated fwd.flat there: 63-64 registers without the slots, one 1024-thread
// CTA an SM at D = 16384, 0.79 of copy; dense 0.995-1.02 from 16384 rows),
// at D = 4608-6144 0.84-0.96x from 16384 rows but 1.05-1.12x at 2048-8192
// and at D = 4096 1.07-1.12x (2026-12-01,
// bench/results/2026-12-01-h200-gate-fwd-dense.txt). The gated rows of 64
// threads (rmsnorm_silu_gate.fwd.flat.groups): up to 64 registers (four CTAs
// an SM; 48 with the weight's slots, five); at 40 they spilled 4 bytes and
// ran 1.02-1.05x the time of one row a CTA at D = 1024 (H200, 2026-11-30).
constexpr int FlatBlockOf(int tpr) { return tpr == 0 ? kMaxFlatBlock : FlatGroupBlock(tpr); }
constexpr int FlatMinBlocks(int tpr, int vpt, bool dense, bool gate) {
  if (gate && tpr == 64) return 1024 / FlatBlockOf(tpr);
  return (vpt == 1 || dense ? 2048 : 1536) / FlatBlockOf(tpr);
}

__device__ __forceinline__ void LoadWeightL1(const void* w, int w_fp32, int64_t v, float (&f)[8]) {
  if (w_fp32) {
    const float4* p = reinterpret_cast<const float4*>(w) + 2 * v;
    const float4 a = __ldg(p), b = __ldg(p + 1);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
    f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    Unpack(__ldg(reinterpret_cast<const uint4*>(w) + v), f);
  }
}

template <int TPR, int VPT, bool kGate, bool kDense, bool kSlots, bool kReverse>
__global__ void __launch_bounds__(FlatBlockOf(TPR), FlatMinBlocks(TPR, VPT, kDense, kGate))
    RowForwardFlat(const RowForwardParams p) {
  LaunchDependents();
  constexpr int kRows = TPR > 0 ? FlatBlockOf(TPR) / TPR : 1;
  __shared__ float scratch[2][FlatBlockOf(TPR) / 32];
  SumScratch sums{&scratch[0][0], FlatBlockOf(TPR) / 32};
  if constexpr (TPR > 32) sums.SetGroupOf<TPR>(static_cast<int>(threadIdx.x));
  const int tpr = TPR > 0 ? TPR : static_cast<int>(blockDim.x);
  const int lane = TPR > 0 ? static_cast<int>(threadIdx.x) % TPR : static_cast<int>(threadIdx.x);
  const int64_t row = int64_t{blockIdx.x} * kRows + (TPR > 0 ? threadIdx.x / TPR : 0);
  const bool active = row < p.layout.rows;
  const int64_t vecs = p.layout.dim / kVecElems;
  const int64_t off = active ? RowOffset(p.layout, row) : 0;

  // The dense gated rows (kDense with kGate, CTA-wide rows of two vectors)
  // keep z out of the registers across the row sum, so that a thread stays
  // within 32 of them: z's lines are asked into L1 with x, and each vector
  // is loaded as its y is formed.
  constexpr bool kZLate = kGate && kDense;
  uint4 raw[VPT], zr[VPT];
  LoadRow<VPT, false, true>(p.x, off, active, lane, tpr, vecs, raw);
  const uint4* const z_row =
      kGate ? reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.z) + off)
            : nullptr;
  if constexpr (kZLate) {
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t v = lane + int64_t{i} * tpr;
      if (active && v < vecs) PrefetchL1(z_row + v);
    }
  } else if constexpr (kGate) {
    LoadRow<VPT>(p.z, off, active, lane, tpr, vecs, zr);
  }
  // The thread's weight vectors, copied into its own slots while x is in
  // flight (FlatWeightSmemBytes); waited for after the row sum.
  extern __shared__ uint4 wst[];
  if constexpr (kSlots) {
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t v = lane + int64_t{i} * tpr;
      if (active && v < vecs) CopyWeightToSlots(p.w, p.w_fp32, v, i, wst);
    }
    CommitCopies();
  }
  // x, z and the weight, inputs that no kernel of a step writes, are in
  // flight while the kernel before ends (the recompute's first CTAs): with
  // the backward's inputs_before_wait the checkpointed steps ran 0.91-1.00x
  // the time on the H200. As a flag of the launch it spilled the dense
  // CTA-wide instance 8 bytes (4 before); only in the reverse instances,
  // the steps with 16 MiB of x or less ran 1.02-1.06x slower
  // (bench/results/2026-11-30-h200-inputs-before-wait.txt). h is written
  // after the wait.
  WaitForPrerequisites();
  if (p.residual != nullptr) {
    uint4 res[VPT];
    LoadRow<VPT>(p.residual, off, active, lane, tpr, vecs, res);
    uint4* h = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.h) + off);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t v = lane + int64_t{i} * tpr;
      if (!(active && v < vecs)) continue;
      raw[i] = AddResidual(raw[i], res[i]);
      Store(h + v, raw[i]);
    }
  }
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    float xf[8];
    Unpack(raw[i], xf);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += xf[j] * xf[j];
  }
  // In the order of a one-row CTA of TPR threads (kTreeOrder): fwd.flat's
  // rows of H = 1032..1536 are such CTAs, fwd.flat.dense's 96-thread groups.
  ss = GroupSum<TPR, true>(ss, sums);
  const float rstd = 1.0f / sqrtf(ss / static_cast<float>(p.layout.dim) + p.eps);
  if constexpr (kSlots) WaitCopies<0>();

  uint4* y = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.y) + off);
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int64_t v = lane + int64_t{i} * tpr;
    if (!(active && v < vecs)) continue;
    float out[8], wf[8];
    Unpack(raw[i], out);
    if constexpr (kSlots) {
      WeightFromSlots(wst, p.w_fp32, i, wf);
    } else {
      LoadWeightL1(p.w, p.w_fp32, v, wf);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = out[j] * rstd * wf[j];
    if constexpr (kGate) {
      float zf[8];
      Unpack(kZLate ? z_row[v] : zr[i], zf);
#pragma unroll
      for (int j = 0; j < 8; ++j) out[j] *= zf[j] * Sigmoid(zf[j]);
    }
    Store(y + v, Pack(out));
  }
  if (active && lane == 0) p.rstd[RstdIndex<kReverse>(p.layout, row)] = rstd;
}

// The looped forward (LoopRowConfig): one row per CTA. Pass 1 loads the row
// a vector per thread at a time (LoadEvictLast) and sums its squares; pass 2
// loads it again, from L1 or L2 where pass 1 left it, with the weight through
// L1, and streams y out. Nothing of the row stays in registers, so a thread
// needs about 32 of them at any dim and an SM holds 2048 threads. kResidual:
// pass 1 forms h = bf16(x + residual) and stores it (cached: pass 2 reads h
// back, each thread the vectors it wrote).
//
// The loops step by kLoopBlock, a constant, or (kRuntimeStride) by
// blockDim.x: with 4 or more vectors per thread the latter ran 0.91-0.92x
// the time at H = 8192 and 1.03-1.06x at H = 4096-6144 on the H200 (both
// with 256 threads; LoopRuntimeStride picks it). Only the kRuntimeStride
// instance runs CTAs of kWideLoopBlock threads (LoopBlockOf).
constexpr int LoopMaxBlock(bool runtime_stride) { return runtime_stride ? kWideLoopBlock : kLoopBlock; }
template <bool kResidual, bool kRuntimeStride, bool kReverse>
__global__ void __launch_bounds__(LoopMaxBlock(kRuntimeStride), 2048 / LoopMaxBlock(kRuntimeStride))
    RowForwardLoop(const RowForwardParams p) {
  ChainedKernelPrologue();
  constexpr int kMaxBlock = LoopMaxBlock(kRuntimeStride);
  const int64_t stride = kRuntimeStride ? static_cast<int64_t>(blockDim.x) : kLoopBlock;
  __shared__ float scratch[2][kMaxBlock / 32];
  SumScratch sums{&scratch[0][0], kMaxBlock / 32};
  const int64_t row = blockIdx.x;
  const int64_t vecs = p.layout.dim / kVecElems;
  const int64_t off = RowOffset(p.layout, row);
  const uint4* x = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.x) + off);
  uint4* h = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.h) + off);
  float ss = 0.f;
#pragma unroll 2
  for (int64_t v = threadIdx.x; v < vecs; v += stride) {
    uint4 xv = LoadEvictLast(x + v);
    if constexpr (kResidual) {
      xv = AddResidual(
          xv, reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.residual) + off)[v]);
      h[v] = xv;
    }
    float xf[8];
    Unpack(xv, xf);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += xf[j] * xf[j];
  }
  ss = GroupSum<0>(ss, sums);
  const float rstd = 1.0f / sqrtf(ss / static_cast<float>(p.layout.dim) + p.eps);
  // The reversed instance stores rstd here: at the end, with the fused
  // residual and the run-time stride, its index spilled 8 bytes.
  if (kReverse && threadIdx.x == 0) p.rstd[RstdIndex<kReverse>(p.layout, row)] = rstd;
  uint4* y = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.y) + off);
  const uint4* src = kResidual ? h : x;
#pragma unroll 2
  for (int64_t v = threadIdx.x; v < vecs; v += stride) {
    float out[8], wf[8];
    // Four plain 4-byte loads: they find the row in L1. As one 16-byte load
    // through __ldg (the non-coherent path) or __ldcg (L2), pass 2 ran
    // 1.1-2.1x slower on the H200.
    UnpackHalves(src[v], out);
    LoadWeightL1(p.w, p.w_fp32, v, wf);
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = out[j] * rstd * wf[j];
    StoreStreaming(y + v, Pack(out));  // plain stores: 1.02x the time at H = 8192
  }
  if (!kReverse && threadIdx.x == 0) p.rstd[row] = rstd;
}

// The fused backward's row counters (blocks, units, rows; offsets stay
// 64-bit): 32 bits for the 128-thread row groups without the gate and dh_in
// (H = 1640..2048), 64 elsewhere. At 80 registers ptxas spilled 28 bytes of
// that instance with 64-bit counters and 8 with 32-bit ones, which ran
// [16384 | 65536 | 131072, 2048] 0.973-0.987x the time and H = 1792
// 0.956-0.961x on the H200. In the other instances they ran level or
// slower (the 96-thread lockstep rows 1.07-1.10x, spilling 16 bytes where
// they had spilled none); the 128-thread instances with the gate or dh_in
// are not measured (bench/results/2026-11-30-h200-bwd-waves-stages-counters.txt).
template <int TPR, bool kGate, bool kDhIn>
using BwdRowIndex = std::conditional_t<TPR == 128 && !kGate && !kDhIn, uint32_t, int64_t>;

// The fused backward. Its dx, dz and dw formulas are those of ElementGrads
// and AddDwTerm written out: through the helpers its gated instances took
// one register less and ran 2-2.5% slower on the H200 (gated rows of the
// suite), so they stay inline here; keep the two in step. kDhIn: an instance
// for the ring's rows with dh_in bound (BwdDhInEarly). kBf16W: the weight
// is BF16 and kept so in shared memory (BwdBf16WeightSmem).
template <int TPR, int VPT, bool kGate, bool kDhIn = false, bool kBf16W = false>
__global__ void __maxnreg__(BwdInstanceMaxRegs(TPR, VPT, kGate, kDhIn))
    RowBackward(const RowBackwardParams p) {
  LaunchDependents();
  if (!p.inputs_before_wait) WaitForPrerequisites();
  // TPR > 0: BwdBlockOf, or for the det.lockstep program's widths that are
  // not a power of two (instances of their own) BwdLockstepBlockOf, which is
  // BwdBlockOf at a power of two.
  constexpr int kBlock = TPR > 0 ? BwdLockstepBlockOf(TPR, VPT, kGate) : MaxBlockOf(TPR);
  constexpr int kRows = TPR > 0 ? kBlock / TPR : 1;
  // Where a row group of whole warps holds 2 vectors per thread, or 4
  // (BwdWideRing), the next rows are copied asynchronously into a ring of
  // kStages steps (BwdAsyncStages); with several such row groups in the CTA,
  // they reduce their steps in lockstep (BwdBlockOf), each its own rows.
  constexpr int kStages = BwdAsyncStages(TPR, VPT, kGate, kDhIn);
  constexpr int kTensors = kGate ? 3 : 2;  // x, dy (, z)
  // The gated rows of 512 threads with an FP32 weight (BwdZOneStage): z has
  // one slot a vector beside x and dy's kStages, refilled with the next
  // row's z in pass 2 (copy_z).
  constexpr bool kZOneStage = BwdZOneStage(TPR, VPT, kGate, kBf16W);
  constexpr int kStagedTensors = kZOneStage ? 2 : kTensors;
  // Several row groups a CTA through the ring share its steps (the warp
  // rows among them, whose row sums need no barrier).
  constexpr bool kLockstep = kStages > 0 && kRows > 1;
  // Rows per row group and step: 3 for the ungated warp rows of one vector
  // (loaded into registers), 2 for the ring's 512-thread rows
  // (BwdRingPairs), else 1.
  constexpr int kDepth = BwdRowsInFlight(TPR, VPT, kGate);
  static_assert(kStages == 0 || kDepth == 1 || !kLockstep, "two rows a ring step: one group");
  // Whether a ring step's rows may pass its unit's end (they are then
  // zeros; the register-loaded steps check each row as they load it).
  constexpr bool kPartialSteps = kLockstep || kDepth > 1;
  constexpr bool kPrefetch = BwdPrefetchesStep(TPR, VPT, kGate);
  constexpr bool kRstdWithRows = BwdWarpRowSteps(TPR, VPT);
  constexpr bool kFp32Partials = BwdMayWriteFp32Partials(TPR, VPT, kGate);
  // Whether a block's first step is loaded into registers ahead of its
  // loop: with kPrefetch, and in the ungated warp rows (three row groups a
  // step, each next step's loads issued at the end of the step before).
  constexpr bool kFirstStepAhead = kPrefetch || (kStages == 0 && kRstdWithRows);
  static_assert(!kDhIn || (kStages > 0 && !kGate), "dh_in early: the ring's rows, no gate");
  static_assert(!kBf16W || (kGate && kStages > 0 && kRows == 1), "BF16 weight: the gated ring");
  static_assert(!kZOneStage || (kStages == 2 && kRows == 1 && kDepth == 1), "z's stage: one row");
  // [dim] the weight in FP32 (BF16 with kBf16W), then [kRows][dim] FP64
  // for the fold when kRows > 1 without the ring (dim is a multiple of 8,
  // so the fold is 8-byte aligned), or the ring:
  // [kStages][kDepth][kTensors][VPT][threads] vectors, each thread's own (it
  // reads only what it copied, so no barrier guards the ring; with
  // kZOneStage [kStages][2][VPT][threads] and z's [VPT][threads]), followed
  // by the lockstep groups' fold (BwdFoldBytes).
  extern __shared__ float smem[];
  __shared__ float scratch[2][kDepth * kBlock / 32];
  // Where each step's rows are loaded into registers after the step before
  // was reduced (the ungated warp rows), a thread keeps its rows' offsets
  // here from their loads to their stores, where it had computed them
  // twice: on the strided views RowOffset divides by heads, and their
  // backward ran 0.98-0.99x the time on the H200 up to 16384 tokens
  // ([16384, 24, 256] 157.9 -> 155.3 us; packed, the same rows take 152.9)
  // but 1.005x at 65536 (595.2 -> 598.2); the other rows level (2026-12-01).
  constexpr bool kOffsetsKept = kStages == 0 && kFirstStepAhead && !kPrefetch;
  __shared__ int64_t kept_offsets[kOffsetsKept ? kDepth : 1][kOffsetsKept ? kBlock : 1];
  SumScratch sums{&scratch[0][0], kDepth * kBlock / 32};
  const int tpr = TPR > 0 ? TPR : static_cast<int>(blockDim.x);
  // The CTA's threads: a constant where TPR > 0, so that ring slots are
  // constant offsets from a stage's base.
  const int threads = TPR > 0 ? kBlock : static_cast<int>(blockDim.x);
  const int lane = threadIdx.x % tpr;
  const int group = threadIdx.x / tpr;
  if constexpr (kLockstep) sums.first = group * (TPR / 32);
  // Row r's offset. The fused residual has plain rows only, one stride apart
  // (validate.cc; MakeKernelLaunch refuses a plan with other rows), so its
  // dh_in instances multiply: with RowOffset's division
  // by heads compiled in (32-bit), [16384, 2048] ran 1.03x the time on the
  // H200, spilling 68 bytes where it had spilled 60.
  auto row_offset = [&](int64_t r) {
    return kDhIn ? r * p.layout.row_stride : RowOffset(p.layout, r);
  };
  const int64_t dim = p.layout.dim;
  const int vecs = static_cast<int>(dim / kVecElems);  // dim <= kMaxDim
  const float inv_dim = 1.0f / static_cast<float>(dim);
  constexpr bool gate = kGate;  // a template parameter: no z registers without it
  float* const wsm = smem;
  const uint4* const wsm_bf16 = reinterpret_cast<const uint4*>(smem);  // kBf16W
  uint4* const ring = reinterpret_cast<uint4*>(smem + (kBf16W ? dim / 2 : dim));
  // The ring slot of vector i of tensor t of the step's d-th row group in
  // stage `stage` (z's one slot with kZOneStage).
  auto slot_of = [&](int stage, int d, int t, int i) {
    if (kZOneStage && t == 2) return ring + (kStages * 2 * VPT + i) * threads + threadIdx.x;
    uint4* const stage_base = ring + stage * (kDepth * kStagedTensors * VPT) * threads;
    return stage_base + ((d * kStagedTensors + t) * VPT + i) * threads + threadIdx.x;
  };
  // Block b of the partition reads units of `unit` rows: b, b + blocks,
  // b + 2 * blocks, ... (BwdUnitRows).
  // The block count is read from the parameters where it is compared (a
  // local copy changed the 64-bit instances' register allocation: the
  // 96-thread one spilled 24 bytes).
  using Row = BwdRowIndex<TPR, kGate, kDhIn>;
  const Row rows = static_cast<Row>(p.layout.rows);
  const Row unit = static_cast<Row>(p.unit_rows);
  const Row unit_stride = static_cast<Row>(p.blocks) * unit;
  // The steps this CTA takes, block after block, as a stream from which the
  // ring is filled kStages - 1 steps ahead of the step being reduced, across
  // the blocks' edges: copy_next copies this thread's vectors of its rows of
  // the stream's next step into a stage as one group of copies (an empty
  // group past the last row, so that every step commits one and WaitCopies
  // counts steps).
  Row copy_block = blockIdx.x;
  UnitCursorOf<Row> copy = FirstUnit(copy_block, unit, rows);
  // With kZOneStage, z's row of the step copy_next copied last (null past
  // the last row), whose vectors copy_z copies once their slots are read.
  const uint4* z_next = nullptr;
  auto copy_next = [&](int stage) {
    if (kZOneStage) z_next = nullptr;
    if (copy_block < static_cast<Row>(p.blocks)) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        const Row row = copy.at + (kLockstep ? group : 0) + d * kRows;
        if (kPartialSteps && row >= copy.end) continue;
        const int64_t off = row_offset(row);
        const void* const src[3] = {p.x, p.dy, p.z};
        if (kZOneStage) {
          z_next = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.z) + off);
        }
#pragma unroll
        for (int t = 0; t < kStagedTensors; ++t) {
          const uint4* s =
              reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(src[t]) + off);
#pragma unroll
          for (int i = 0; i < VPT; ++i) {
            const int v = lane + i * tpr;
            if (v < vecs) CopyAsync(slot_of(stage, d, t, i), s + v);
          }
        }
      }
      if (!Advance(copy, Row{kRows} * kDepth, unit, unit_stride, rows)) {
        copy_block += gridDim.x;
        copy = FirstUnit(copy_block, unit, rows);
      }
    }
    CommitCopies();
  };
  // Vector i of z_next into its slot (kZOneStage), in a group of its own
  // that pass 2 commits after the step's copy_next: WaitCopies<kStages - 1>
  // then waits for it too.
  auto copy_z = [&](int i) {
    const int v = lane + i * tpr;
    if (z_next != nullptr && v < vecs) CopyAsync(slot_of(0, 0, 2, i), z_next + v);
  };
  int stage = 0;  // the ring stage of the step being reduced
  if constexpr (kStages > 0) {
#pragma unroll
    for (int k = 0; k < kStages - 1; ++k) copy_next(k);
  }
  if constexpr (kZOneStage) {
#pragma unroll
    for (int i = 0; i < VPT; ++i) copy_z(i);
    CommitCopies();
  }

  StageWeight<kBf16W>(p.w, p.w_fp32, vecs, wsm);
  // With inputs_before_wait the ring's first steps and the weight were
  // loaded before it; rstd and dh_in come after. Where a block's first step
  // is loaded into registers ahead of its loop (kFirstStepAhead), the CTA's
  // first block loads its rows before the wait (below).
  bool wait_pending = p.inputs_before_wait;
  if (!kFirstStepAhead && wait_pending) {
    WaitForPrerequisites();
    wait_pending = false;
  }

  for (Row b = blockIdx.x; b < static_cast<Row>(p.blocks); b += gridDim.x) {
    // Kahan sums: the dw total of this thread's columns and its running
    // compensation (the low part lost so far, negated).
    float total[VPT][8], comp[VPT][8];
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) total[i][j] = comp[i][j] = 0.f;
    }
    // The rows of this block, kDepth row groups per step (BwdRowsInFlight):
    // the step's x, dy (and z) are loaded (or copied into the ring) before
    // its first row is reduced, and with kPrefetch (one row group per step
    // of up to 2 vectors, the gate's warp rows among them) the next step's
    // are loaded before the current one is reduced. The row sums of a ring
    // step share one barrier; each thread adds its rows' dw terms in row
    // order, in FP32, and the step's sum enters the Kahan sum once.
    uint4 xr[kDepth][VPT], dyr[kDepth][VPT], zr[kDepth][VPT];
    // Warp rows (kRstdWithRows: several row groups per step, or the gate's
    // one) load their rstd values with their rows, with kPrefetch
    // a step ahead as well (loaded in the step itself, behind the next step's
    // rows, rstd's first use was where the gated backward's warps stalled
    // most: a fifth of ncu's samples; with one row group of the gate per
    // step, loading it with the rows ran 0.95-0.99x the time).
    float rs[kDepth];
    // Loads the row groups of the step at `pos` (rows past its unit's end as
    // zeros), marked evict-last (LoadEvictLast): on the H200 the D = 256 views
    // ran 0.96-0.98x the time with it at 16384+ tokens contiguous and the gated
    // rows 0.96-0.99x, the strided views 1.005-1.009x (2026-11-30); measured
    // again with the offsets kept (kOffsetsKept), plain loads ran the strided
    // views' backward 1.02-1.04x the time (2026-12-01). The ring's copies keep
    // L2's default policy: marked so, the ring instances ran 1.02-1.05x the
    // time from 16384 rows.
    // Without with_rstd only the rows (a constant at each call).
    auto load_step = [&](const UnitCursorOf<Row>& pos, uint4 (&xs)[kDepth][VPT],
                         uint4 (&dys)[kDepth][VPT], uint4 (&zs)[kDepth][VPT],
                         float (&rss)[kDepth], bool with_rstd) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        const Row row = pos.at + group + d * kRows;
        const bool active = row < pos.end;
        const int64_t off = active ? row_offset(row) : 0;
        if constexpr (kOffsetsKept) kept_offsets[d][threadIdx.x] = off;
        LoadRow<VPT, false, true>(p.x, off, active, lane, tpr, vecs, xs[d]);
        LoadRow<VPT, false, true>(p.dy, off, active, lane, tpr, vecs, dys[d]);
        LoadRow<VPT, false, true>(gate ? p.z : p.x, off, gate && active, lane, tpr, vecs, zs[d]);
        if (kRstdWithRows && with_rstd) rss[d] = active ? p.rstd[row] : 0.f;
      }
    };
    UnitCursorOf<Row> step = FirstUnit(b, unit, rows);
    if (kFirstStepAhead && !wait_pending) {
      load_step(step, xr, dyr, zr, rs, true);
    } else if (kFirstStepAhead) {
      // The CTA's first step after another kernel: its rows before the
      // wait, their rstd after (the gate's warp rows: the gated 260x48x128
      // step ran 0.94x the time on the H200; the D = 256 views' checkpointed
      // steps up to 16384 tokens 0.988-0.998x, their backward alone level).
      // With this branch in every step's loads instead, the views' backward
      // ran 1.01-1.02x the time, and L1 prefetches before the wait gained
      // less (bench/results/2026-11-30-h200-bwd-rows-before-wait.txt,
      // ...-dw-reduce-tail.txt).
      load_step(step, xr, dyr, zr, rs, false);
      WaitForPrerequisites();
      wait_pending = false;
      if constexpr (kRstdWithRows) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) {
          const Row row = step.at + group + d * kRows;
          rs[d] = row < step.end ? p.rstd[row] : 0.f;
        }
      }
    }
    for (bool more = true; more;) {
      UnitCursorOf<Row> next = step;
      more = Advance(next, Row{kRows} * kDepth, unit, unit_stride, rows);
      const Row base = step.at;
      const Row end = step.end;
      uint4 nx[kDepth][VPT], ndy[kDepth][VPT], nz[kDepth][VPT];
      float nrs[kDepth];
      const int cur = stage;  // the ring stage of this step's rows
      if constexpr (kStages > 0) {
        // Copy the stream's step kStages - 1 ahead, wait for this one's
        // copies (the newer groups may stay in flight); its rows are read
        // from the ring in each pass.
        copy_next((stage + kStages - 1) % kStages);
        WaitCopies<kStages - 1>();
        stage = stage + 1 == kStages ? 0 : stage + 1;
      } else if (kPrefetch) {
        load_step(next, nx, ndy, nz, nrs, true);
      } else if (!kFirstStepAhead) {
        load_step(step, xr, dyr, zr, rs, true);
      }

      // This thread's vectors of row group d of the step from the ring (cur),
      // zeros past the unit's end: read in each pass rather than held in
      // registers across the row sums.
      auto read_ring = [&](int d, int i) {
        const bool in = !kPartialSteps || base + group + d * kRows < end;
        const uint4 zero = make_uint4(0, 0, 0, 0);
        xr[d][i] = in ? *slot_of(cur, d, 0, i) : zero;
        dyr[d][i] = in ? *slot_of(cur, d, 1, i) : zero;
        zr[d][i] = in && gate ? *slot_of(cur, d, kTensors - 1, i) : zero;
      };
      // Row group d's row of the step and its offset (0 past the unit's end).
      auto row_of = [&](int d) { return base + group + d * kRows; };
      auto offset_of = [&](int d) {
        return row_of(d) < end ? row_offset(row_of(d)) : int64_t{0};
      };
      // The ring's row groups of a step share one row-sum barrier (and the
      // pass over a vector); the warp rows' sums need none, and their passes
      // go row group by row group (in one pass, the three rows' registers
      // spilled).
      constexpr int kJoint = kStages > 0 ? kDepth : 1;
      constexpr bool kKeepSig = kGate && VPT == 1;
      float run[VPT][8];  // the step's dw terms so far (kDepth > 1)
#pragma unroll
      for (int d0 = 0; d0 < kDepth; d0 += kJoint) {
        // Pass 1: the row sums of g * x, g = dy * w [* silu(z)], scaled by
        // rstd only after them (RowCoef), so the rstd loads are not waited for
        // here. With the gate and one vector per thread, sigmoid(z) is kept
        // for pass 2 (with more vectors, keeping it spilled more than
        // recomputing it costs).
        int64_t off[kJoint];
#pragma unroll
        for (int e = 0; e < kJoint; ++e) {
          off[e] = kOffsetsKept ? kept_offsets[d0 + e][threadIdx.x] : offset_of(d0 + e);
        }
        float dot[kJoint];
        float sg[kJoint][VPT][8];
        // The lockstep groups of 64 and 128 threads read their ring row's
        // vectors together, before the math; the other ring rows read each
        // just before its use. On the H200 (2026-11-30) read so, H = 2048
        // ran 1.14-1.17x the time from 16384 rows, where H = 4096 (256
        // threads) ran 0.98-0.99x that of reading ahead (its fused residual
        // 0.98x; the run-time width's rows and two rows a step spilled when
        // read ahead). The warp rows (no barrier between their passes) read
        // each just before its use too: read ahead, they spilled 4-52 bytes
        // and ran 0.99-1.05x the time (H = 264..768, 2026-12-01).
        constexpr bool kReadAhead = kLockstep && TPR > 32 && TPR < 256 && IsPow2(TPR);
        if constexpr (kReadAhead) {
#pragma unroll
          for (int i = 0; i < VPT; ++i) {
            if (lane + i * tpr < vecs) read_ring(d0, i);
          }
        }
#pragma unroll
        for (int e = 0; e < kJoint; ++e) {
          const int d = d0 + e;
          dot[e] = 0.f;
#pragma unroll
          for (int i = 0; i < VPT; ++i) {
            const int v = lane + i * tpr;
            if (v >= vecs) continue;
            if constexpr (kStages > 0 && !kReadAhead) read_ring(d, i);
            float xf[8], dyf[8], zf[8], wf[8];
            Unpack(xr[d][i], xf);
            Unpack(dyr[d][i], dyf);
            Unpack(zr[d][i], zf);
            if constexpr (kBf16W) Unpack(wsm_bf16[v], wf);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              const float sig = gate ? Sigmoid(zf[j]) : 1.f;
              if (kKeepSig) sg[e][i][j] = sig;
              const float s = gate ? zf[j] * sig : 1.f;
              dot[e] += dyf[j] * (kBf16W ? wf[j] : wsm[v * 8 + j]) * s * xf[j];
            }
          }
        }
        // Otherwise (the ring's rows, or one row group per step of a wide
        // row) the rstd loads are issued after pass 1 and waited for across
        // the row sums' barrier (issued earlier, rstd held a register through
        // pass 1 and the wide instances spilled).
        float rstd[kJoint];
#pragma unroll
        for (int e = 0; e < kJoint; ++e) {
          const int d = d0 + e;
          rstd[e] = kRstdWithRows ? rs[d] : row_of(d) < end ? p.rstd[row_of(d)] : 0.f;
        }
        // kDhIn: the rows' dh_in is loaded before the row sums, so that their
        // barrier covers the wait (elsewhere it is loaded as dx is stored);
        // with two row groups a step, into L1 only (held in registers across
        // the barrier, the Kahan sums spilled in the loop).
        constexpr bool kDhInRegs = kDhIn && kJoint == 1;
        uint4 dhr[kJoint][VPT];
        if constexpr (kDhIn) {
#pragma unroll
          for (int e = 0; e < kJoint; ++e) {
            const int d = d0 + e;
            const bool active = row_of(d) < end;
            const uint4* dh_row =
                reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.dh_in) + off[e]);
#pragma unroll
            for (int i = 0; i < VPT; ++i) {
              const int v = lane + i * tpr;
              if (kDhInRegs) {
                dhr[e][i] = active && v < vecs ? dh_row[v] : make_uint4(0, 0, 0, 0);
              } else if (active && v < vecs) {
                PrefetchL1(dh_row + v);
              }
            }
          }
        }
        GroupSums<TPR, kJoint>(dot, sums);
        float c[kJoint];
#pragma unroll
        for (int e = 0; e < kJoint; ++e) c[e] = RowCoef(dot[e], rstd[e], inv_dim);

        // Pass 2: dx, dz, and the dw terms, vector by vector, the row groups
        // of the sums in turn.
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          const int v = lane + i * tpr;
          if (v >= vecs) continue;
#pragma unroll
          for (int e = 0; e < kJoint; ++e) {
            const int d = d0 + e;
            const bool active = row_of(d) < end;
            float xf[8], dyf[8], zf[8], dxf[8], dzf[8], wf[8];
            if constexpr (kStages > 0) read_ring(d, i);
            Unpack(xr[d][i], xf);
            Unpack(dyr[d][i], dyf);
            Unpack(zr[d][i], zf);
            if constexpr (kBf16W) Unpack(wsm_bf16[v], wf);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              const float w = kBf16W ? wf[j] : wsm[v * 8 + j];
              const float sig = kKeepSig ? sg[e][i][j] : gate ? Sigmoid(zf[j]) : 1.f;
              const float s = gate ? zf[j] * sig : 1.f;
              const float rs = gate ? rstd[e] * s : rstd[e];  // dx = dy * w * rs - x * c
              // The dw term is ta * tb, added by an FMA. With the gate, dy * x
              // is exact in FP32 (two BF16 values), so the term carries the
              // roundings of rstd * silu(z) only: at |z| near 30 that halved
              // the worst dw error; dz and the term share dy * x. Without it,
              // dy * rstd serves dx and the term.
              const float dyx = dyf[j] * xf[j];
              const float ry = dyf[j] * rstd[e];
              dxf[j] = gate ? fmaf(dyf[j] * w, rs, -xf[j] * c[e]) : fmaf(ry, w, -xf[j] * c[e]);
              dzf[j] = dyx * w * (rstd[e] * fmaf(s, 1.f - sig, sig));
              const float ta = gate ? dyx : ry;
              const float tb = gate ? rs : xf[j];
              if (kDepth > 1 && d == 0) {
                run[i][j] = ta * tb;
              } else if (d + 1 < kDepth) {
                run[i][j] = fmaf(ta, tb, run[i][j]);
              } else {
                const float term = kDepth > 1 ? fmaf(ta, tb, run[i][j]) - comp[i][j]
                                              : fmaf(ta, tb, -comp[i][j]);
                const float t = total[i][j] + term;
                comp[i][j] = (t - total[i][j]) - term;
                total[i][j] = t;
              }
            }
            // Its slot of z is read (z's values are in this vector's terms).
            if constexpr (kZOneStage) copy_z(i);
            if (!active) continue;
            if (kDhIn || p.dh_in != nullptr) {
              const uint4* dh =
                  reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.dh_in) + off[e]);
              float h[8];
              Unpack(kDhInRegs ? dhr[e][i] : dh[v], h);
#pragma unroll
              for (int j = 0; j < 8; ++j) dxf[j] += h[j];
            }
            Store(reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.dx) + off[e]) + v, Pack(dxf));
            if (gate) {
              Store(reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.dz) + off[e]) + v, Pack(dzf));
            }
          }  // e
        }  // i
        if constexpr (kZOneStage) CommitCopies();
      }  // d0
      if (kPrefetch) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) {
#pragma unroll
          for (int i = 0; i < VPT; ++i) {
            xr[d][i] = nx[d][i];
            dyr[d][i] = ndy[d][i];
            zr[d][i] = nz[d][i];
          }
          rs[d] = nrs[d];
        }
      } else if (kFirstStepAhead && more) {
        load_step(next, xr, dyr, zr, rs, true);  // the next step, after this one
      }
      step = next;
    }

    // The block's dw row: its row groups folded in FP64 in a fixed order.
    if constexpr (kLockstep) {
      // Group after group into one row after the ring (all kStages x
      // kDepth rows of it), value j of a thread's vector i at
      // (i * 8 + j) * TPR + lane (a warp's accesses consecutive), then out
      // in column order.
      double* const fold =
          reinterpret_cast<double*>(ring + kStages * kDepth * kTensors * VPT * kBlock);
      __syncthreads();  // the previous block's fold is read
      for (int g = 0; g < kRows; ++g) {
        if (group == g) {
#pragma unroll
          for (int i = 0; i < VPT; ++i) {
            if (lane + int64_t{i} * TPR >= vecs) continue;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              double& f = fold[(i * 8 + j) * TPR + lane];
              f = (g == 0 ? 0.0 : f) + (static_cast<double>(total[i][j]) - comp[i][j]);
            }
          }
        }
        __syncthreads();
      }
      for (int64_t c = threadIdx.x; c < dim; c += kBlock) {
        const int64_t v = c / 8;
        const double sum = fold[((v / TPR) * 8 + c % 8) * TPR + v % TPR];
        if (p.acc != nullptr) {
          atomicAdd(p.acc + c, sum);
        } else {
          StorePartial<kFp32Partials>(p, int64_t{b} * dim + c, sum);
        }
      }
    } else if constexpr (kRows == 1) {
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int64_t v = lane + int64_t{i} * tpr;
        if (v >= vecs) continue;
        double sum[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) sum[j] = static_cast<double>(total[i][j]) - comp[i][j];
        if (p.acc != nullptr) {
#pragma unroll
          for (int j = 0; j < 8; ++j) atomicAdd(p.acc + v * 8 + j, sum[j]);
        } else {
          StorePartialVector<kFp32Partials>(p, int64_t{b} * dim + v * 8, sum);
        }
      }
    } else {
      double* const fold = reinterpret_cast<double*>(smem + dim);
      __syncthreads();  // the previous block's fold is read
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int64_t v = lane + int64_t{i} * tpr;
        if (v >= vecs) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          fold[group * dim + v * 8 + j] = static_cast<double>(total[i][j]) - comp[i][j];
        }
      }
      __syncthreads();
      for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
        double sum = 0.0;
#pragma unroll
        for (int r = 0; r < kRows; ++r) sum += fold[r * dim + c];
        if (p.acc != nullptr) {
          atomicAdd(p.acc + c, sum);
        } else {
          StorePartial<kFp32Partials>(p, int64_t{b} * dim + c, sum);
        }
      }
    }
  }
}

// Vector v of a dw CTA's warp's batch of rows first, first + kWarps, ...
// (zeros from `end` on), through the read-only path, and with kRstd their
// rstd (else rs is left as it is). zr: the gate only.
template <bool kGate, int kBatch, int kWarps, bool kRstd>
__device__ __forceinline__ void LoadDwBatch(const RowBackwardParams& p, int64_t first, int64_t end,
                                            int64_t v, uint4 (&xr)[kBatch], uint4 (&dyr)[kBatch],
                                            uint4 (&zr)[kBatch], float (&rs)[kBatch]) {
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    const int64_t r = first + b * kWarps;
    const bool in = r < end;
    const int64_t off = in ? RowOffset(p.layout, r) : 0;
    xr[b] = LoadCached(p.x, off, v, in);
    dyr[b] = LoadCached(p.dy, off, v, in);
    if constexpr (kGate) zr[b] = LoadCached(p.z, off, v, in);
    if constexpr (kRstd) rs[b] = in ? p.rstd[r] : 0.f;
  }
}

// A dw CTA of the split backward adds its warp's batch of rows first, first
// + kWarps, ... (those from `end` on left out) to its Kahan sums: the batch's
// terms summed in FP32 (up to 4, from -comp), then added to the Kahan sums
// once: 0.97-1.01x the time of a Kahan step per term on the H200, most rows
// 0.98-0.99x (2026-11-30). zr: the gate only.
template <bool kGate, int kBatch, int kWarps>
__device__ __forceinline__ void AddDwBatch(const uint4 (&xr)[kBatch], const uint4 (&dyr)[kBatch],
                                           const uint4 (&zr)[kBatch], const float (&rs)[kBatch],
                                           int64_t first, int64_t end, float (&total)[8],
                                           float (&comp)[8]) {
  float batch[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) batch[j] = -comp[j];
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    if (first + b * kWarps >= end) break;
    float xf[8], dyf[8], zf[8] = {};
    Unpack(xr[b], xf);
    Unpack(dyr[b], dyf);
    if constexpr (kGate) Unpack(zr[b], zf);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      batch[j] = DwTermPlus<kGate>(xf[j], dyf[j], GateOf<kGate>(zf[j]).s, rs[b], batch[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) KahanAdd(batch[j], total[j], comp[j]);
}

// The split backward (SplitRowConfig, SplitPartitionOf): one launch of two
// roles, in CTA order block by block of the partition: the block's dx CTAs
// (kGroups row groups each, SplitGroupsOf, all their loads issued before
// their row sums, which share one barrier; dx and dz from x, dy, z, rstd and
// the weight, read through L1 once for all row groups; thread 0 first asks
// L2 for the rows p.l2_ahead_rows past the CTA's, SplitL2AheadRows), then
// its dw CTAs, one per 256-column
// tile: warp k sums rows begin + k, + 8, ... in order, four rows' loads in
// flight (two with z), with Kahan FP32 sums per column, and the 8 warps are
// folded in FP64 in warp order into partials[block][columns]. The two roles
// read the same rows at about the same time, so one of them finds them in
// L2; both load them cached. The dw term is the fused backward's; partition and order
// are functions of the shape only.
// 80 registers (768 threads per SM): at 64 the dw role's four rows in
// flight spilled.
template <int TPR, int VPT, bool kGate, int kGroups>
__global__ void __launch_bounds__(kSplitBlock, 768 / kSplitBlock)
    RowBackwardSplit(const RowBackwardParams p) {
  LaunchDependents();
  if (!p.inputs_before_wait) WaitForPrerequisites();
  constexpr int kRows = kSplitBlock / TPR;
  constexpr int kWarps = kSplitBlock / 32;
  constexpr bool kFp32Partials = BwdMayWriteFp32Partials(TPR, VPT, kGate);
  __shared__ float scratch[2][kGroups * kWarps];
  SumScratch sums{&scratch[0][0], kGroups * kWarps};
  // Row groups narrower than the CTA (64 or 128 threads): this group's warps.
  if constexpr (TPR > 32 && TPR < kSplitBlock) sums.SetGroupOf<TPR>(static_cast<int>(threadIdx.x));
  __shared__ double fold[kWarps][32 * 8];
  const int64_t rows = p.layout.rows;
  const int64_t dim = p.layout.dim;
  const int64_t vecs = dim / kVecElems;
  const int64_t tiles = (vecs + 31) / 32;
  const int64_t dx_ctas = p.rows_per_block / (kRows * kGroups);  // per block
  const int64_t block = blockIdx.x / (dx_ctas + tiles);
  const int64_t k = blockIdx.x - block * (dx_ctas + tiles);

  if (k < dx_ctas) {
    const int lane = static_cast<int>(threadIdx.x) % TPR;
    const int64_t first = block * p.rows_per_block + k * kRows * kGroups + threadIdx.x / TPR;
    if (p.l2_ahead_rows > 0 && threadIdx.x == 0) {  // SplitL2AheadRows: packed rows
      const int64_t ahead = first + p.l2_ahead_rows;
      if (ahead < rows) {
        const int64_t bytes = min(int64_t{kRows * kGroups}, rows - ahead) * dim * 2;
        PrefetchL2(static_cast<const __nv_bfloat16*>(p.x) + ahead * dim, bytes);
        PrefetchL2(static_cast<const __nv_bfloat16*>(p.dy) + ahead * dim, bytes);
        if constexpr (kGate) PrefetchL2(static_cast<const __nv_bfloat16*>(p.z) + ahead * dim, bytes);
      }
    }
    uint4 xr[kGroups][VPT], dyr[kGroups][VPT], zr[kGroups][VPT];
    // Each row's rstd is loaded with its rows, but where four row groups
    // fill the registers (one vector per thread), after their row sums: with
    // the rows, the CTA-wide instance spilled 16 bytes; after them, the
    // instances of 2 and 4 vectors per thread (one or two row groups) ran
    // 1.02-1.06x the time at 4096 rows on the H200.
    constexpr bool kRstdAfterSums = kGroups == 4;
    float rstd[kGroups];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int64_t row = first + g * kRows;
      const bool active = row < rows;
      const int64_t off = active ? RowOffset(p.layout, row) : 0;
      LoadRow<VPT, true>(p.x, off, active, lane, TPR, vecs, xr[g]);
      LoadRow<VPT, true>(p.dy, off, active, lane, TPR, vecs, dyr[g]);
      if constexpr (kGate) LoadRow<VPT, true>(p.z, off, active, lane, TPR, vecs, zr[g]);
    }
    // With inputs_before_wait the rows were loaded before it; rstd after.
    if (p.inputs_before_wait) WaitForPrerequisites();
    if constexpr (!kRstdAfterSums) {
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int64_t row = first + g * kRows;
        rstd[g] = row < rows ? p.rstd[row] : 0.f;
      }
    }
    // The weight of this thread's columns: where several row groups hold up
    // to 4 vectors a thread in all, loaded once for all of them; else read
    // through L1 in each pass (kept in registers, it spilled with one row
    // group of 4 vectors and with two of 3).
    constexpr bool kKeepW = kGroups > 1 && kGroups * VPT <= 4;
    float wk[kKeepW ? VPT : 1][8];
    if constexpr (kKeepW) {
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int64_t v = lane + int64_t{i} * TPR;
        if (v < vecs) LoadWeightL1(p.w, p.w_fp32, v, wk[i]);
      }
    }
    auto weight = [&](int i, int64_t v, float (&wf)[8]) {
      if constexpr (kKeepW) {
#pragma unroll
        for (int j = 0; j < 8; ++j) wf[j] = wk[i][j];
      } else {
        LoadWeightL1(p.w, p.w_fp32, v, wf);
      }
    };
    // The row sums of all row groups behind one barrier (a CTA-wide row; one
    // per row group before: 0.97-0.98x the time at 1024 rows of H = 1536 and
    // 2048, four row groups, on the H200).
    float dot[kGroups];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      dot[g] = 0.f;
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int64_t v = lane + int64_t{i} * TPR;
        if (v >= vecs) continue;
        float xf[8], dyf[8], wf[8], zf[8] = {};  // z: gate only
        Unpack(xr[g][i], xf);
        Unpack(dyr[g][i], dyf);
        weight(i, v, wf);
        if constexpr (kGate) Unpack(zr[g][i], zf);
#pragma unroll
        for (int j = 0; j < 8; ++j) dot[g] += DotTerm(xf[j], dyf[j], wf[j], GateOf<kGate>(zf[j]).s);
      }
    }
    // Every thread of the CTA reaches this (a CTA-wide row synchronizes).
    GroupSums<TPR, kGroups>(dot, sums);
    if constexpr (kRstdAfterSums) {
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int64_t row = first + g * kRows;
        rstd[g] = row < rows ? p.rstd[row] : 0.f;
      }
    }
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int64_t row = first + g * kRows;
      if (row >= rows) continue;
      const int64_t off = RowOffset(p.layout, row);
      const float c = RowCoef(dot[g], rstd[g], 1.0f / static_cast<float>(dim));
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int64_t v = lane + int64_t{i} * TPR;
        if (v >= vecs) continue;
        float xf[8], dyf[8], wf[8], dxf[8], dzf[8], zf[8] = {};
        Unpack(xr[g][i], xf);
        Unpack(dyr[g][i], dyf);
        weight(i, v, wf);
        if constexpr (kGate) Unpack(zr[g][i], zf);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          ElementGrads<kGate>(xf[j], dyf[j], wf[j], GateOf<kGate>(zf[j]), rstd[g], c, dxf[j],
                              dzf[j]);
        }
        StoreGrads<kGate>(p, off, v, dxf, dzf);
      }
    }
    return;
  }

  // A dw CTA: tile k - dx_ctas of the block.
  const int64_t tile = k - dx_ctas;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t v = tile * 32 + lane;
  const int64_t begin = block * p.rows_per_block;
  const int64_t end = min(rows, begin + p.rows_per_block);
  float total[8], comp[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) total[j] = comp[j] = 0.f;
  constexpr int kBatch = kGate ? 2 : 4;  // rows of a warp in flight
  int64_t from = begin + warp;  // the loop's first batch
  if (p.inputs_before_wait) {
    // The first batch's rows before the wait, their rstd after it, summed
    // as the loop below sums a batch.
    const int64_t r0 = v < vecs ? from : end;
    uint4 xr[kBatch], dyr[kBatch], zr[kBatch];
    float rs[kBatch];
    LoadDwBatch<kGate, kBatch, kWarps, false>(p, r0, end, v, xr, dyr, zr, rs);
    WaitForPrerequisites();
#pragma unroll
    for (int b = 0; b < kBatch; ++b) rs[b] = r0 + b * kWarps < end ? p.rstd[r0 + b * kWarps] : 0.f;
    AddDwBatch<kGate, kBatch, kWarps>(xr, dyr, zr, rs, r0, end, total, comp);
    from += kBatch * kWarps;
  }
  if (v < vecs) {
    for (int64_t first = from; first < end; first += kBatch * kWarps) {
      uint4 xr[kBatch], dyr[kBatch], zr[kBatch];
      float rs[kBatch];
      LoadDwBatch<kGate, kBatch, kWarps, true>(p, first, end, v, xr, dyr, zr, rs);
      AddDwBatch<kGate, kBatch, kWarps>(xr, dyr, zr, rs, first, end, total, comp);
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) fold[warp][lane * 8 + j] = static_cast<double>(total[j]) - comp[j];
  __syncthreads();
  // Column c of the tile: the 8 warps' sums in warp order.
  const int64_t tile_first = tile * 32 * 8;
  for (int c = static_cast<int>(threadIdx.x); c < 32 * 8; c += kSplitBlock) {
    if (tile_first + c >= dim) continue;
    double sum = 0.0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += fold[w][c];
    StorePartial<kFp32Partials>(p, block * dim + tile_first + c, sum);
  }
}

__device__ __forceinline__ void StoreDw(void* dw, int64_t c, double sum, int store) {
  switch (store) {
    case kDwStoreFp32: static_cast<float*>(dw)[c] = static_cast<float>(sum); break;
    case kDwStoreBf16: static_cast<__nv_bfloat16*>(dw)[c] = __double2bfloat16(sum); break;
    default: static_cast<float*>(dw)[c] = static_cast<float>(static_cast<float*>(dw)[c] + sum); break;
  }
}

// T: the partial rows' element, double or float (DwReduceParams). The CTA
// is blockDim.x columns (DwReduceColumns, up to 32) by kDwReduceLanes lanes:
// as many warps as columns.
template <typename T>
__global__ void __launch_bounds__(kDwReduceLanes * 32) DwReduce(const DwReduceParams p) {
  ChainedKernelPrologue();
  __shared__ double lanes[kDwReduceLanes][33];
  const int columns = static_cast<int>(blockDim.x);
  const int64_t c = int64_t{blockIdx.x} * columns + threadIdx.x;
  double acc = 0.0;
  if (c < p.dim) {
    const T* partials = static_cast<const T*>(p.partials);
    for (int64_t q = threadIdx.y; q < p.count; q += kDwReduceLanes) acc += partials[q * p.dim + c];
  }
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  // The lane sums, pairwise in a fixed tree (lane y adds lane y + half), by
  // warp j for column j of the CTA behind one barrier: against a barrier per
  // level of the tree, the backward at 1024 rows and gated 260x48x128 ran
  // 0.976-0.99x the time on the H200, the sums bit for bit the same
  // (2026-11-30).
  static_assert(kDwReduceLanes == 32, "a warp's shuffles sum a column's lanes");
  const int thread = static_cast<int>(threadIdx.y) * columns + static_cast<int>(threadIdx.x);
  const int warp = thread / 32, lane = thread % 32;  // `columns` warps
  double sum = lanes[lane][warp];
#pragma unroll
  for (int half = kDwReduceLanes / 2; half > 0; half /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, half);
  }
  const int64_t column = int64_t{blockIdx.x} * columns + warp;
  if (lane == 0 && column < p.dim) StoreDw(p.dw, column, sum, p.store);
}

__global__ void __launch_bounds__(kZeroBlock) ZeroWords(const ZeroParams p) {
  ChainedKernelPrologue();
  for (int64_t i = int64_t{blockIdx.x} * kZeroBlock + threadIdx.x; i < p.words;
       i += int64_t{gridDim.x} * kZeroBlock) {
    p.dst[i] = 0;
  }
}

__global__ void __launch_bounds__(256) DwFinish(const DwFinishParams p) {
  ChainedKernelPrologue();
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c < p.dim) StoreDw(p.dw, c, p.acc[c], p.store);
}

}  // namespace

// The row configs the launch rules produce for dims 8..16384
// (tests/ops/registry_test.cc checks that every dim finds its kernel).
#define CAKE_FWD_CONFIGS(X)                                                          \
  X(8, 1) X(16, 1) X(32, 1) X(32, 2) X(32, 4) X(64, 1) X(64, 2) X(64, 4) X(128, 4) \
  X(256, 4) X(512, 4)
#define CAKE_BWD_CONFIGS(X)                                                                 \
  X(8, 1) X(16, 1) X(32, 1) X(32, 2) X(32, 3) X(32, 4) X(64, 2) X(128, 2) X(256, 2) X(512, 2) X(512, 4) X(0, 2) X(0, 4)

const void* RowForwardKernel(int threads_per_row, int vecs_per_thread, bool reverse) {
#define CAKE_FWD(T, V)                                                         \
  if (threads_per_row == T && vecs_per_thread == V) {                          \
    return reverse ? reinterpret_cast<const void*>(&RowForward<T, V, true>)   \
                   : reinterpret_cast<const void*>(&RowForward<T, V, false>); \
  }
  CAKE_FWD_CONFIGS(CAKE_FWD)
#undef CAKE_FWD
  return nullptr;
}

#define CAKE_FLAT_CONFIGS(X) X(8, 1) X(16, 1) X(16, 2) X(32, 2) X(0, 2)
// FlatRowConfig's 64-thread row groups: without the gate in fwd.flat, with it
// in rmsnorm_silu_gate.fwd.flat.groups (GateFlatRowConfig has none).
#define CAKE_FLAT_GROUP_CONFIGS(X) X(64, 2)
// Two vectors per thread at 32 registers (kDense), without the gate; with
// one vector the plain instances hold 2048 threads per SM already.
#define CAKE_FLAT_DENSE_CONFIGS(X) X(16, 2) X(32, 2) X(64, 2) X(96, 2) X(0, 2)
// FlatWideRowConfig's CTA-wide rows of 3 and 4 vectors per thread, without
// the gate.
#define CAKE_FLAT_WIDE_CONFIGS(X) X(0, 3) X(0, 4)

const void* RowForwardFlatKernel(const RowConfig& cfg, bool gate, bool dense, bool slots,
                                 bool reverse) {
  // 0: one row of blockDim.x threads.
  const int threads_per_row = cfg.threads_per_row < cfg.block ? cfg.threads_per_row : 0;
  const int vecs_per_thread = cfg.vecs_per_thread;
#define CAKE_FLAT_OF_R(T, V, G, D, R)                                           \
  (slots ? reinterpret_cast<const void*>(&RowForwardFlat<T, V, G, D, true, R>) \
         : reinterpret_cast<const void*>(&RowForwardFlat<T, V, G, D, false, R>))
#define CAKE_FLAT_OF(T, V, G, D) \
  (reverse ? CAKE_FLAT_OF_R(T, V, G, D, true) : CAKE_FLAT_OF_R(T, V, G, D, false))
  if (dense && vecs_per_thread > 1) {
    if (gate) {  // CTA-wide rows only (rmsnorm_silu_gate.fwd.flat.dense)
      return threads_per_row == 0 && vecs_per_thread == 2 ? CAKE_FLAT_OF(0, 2, true, true)
                                                          : nullptr;
    }
#define CAKE_FLAT_DENSE(T, V) \
  if (threads_per_row == T && vecs_per_thread == V) return CAKE_FLAT_OF(T, V, false, true);
    CAKE_FLAT_DENSE_CONFIGS(CAKE_FLAT_DENSE)
#undef CAKE_FLAT_DENSE
    return nullptr;
  }
#define CAKE_FLAT(T, V)                                                                  \
  if (threads_per_row == T && vecs_per_thread == V) {                                    \
    return gate ? CAKE_FLAT_OF(T, V, true, false) : CAKE_FLAT_OF(T, V, false, false); \
  }
  CAKE_FLAT_CONFIGS(CAKE_FLAT)
  CAKE_FLAT_GROUP_CONFIGS(CAKE_FLAT)
#undef CAKE_FLAT
  if (gate) return nullptr;
#define CAKE_FLAT_PLAIN(T, V) \
  if (threads_per_row == T && vecs_per_thread == V) return CAKE_FLAT_OF(T, V, false, false);
  CAKE_FLAT_WIDE_CONFIGS(CAKE_FLAT_PLAIN)
#undef CAKE_FLAT_PLAIN
#undef CAKE_FLAT_OF
#undef CAKE_FLAT_OF_R
  return nullptr;
}

#define CAKE_BWD_DH_IN_CONFIGS(X) X(32, 2) X(32, 3) X(32, 4) X(64, 2) X(128, 2) X(256, 2) X(512, 2) X(0, 2) X(512, 4) X(0, 4)
// The det.lockstep program's width that is not a power of two
// (BwdLockstepWidth), without the gate.
#define CAKE_BWD_LOCKSTEP_CONFIGS(X) X(96, 2)

const void* RowBackwardKernel(int threads_per_row, int vecs_per_thread, bool gate, bool dh_in,
                              int block, bool w_fp32) {
  const bool early_dh_in = dh_in && !gate && BwdDhInEarly(threads_per_row, vecs_per_thread);
  if (!dh_in && BwdBf16WeightSmem(threads_per_row, vecs_per_thread, gate, w_fp32)) {
    return reinterpret_cast<const void*>(&RowBackward<512, 4, true, false, true>);
  }
  if (threads_per_row > 32 && !IsPow2(threads_per_row)) {
    if (block > threads_per_row) {  // lockstep row groups of this width
      if (gate) return nullptr;
#define CAKE_BWD_LOCKSTEP(T, V)                                                   \
  if (threads_per_row == T && vecs_per_thread == V) {                             \
    return early_dh_in ? reinterpret_cast<const void*>(&RowBackward<T, V, false, true>) \
                       : reinterpret_cast<const void*>(&RowBackward<T, V, false>);      \
  }
      CAKE_BWD_LOCKSTEP_CONFIGS(CAKE_BWD_LOCKSTEP)
#undef CAKE_BWD_LOCKSTEP
      return nullptr;
    }
    // A wide row of whole warps in a CTA of its own runs the instance whose
    // threads per row is the CTA size.
    threads_per_row = 0;
  }
  if (early_dh_in) {
#define CAKE_BWD_DH_IN(T, V)                                                \
  if (threads_per_row == T && vecs_per_thread == V) {                       \
    return reinterpret_cast<const void*>(&RowBackward<T, V, false, true>); \
  }
    CAKE_BWD_DH_IN_CONFIGS(CAKE_BWD_DH_IN)
#undef CAKE_BWD_DH_IN
    return nullptr;
  }
#define CAKE_BWD(T, V)                                                    \
  if (threads_per_row == T && vecs_per_thread == V) {                     \
    return gate ? reinterpret_cast<const void*>(&RowBackward<T, V, true>) \
                : reinterpret_cast<const void*>(&RowBackward<T, V, false>); \
  }
  CAKE_BWD_CONFIGS(CAKE_BWD)
#undef CAKE_BWD
  return nullptr;
}

// (threads per row, vectors per thread, row groups per dx CTA) of every
// SplitRowConfig and SplitGroupsOf, without z and with it.
#define CAKE_SPLIT_CONFIGS(X)                                                              \
  X(8, 1, 2) X(16, 1, 4) X(32, 1, 4) X(32, 2, 2) X(64, 2, 2) X(128, 2, 2) X(128, 3, 2) \
  X(256, 2, 2) X(256, 3, 2) X(256, 3, 1) X(256, 4, 1)
#define CAKE_SPLIT_GATE_CONFIGS(X)                                                          \
  X(8, 1, 2) X(16, 1, 2) X(32, 1, 2) X(32, 2, 1) X(64, 2, 1) X(128, 2, 1) X(128, 3, 1) \
  X(256, 2, 1) X(256, 3, 1) X(256, 4, 1)

const void* RowBackwardSplitKernel(int threads_per_row, int vecs_per_thread, bool gate,
                                   int groups) {
#define CAKE_SPLIT(T, V, G, GATE)                                            \
  if (threads_per_row == T && vecs_per_thread == V && groups == G) {         \
    return reinterpret_cast<const void*>(&RowBackwardSplit<T, V, GATE, G>); \
  }
#define CAKE_SPLIT_Z(T, V, G) CAKE_SPLIT(T, V, G, true)
#define CAKE_SPLIT_NO_Z(T, V, G) CAKE_SPLIT(T, V, G, false)
  if (gate) {
    CAKE_SPLIT_GATE_CONFIGS(CAKE_SPLIT_Z)
  } else {
    CAKE_SPLIT_CONFIGS(CAKE_SPLIT_NO_Z)
  }
#undef CAKE_SPLIT_NO_Z
#undef CAKE_SPLIT_Z
#undef CAKE_SPLIT
  return nullptr;
}

template <bool kReverse>
const void* RowForwardLoopOf(bool residual, bool runtime_stride) {
  if (runtime_stride) {
    return residual ? reinterpret_cast<const void*>(&RowForwardLoop<true, true, kReverse>)
                    : reinterpret_cast<const void*>(&RowForwardLoop<false, true, kReverse>);
  }
  return residual ? reinterpret_cast<const void*>(&RowForwardLoop<true, false, kReverse>)
                  : reinterpret_cast<const void*>(&RowForwardLoop<false, false, kReverse>);
}

const void* RowForwardLoopKernel(bool residual, bool runtime_stride, bool reverse) {
  return reverse ? RowForwardLoopOf<true>(residual, runtime_stride)
                 : RowForwardLoopOf<false>(residual, runtime_stride);
}

const void* DwReduceKernel(bool fp32_partials) {
  return fp32_partials ? reinterpret_cast<const void*>(&DwReduce<float>)
                       : reinterpret_cast<const void*>(&DwReduce<double>);
}
const void* DwFinishKernel() { return reinterpret_cast<const void*>(&DwFinish); }
const void* ZeroWordsKernel() { return reinterpret_cast<const void*>(&ZeroWords); }

}  // namespace cake
