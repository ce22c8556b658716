// Parameters and kernel handles of the row programs (rmsnorm_train and
// rmsnorm_silu_gate_train) and of the dw reduce and finish. Plain C++ with no
// Abseil so that both the host code and the .cu files include it.
#ifndef CAKE_OPS_ROW_KERNELS_H_
#define CAKE_OPS_ROW_KERNELS_H_

#include <cstdint>

#include "ops/row_config.h"

namespace cake {

// Where row r of the activation tensors starts: token = r / heads,
// head = r % heads, offset = token * token_stride + head * head_stride
// (elements, 64-bit); that is r * row_stride where the rows follow each
// other at one stride (one head, or heads back to back in a token), and
// row_stride is 0 where they do not (MakeRowLayout). Then r / heads is a
// multiply and a shift where r < 2^31 (heads_mul != 0, HeadsQuotient32).
struct RowLayout {
  int64_t rows;
  int64_t heads;
  int64_t dim;
  int64_t token_stride;
  int64_t head_stride;
  int64_t row_stride;
  uint32_t heads_mul;   // ceil(2^(31 + heads_log2) / heads), 0: divide
  uint32_t heads_log2;  // ceil(log2(heads))
};

#if defined(__CUDACC__)
#define CAKE_HOST_DEVICE __host__ __device__
#else
#define CAKE_HOST_DEVICE
#endif

// The high 32 bits of a * b.
CAKE_HOST_DEVICE inline uint32_t MulHi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
#endif
}

// r / heads for r < 2^31 where heads_mul != 0. With m = ceil(2^k / heads),
// k = 31 + ceil(log2(heads)), the error of r * m / 2^k against r / heads is
// r * (m * heads - 2^k) / (heads * 2^k) < 2^31 * heads / (heads * 2^k) <=
// 1 / heads, too small to reach the next integer, so the floor is exact for
// every r < 2^31 (and m fits in 32 bits). In 32-bit words: 2r fits, and
// (2r * m) >> 32 >> (k - 31) = (r * m) >> k.
CAKE_HOST_DEVICE inline uint32_t HeadsQuotient32(const RowLayout& l, uint32_t r) {
  return MulHi32(r << 1, l.heads_mul) >> l.heads_log2;
}

// The element offset of row r.
CAKE_HOST_DEVICE inline int64_t RowOffset(const RowLayout& l, int64_t r) {
  // Rows at one stride (packed rows, contiguous views): no division.
  if (l.row_stride != 0) return r * l.row_stride;
  if (l.heads_mul != 0) {
    // Token and head in 32 bits, each a 32-bit factor of its stride: with
    // both in 64-bit words the strided views' backward ran 1.02-1.03x the
    // time on the H200 ([16384, 24, 256] 162.5 against 157.1 us; 2026-12-01,
    // bench/results/2026-12-01-h200-strided-offsets.txt).
    const uint32_t r32 = static_cast<uint32_t>(r);
    const uint32_t t = HeadsQuotient32(l, r32);
    const uint32_t h = r32 - t * static_cast<uint32_t>(l.heads);
    return int64_t{t} * l.token_stride + int64_t{h} * l.head_stride;
  }
  const int64_t t = r / l.heads;
  return t * l.token_stride + (r - t * l.heads) * l.head_stride;
}

// A position in a backward block's rows (RowBackwardParams.unit_rows): row
// `at` of the unit that ends at `end`. Block b's first unit starts at
// b * unit; Advance moves n rows on, into the block's next unit (`stride`
// rows after this one's first) past this unit's end, and returns false once
// past the block's last row (a unit that ends at `rows` is the last one).
// Row is int64_t, or uint32_t in the kernels that count rows in 32 bits
// (rows <= kMaxRows = 2^31): a block's next unit starts `stride` (the
// blocks times the unit) after one that ends before `rows`, so below
// 2 * kMaxRows.
template <typename Row>
struct UnitCursorOf {
  Row at, end;
};
using UnitCursor = UnitCursorOf<int64_t>;
template <typename Row>
CAKE_HOST_DEVICE inline UnitCursorOf<Row> FirstUnit(Row block, Row unit, Row rows) {
  const Row at = block * unit;
  return {at, at + unit < rows ? at + unit : rows};
}
template <typename Row>
CAKE_HOST_DEVICE inline bool Advance(UnitCursorOf<Row>& c, Row n, Row unit, Row stride, Row rows) {
  c.at += n;
  if (c.at < c.end) return true;
  if (c.end >= rows) return false;
  c.at = c.end - unit + stride;
  c.end = c.at + unit < rows ? c.at + unit : rows;
  return c.at < rows;
}

