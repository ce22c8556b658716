// How a normalized row maps onto threads, shared by the launch rules (host)
// and the kernels (device) so the two cannot disagree.
//
// A row of `dim` BF16 elements is `dim / 8` 16-byte vectors. A group of
// `threads_per_row` threads holds one row in registers, each thread up to
// `vecs_per_thread` vectors; a CTA holds `block / threads_per_row` rows.
#ifndef CAKE_OPS_ROW_CONFIG_H_
#define CAKE_OPS_ROW_CONFIG_H_

#include <cstdint>

namespace cake {

inline constexpr int kVecElems = 8;          // BF16 elements per 16-byte vector
inline constexpr int kMaxVecsPerThread = 4;  // the row stays in registers
inline constexpr int kMinBlock = 256;
// Threads resident per SM that the launch bounds of the row kernels allow.
// Forward: 1024, 64 registers per thread for the packed row and its weight.
// Backward: 512, 128 registers for the packed x and dy rows and two FP32 dw
// sums per column (the weight sits in shared memory).
inline constexpr int kThreadsPerSm = 1024;
inline constexpr int kBwdThreadsPerSm = 512;
inline constexpr int64_t kMaxDim = 16384;
// The largest row a warp-per-row program holds.
inline constexpr int64_t kMaxWarpRowDim = 32 * kMaxVecsPerThread * kVecElems;

struct RowConfig {
  int threads_per_row = 0;  // a power of two, 8..1024
  int vecs_per_thread = 0;  // 1, 2 or 4
  int block = 0;            // threads per CTA
  constexpr int rows_per_cta() const { return block / threads_per_row; }
  constexpr int ctas_per_sm(int threads_per_sm = kThreadsPerSm) const {
    return block >= threads_per_sm ? 1 : threads_per_sm / block;
  }
};

constexpr int NextPow2(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

constexpr int RoundVecs(int64_t v) { return v <= 1 ? 1 : v <= 2 ? 2 : 4; }

// Sub-warp or warp per row: dim <= kMaxWarpRowDim.
constexpr RowConfig WarpRowConfig(int64_t dim) {
  const int64_t vecs = dim / kVecElems;
  RowConfig c;
  c.threads_per_row = NextPow2(vecs) < 32 ? NextPow2(vecs) : 32;
  c.vecs_per_thread = RoundVecs((vecs + c.threads_per_row - 1) / c.threads_per_row);
  if (c.threads_per_row < 8) c.threads_per_row = 8;
  c.block = kMinBlock;
  return c;
}

// Several warps per row: 64 threads or more, each with up to 4 vectors.
constexpr RowConfig CtaRowConfig(int64_t dim) {
  const int64_t vecs = dim / kVecElems;
  RowConfig c;
  int tpr = NextPow2((vecs + kMaxVecsPerThread - 1) / kMaxVecsPerThread);
  c.threads_per_row = tpr < 64 ? 64 : tpr;
  c.vecs_per_thread = RoundVecs((vecs + c.threads_per_row - 1) / c.threads_per_row);
  c.block = c.threads_per_row < kMinBlock ? kMinBlock : c.threads_per_row;
  return c;
}

// The backward holds the row, dy and the dw sums: warp rows up to
// kMaxWarpRowDim, several warps per row above.
constexpr RowConfig BackwardRowConfig(int64_t dim) {
  return dim <= kMaxWarpRowDim ? WarpRowConfig(dim) : CtaRowConfig(dim);
}

constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

// The deterministic backward's row partition: a function of (rows, dim) only,
// never of the SM count or the grid, so its dw partial rows and their reduce
// order are the same on every device and grid size. 256 blocks keep the
// partials of the widest rows (16384) at 16 MB, inside L2 for the reduce,
// and give every SM of an H200 about two blocks.
inline constexpr int64_t kDetTargetPartials = 256;

struct DetPartition {
  int64_t rows_per_block = 0;
  int64_t partials = 0;
};

constexpr DetPartition DetPartitionOf(int64_t rows, int64_t dim) {
  const int64_t rows_per_cta = BackwardRowConfig(dim).rows_per_cta();
  DetPartition p;
  const int64_t per_block = CeilDiv(rows, kDetTargetPartials);
  p.rows_per_block = RoundUp(per_block < 1 ? 1 : per_block, rows_per_cta);
  p.partials = rows == 0 ? 0 : CeilDiv(rows, p.rows_per_block);
  return p;
}

}  // namespace cake

#endif  // CAKE_OPS_ROW_CONFIG_H_