inline RowLayout MakeRowLayout(int64_t rows, int64_t heads, int64_t dim, int64_t token_stride,
                               int64_t head_stride) {
  const int64_t row_stride = heads == 1                            ? token_stride
                             : token_stride == heads * head_stride ? head_stride
                                                                   : 0;
  RowLayout l{rows, heads, dim, token_stride, head_stride, row_stride, 0, 0};
  if (heads >= 1 && heads <= (int64_t{1} << 31) && rows <= (int64_t{1} << 31)) {
    int log2 = 0;
    while ((int64_t{1} << log2) < heads) ++log2;
    l.heads_log2 = static_cast<uint32_t>(log2);
    l.heads_mul = static_cast<uint32_t>(((uint64_t{1} << (31 + log2)) + heads - 1) / heads);
  }
  return l;
}

// Forward: y = bf16(h * rstd * w [* silu(z)]), rstd = 1 / sqrt(mean(h^2) + eps),
// h = x, or h = bf16(x + residual) written out with the fused residual.
// Moves 4 * rows * dim bytes (+ 2 * rows * dim per extra input/output) and
// 4 * rows for rstd.
struct RowForwardParams {
  RowLayout layout;
  const void* x;         // BF16
  const void* residual;  // BF16 or null
  void* h;               // BF16, written when residual is set
  const void* z;         // BF16 gate or null
  const void* w;         // BF16 or FP32 [dim]
  void* y;               // BF16
  float* rstd;           // [rows]
  float eps;
  int w_fp32;
  // Packed rows only (row r at r * dim): the CTA prefetches its row group
  // after next (x, and z with the gate) into L2 with a bulk prefetch, so the
  // next group's loads find it there.
  int l2_prefetch;
};

// `p` walking its rows from the last: row r of the result is row
// rows - 1 - r of `p`'s tensors (x, residual, h, z and y start at the last
// row, the layout's strides negated; HeadsQuotient32's divisor is unchanged),
// for the kernels' reverse instances, which write rstd in the tensors'
// order. Packed rows, contiguous and strided views alike.
inline void ReverseRows(RowForwardParams& p) {
  RowLayout& l = p.layout;
  if (l.rows <= 0) return;
  const int64_t bytes = RowOffset(l, l.rows - 1) * 2;  // BF16
  auto move = [bytes](auto* ptr) { return ptr == nullptr ? ptr : ptr + bytes; };
  p.x = move(static_cast<const char*>(p.x));
  p.residual = move(static_cast<const char*>(p.residual));
  p.z = move(static_cast<const char*>(p.z));
  p.h = move(static_cast<char*>(p.h));
  p.y = move(static_cast<char*>(p.y));
  l.token_stride = -l.token_stride;
  l.head_stride = -l.head_stride;
  l.row_stride = -l.row_stride;
}

// Backward over a partition of rows into blocks of up to rows_per_block
// (whose rows come in units of unit_rows, interleaved across blocks): each
// thread sums its rows' dw terms in FP32 with Kahan compensation, the row
// groups of a CTA are folded in FP64, and block b either writes one partial
// row partials[b * dim + c] (det; FP64, or rounded once to FP32 where
// DwPartialBytes says 4) or adds its sum into acc[c] with
// FP64 atomics (kb). No FP32 sum ever runs over more than one thread's rows
// uncompensated, so the dw error does not grow with T. Per row, with xhat = x * rstd and g = dy * w [* silu(z)]:
//   dx = rstd * (g - xhat * mean(g * xhat)) [+ dh_in]
//   dz = dy * xhat * w * silu'(z)                      (gate)
//   dw += dy * xhat [* silu(z)]
// Moves 6 * rows * dim bytes (+ 4 * rows * dim with the gate, + 2 * rows * dim
// with dh_in) and 4 * rows for rstd.
struct RowBackwardParams {
  RowLayout layout;
  const void* x;  // BF16: x, or h with the fused residual
  const void* z;  // BF16 gate or null
  const void* dy;
  const void* dh_in;  // BF16 or null
  const void* w;
  const float* rstd;
  void* dx;
  void* dz;  // BF16, with the gate
  void* partials;  // det: [blocks][dim] of FP64, or FP32 with partials_fp32; or null
  double* acc;      // kb: [dim] zeroed FP64 accumulator, or null
  int64_t rows_per_block;
  int64_t blocks;
  // Block b reads units b, b + blocks, b + 2 * blocks, ... of unit_rows
  // rows each: one step of the kernel, or the whole block (BwdUnitRows).
  int64_t unit_rows;
  int w_fp32;
  // The split backward: each dx CTA asks L2 for the rows l2_ahead_rows past
  // its own (SplitL2AheadRows), or for none (0).
  int64_t l2_ahead_rows;
  // Whether x, dy, z and the weight are loaded before the wait for the
  // kernels before it (InputsBeforeWait).
  int inputs_before_wait;
  // Whether the partial rows are FP32 (DwPartialBytes(dim, gate) == 4).
  int partials_fp32;
};

enum DwStore : int { kDwStoreFp32 = 0, kDwStoreBf16 = 1, kDwAddFp32 = 2 };

// dw[c] = sum over p of partials[p * dim + c] in FP64 (FP32 partials widened
// exactly), in a fixed order: lane y of kDwReduceLanes sums p = y,
// y + kDwReduceLanes, ... in sequence, then the lane sums are added pairwise
// in a fixed tree; rounded once into dw.
inline constexpr int kDwReduceLanes = 32;
// Columns of a dw.reduce CTA (its block is columns x kDwReduceLanes): 32, or
// 16 where dim <= 256, which spreads those rows' partials over twice the
// SMs (a CTA of 32 columns reads all of its columns' partials through one
// SM's L2 port). The sums and their order stay the same, bit for bit. On the
// H200 the backward at D <= 256 ran 0.981-1.000x the time (three runs:
// [16384, 4, 256] contiguous 32.5 -> 31.9 us, gated 1031x48x128 22.1 ->
// 21.9), checkpointed 0.989-1.000x; at H >= 1536 16 columns ran 0.99-1.01x,
// so they stay 32, and 8 columns gained less (2026-12-01,
// bench/results/2026-12-01-h200-dw-reduce.txt).
inline constexpr int kDwReduceMaxColumns = 32;
inline constexpr int64_t kDwReduceNarrowDimMax = 256;
constexpr int DwReduceColumns(int64_t dim) {
  return dim <= kDwReduceNarrowDimMax ? kDwReduceMaxColumns / 2 : kDwReduceMaxColumns;
}
struct DwReduceParams {
  const void* partials;  // FP64, or FP32 (DwPartialBytes; DwReduceKernel's choice)
  int64_t count;
  int64_t dim;
  void* dw;
  int store;  // DwStore
};

// dw[c] = acc[c] rounded once to FP32 or BF16, or dw[c] += acc[c] (FP32).
struct DwFinishParams {
  const double* acc;
  int64_t dim;
  void* dw;
  int store;  // DwStore
};

// dst[0 .. words) = 0: a plan's MEMSET launch, run as a kernel so that the
// kernel after it follows it programmatically like any other (a memset
// node ahead of the kb backward had cost about 10 us per graph replay).
inline constexpr int kZeroBlock = 256;
struct ZeroParams {
  uint32_t* dst;
  int64_t words;
};

// reverse: the instance for a launch whose layout runs from the last row
// (ReverseRows): each row as the forward writes it, rstd in the tensors'
// order. Instances of their own: a run-time flag next to the row index cost
// the 32-register flat instances up to 16 bytes of spills.
//
// The kernel of a row config, or nullptr when none is built for it.
const void* RowForwardKernel(int threads_per_row, int vecs_per_thread, bool reverse = false);
// The flat forward of a FlatRowConfig (rows of 8..32 lanes or of 64
// threads, several to a CTA, or one row of the CTA's threads; the gated
// instances GateFlatRowConfig's and the 64-thread groups), or of a
// FlatWideRowConfig (CTA-wide rows of 3 or 4 vectors per thread, no gated
// instances); dense: at 32 registers a thread (2048 threads per SM) at
// DenseFlatRowConfig's configs (RowKernel::kFlatDense), with the gate at
// GateFlatRowConfig's CTA-wide rows (D = 1032..16384) only.
const void* RowForwardFlatKernel(const RowConfig& cfg, bool gate, bool dense, bool slots,
                                 bool reverse = false);
// The fused backward of a config whose CTA is `block` threads; dh_in: the op
// has the residual's incoming gradient (BwdDhInEarly picks an instance of
// its own). A width of whole warps that is not a power of two runs one row
// group per CTA, or (block > threads_per_row, LockstepBackwardRowConfig)
// lockstep row groups. w_fp32: the weight is FP32 (a BF16 one may be kept as
// such in shared memory, BwdBf16WeightSmem, by an instance of its own).
const void* RowBackwardKernel(int threads_per_row, int vecs_per_thread, bool gate, bool dh_in,
                              int block, bool w_fp32);
// The looped forward of LoopRowConfig (rmsnorm_train), with or without the
// fused residual add, stepping by a constant or (LoopRuntimeStride) by
// blockDim.x.
const void* RowForwardLoopKernel(bool residual, bool runtime_stride, bool reverse = false);
// The split backward of SplitRowConfig (dx CTAs and dw CTAs in one launch)
// with SplitGroupsOf row groups per dx CTA.
const void* RowBackwardSplitKernel(int threads_per_row, int vecs_per_thread, bool gate,
                                   int groups);
// dw.reduce over FP64 partial rows, or FP32 ones.
const void* DwReduceKernel(bool fp32_partials);
const void* DwFinishKernel();
const void* ZeroWordsKernel();

}  // namespace cake

#endif  // CAKE_OPS_ROW_KERNELS_H_
