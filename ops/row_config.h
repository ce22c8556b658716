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
inline constexpr int kWarpBlock = 256;       // CTA of the warp-per-row configs
inline constexpr int kMaxWideBlock = 512;    // CTA of a wide row, at most
inline constexpr int kMaxCtasPerSm = 32;
// Threads resident per SM that the launch bounds of the row kernels allow.
// Forward: 1024, 64 registers per thread for the packed row and the next
// row in flight (the weight sits in shared memory).
inline constexpr int kThreadsPerSm = 1024;
// The gate's rows of 2 vectors through the ring at 768 threads per SM
// (BwdThreadsPerSm; 80 registers, two ring stages): a run-time width of
// whole warps (96..384 threads a row, kGateRing768MaxThreads;
// threads_per_row 0 in the kernel's instance) and 256 threads (three row
// groups in lockstep where 512 threads held two). On the H200 the gated
// backward (det.partials) ran 0.799-0.917x the time at D = 4608-6144
// (288-384 threads: two CTAs an SM where one fitted) from 4096 rows,
// 0.906-0.982x at D = 2560-4096 from 16384 rows, but 1.018-1.026x at 4096
// rows of D = 2560 and 4096 and 1.06x at [4096, 1536] (where split runs).
// The power-of-two rows of 64, 128 and 512 threads keep 512: at 80
// registers those of 64 and 128 spilled 152 bytes and ran 1.28-1.42x the
// time, D = 7168 and 8192 (512 threads, one CTA an SM either way)
// 0.994-1.080x (2026-12-01, bench/results/2026-12-01-h200-gate-bwd-768.txt).
inline constexpr int kGateRing768MaxThreads = 384;
constexpr bool IsPow2(int v) { return v > 0 && (v & (v - 1)) == 0; }
constexpr bool BwdGateRingAt768(int threads_per_row, int vecs_per_thread) {
  return vecs_per_thread == 2 && (threads_per_row == 0 || threads_per_row == 256 ||
                                  (threads_per_row > 32 && !IsPow2(threads_per_row)));
}
// Backward: the packed x and dy rows (and z) of the rows in flight
// (BwdRowsInFlight) and a Kahan dw sum (two FP32 values) per column: 768
// threads (80 registers) with up to 2 vectors per thread, and with the
// gate's warp rows (one vector per thread) and BwdGateRingAt768's rows; 512
// (128 registers) with 3 (the warp rows of kMaxBackwardWarpRow3Dim) or 4,
// or with the gate's z in its other rows of 2. The
// gate's warp rows had 512 threads (two row groups and the next two in
// flight, 128 registers): 768 threads of one row group and the next ran
// 0.94-1.00x the time on the H200 (16384x48x128 264.1 -> 249.3 us), where a
// plain kernel streaming the same five tensors ran 1.03x the time with two
// 256-thread CTAs per SM as with four (2026-11-29).
constexpr int BwdThreadsPerSm(int threads_per_row, int vecs_per_thread, bool gate = false) {
  if (vecs_per_thread == 1 || (vecs_per_thread == 2 && !gate)) return 768;
  return gate && BwdGateRingAt768(threads_per_row, vecs_per_thread) ? 768 : 512;
}
// Row groups whose loads a backward thread issues together (a step), where
// a row is one vector per thread of a warp or less (dim <= 256: 32 bytes of
// x and dy per row and thread, 48 with z), else 1. Without the gate: 3, the
// next step loaded after this one is reduced. With the gate: 1, and the
// next step's loads (its rstd with them) are issued before this one is
// reduced (BwdPrefetchesStep, as are those of the single row group
// elsewhere). On the H200 3 rows ran 0.63-0.95x the time of 1 (D = 128
// gated and D = 256 views; 4 spilled without the gate); with the gate at 512
// threads per SM (128 registers), 2 rows and the next 2 in flight ran
// 0.97-0.99x the time of 3 (3 and the next 3 spilled 12 bytes), and at 768
// threads (80 registers) 1 row and the next ran 0.94-1.00x the time of those
// (2026-11-29; 2 and the next 2 spilled 186 bytes there).
constexpr bool BwdWarpRowSteps(int threads_per_row, int vecs_per_thread) {
  return threads_per_row > 0 && threads_per_row <= 32 && vecs_per_thread == 1;
}
// Whether a backward thread copies its vectors of the next rows into a
// shared-memory ring asynchronously (cp.async, BwdAsyncStages) rather than
// loading them into registers: where a row group of whole warps holds 2
// vectors per thread, in the ungated warp rows of 2 (H = 264..512) and in
// the warp rows of 3 and 4 (D = 520..1024, kMaxBackwardWarpRow3Dim and
// kMaxBackwardWarpRow4Dim). The other rows of 4 (one CTA-wide row group an
// SM above H = 8192) come through a ring too (BwdWideRing), but no lockstep
// groups or row pairs. The warp rows of a CTA share its steps (kLockstep in
// the kernel) but sum their rows within the warp, with no barrier. Against
// the rows loaded into registers one step ahead (one row of the warp in
// flight), on the H200 the ungated backward at H = 448 and 512 ran
// 0.89-0.91x the time from 65536 rows (0.866 -> 0.951 of copy at [262144,
// 512]), 384 0.92-0.93x and 264 0.96-0.97x; with the gate, 264 and 384 ran
// 1.03-1.07x and 512 level, so the gated warp rows of 2 keep their
// registers (2026-12-01, bench/results/2026-12-01-h200-bwd-warp-ring.txt).
constexpr bool BwdRing(int threads_per_row, int vecs_per_thread, bool gate) {
  if (threads_per_row == 32) return vecs_per_thread >= 3 || (!gate && vecs_per_thread == 2);
  return (threads_per_row == 0 || threads_per_row > 32) && vecs_per_thread == 2;
}
// Whether a backward row of 4 vectors per thread (H > 8192, one CTA-wide row
// group per SM) comes through a ring of two stages (the weight and three
// stages would not fit at 512 threads): every row of 4 vectors. The gated
// rows of 512 threads (D = 13112..16384) keep a BF16 weight as such
// (BwdBf16WeightSmem) or take z through one stage (BwdZOneStage), since x,
// dy and z of two stages (192 KB) and an FP32 weight do not fit a CTA.
// Loaded into registers at the start of each step, one row in flight per
// SM, the backward had run at 0.55-0.66 of copy bandwidth from 16384 rows
// at H = 8704-12288; with the ring it ran 0.65-0.75x that time from 4096
// rows there (0.82-0.94 of copy from 16384 rows), 0.73-0.80x at 1024, H =
// 14336 and 16384 0.84-0.92x, the fused residual's [16384, 12288] 0.80x.
// Three stages up to 416 threads ran 0.996-1.027x two's time. The gated
// rows at D = 8704-12288 ran 0.57-0.70x (0.34-0.56 -> 0.51-0.90 of copy),
// their instance's spill 148 -> 8 bytes (H200, 2026-12-01,
// bench/results/2026-12-01-h200-bwd-wide-ring.txt).
constexpr bool BwdWideRing(int vecs_per_thread) { return vecs_per_thread == 4; }
// The gated rows of 512 threads of 4 vectors (D = 13112..16384), whose x,
// dy and z of two ring stages (192 KB) leave no room for an FP32 weight:
// BwdBf16WeightSmem with a BF16 weight, else BwdZOneStage.
constexpr bool BwdGateRowsOf512x4(int threads_per_row, int vecs_per_thread, bool gate) {
  return gate && vecs_per_thread == 4 && threads_per_row == 512;
}
// Whether a backward CTA keeps the weight in shared memory as BF16, as it is
// given, rather than widened to FP32: the gated rows of 512 threads of 4
// vectors (D = 13112..16384) with a BF16 weight, whose x, dy and z of two
// ring stages (192 KB) and a BF16 weight (32 KB at D = 16384) fit a CTA
// where an FP32 one does not. On the H200 the gated backward at D =
// 13112-16384 ran 0.74-0.79x the time from 1024 to 16384 rows against the
// rows loaded into registers a step at a time (0.63-0.70 -> 0.84-0.89 of
// copy at 16384 rows; the checkpointed steps 0.86-0.90x); the instance uses
// 128 registers and spills none (2026-12-01,
// bench/results/2026-12-01-h200-gate-bf16-weight-ring.txt).
constexpr bool BwdBf16WeightSmem(int threads_per_row, int vecs_per_thread, bool gate,
                                 bool w_fp32) {
  return BwdGateRowsOf512x4(threads_per_row, vecs_per_thread, gate) && !w_fp32;
}
// Whether the gated rows of 512 threads of 4 vectors with an FP32 weight
// (64 KB at D = 16384) take z through one ring stage beside x and dy's two
// (160 KB in all): each thread's slot of z vector i is copied the next
// row's vector as pass 2 of this row has read it, so the next row's x and
// dy are in flight through the whole step and its z through pass 2. Against
// the rows loaded into registers a step at a time (one row in flight an
// SM), the backward ran 0.746-0.825x the time from 1024 to 65536 rows
// (0.62-0.70 -> 0.82-0.92 of copy from 16384 rows), the checkpointed steps
// 0.848-0.875x; ptxas 128 registers, no spill. A BF16 weight through the
// same path (widened in shared memory) ran 0.98x the time of its own
// instance from 16384 rows at D = 14336-16384 but 1.01-1.04x at 1024-4096
// rows and D = 13112 (H200, 2026-12-01,
// bench/results/2026-12-01-h200-gate-z-one-stage.txt).
constexpr bool BwdZOneStage(int threads_per_row, int vecs_per_thread, bool gate,
                            bool bf16_weight_smem) {
  return BwdGateRowsOf512x4(threads_per_row, vecs_per_thread, gate) && !bf16_weight_smem;
}
// The backward's weight in shared memory (BwdBf16WeightSmem: 2 bytes a
// column, else 4).
constexpr int64_t BwdWeightSmemBytes(int64_t dim, bool bf16_weight_smem) {
  return dim * (bf16_weight_smem ? 2 : 4);
}
// Whether a ring row group reduces two rows per step (BwdRowsInFlight),
// their row sums behind one barrier and their dw terms added in FP32 before
// they enter the Kahan sums once: where one 512-thread row group fills the
// CTA (no gate, H = 6560..8192). The ring then holds two stages of two
// rows (256 bytes per thread), the next step's copied while this one is
// reduced: as many rows in flight as three stages of one. On the H200
// (2026-11-30) that ran [16384, 8192] 0.97-0.98x the time (65536 rows
// 1.00x; three stages of two 0.98x and 1.02x). The lockstep groups of 128
// and 256 threads, whose fold then had to live in the stage just reduced
// (their 768 threads' ring takes 192 KB), ran 0.97-1.01x, against 0.95-0.99x
// with one row a step, and their fused residual 1.02x (dh_in prefetched into
// L1: loaded into registers, the Kahan sums spilled in the loop).
constexpr bool BwdRingPairs(int threads_per_row, int vecs_per_thread, bool gate) {
  return !gate && threads_per_row >= 512 && BwdRing(threads_per_row, vecs_per_thread, gate);
}
constexpr int BwdRowsInFlight(int threads_per_row, int vecs_per_thread, bool gate) {
  if (BwdRingPairs(threads_per_row, vecs_per_thread, gate)) return 2;
  if (!BwdWarpRowSteps(threads_per_row, vecs_per_thread)) return 1;
  return gate ? 1 : 3;
}
inline constexpr int64_t kMaxDim = 16384;
// The largest row a warp-per-row program holds.
inline constexpr int64_t kMaxWarpRowDim = 32 * kMaxVecsPerThread * kVecElems;

struct RowConfig {
  int threads_per_row = 0;  // 8, 16, 32, or a multiple of 32 up to 1024
  int vecs_per_thread = 0;  // 1, 2 or 4 (3: FlatWideRowConfig, SplitRowConfig and
                            // the backward's warp rows, kMaxBackwardWarpRow3Dim)
  int block = 0;            // threads per CTA
  constexpr int rows_per_cta() const { return block / threads_per_row; }
  constexpr int ctas_per_sm(int threads_per_sm = kThreadsPerSm) const {
    const int n = block >= threads_per_sm ? 1 : threads_per_sm / block;
    return n > kMaxCtasPerSm ? kMaxCtasPerSm : n;
  }
};

constexpr int NextPow2(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

constexpr int RoundVecs(int64_t v) { return v <= 1 ? 1 : v <= 2 ? 2 : 4; }

// The CTA of a config: 256 threads holding several rows when a row fits in
// a warp (its reductions stay inside the warp), else exactly one row, so
// the CTA-wide barriers of its reductions never wait for another row.
constexpr int BlockOf(int threads_per_row) {
  return threads_per_row <= 32 ? kWarpBlock : threads_per_row;
}

constexpr RowConfig MakeRowConfig(int64_t dim, int threads_per_row) {
  RowConfig c;
  c.threads_per_row = threads_per_row;
  c.vecs_per_thread = RoundVecs((dim / kVecElems + threads_per_row - 1) / threads_per_row);
  c.block = BlockOf(threads_per_row);
  return c;
}

// Sub-warp or warp per row: dim <= kMaxWarpRowDim.
constexpr RowConfig WarpRowConfig(int64_t dim) {
  const int tpr = NextPow2(dim / kVecElems);
  return MakeRowConfig(dim, tpr < 8 ? 8 : tpr > 32 ? 32 : tpr);
}

// Several warps per row, one row per CTA: the fewest threads (64 or more)
// that hold the row with up to `max_vecs` vectors each, rounded up to a power
// of two (`pow2`) or to whole warps. Whole warps load every thread evenly
// (H = 6144 backward: 384 threads of 2 vectors) but run a kernel whose
// threads per row is a run-time value, which costs where a power of two
// fits as well (measured on the H200: the forward at H = 2048 and 6144 and
// the backward at H = 2048 were slower that way).
constexpr RowConfig WideRowConfig(int64_t dim, int max_vecs, bool pow2) {
  const int64_t tpr = (dim / kVecElems + max_vecs - 1) / max_vecs;
  const int64_t rounded = pow2 ? NextPow2(tpr) : (tpr + 31) / 32 * 32;
  return MakeRowConfig(dim, static_cast<int>(rounded < 64 ? 64 : rounded));
}

// The forward holds only the packed row (and the next one in flight): up to
// 4 vectors per thread.
constexpr RowConfig CtaRowConfig(int64_t dim) {
  return WideRowConfig(dim, kMaxVecsPerThread, /*pow2=*/true);
}

// The flat forward: one row group per CTA and no persistent loop, so that
// the hardware overlaps many rows per SM. A row of up to 64 vectors in a
// sub-warp group of 8..32 lanes (several rows per 256-thread CTA), one
// vector per thread up to 16 vectors (2048 threads per SM), two above; a
// wider row in one CTA of whole warps (up to 1024 threads), two vectors per
// thread. Two vectors where one left the SM short of bytes in flight (H200:
// H = 1536 and 2048 0.78-0.82x the time, D = 256 views 0.91-0.94x); at
// D = 128 (gated rows) 8 lanes of two vectors were 1-4% slower than 16 of one.
// Rows of 65..128 vectors (H = 520..1024) in row groups of 64 threads of two
// vectors, four to a 256-thread CTA (kFlatGroupVecsMax): as one row a CTA of
// 64 threads every such forward ran at about 820 rows a microsecond, a CTA
// launch rate (H200: [65536, 520 | 768 | 1024] 79.6 us each), and the groups
// ran 0.53-0.94x that time from 1024 rows. Groups of 128 threads (two a CTA)
// ran 1.09-1.16x one row of 96 threads at H = 1032-1536 from 4096 rows
// (2026-11-30).
inline constexpr int kMaxFlatBlock = 1024;
inline constexpr int64_t kFlatGroupVecsMax = 128;  // H = 1024
// The dims of the 64-thread row groups: past a warp row's 64 vectors, up to
// kFlatGroupVecsMax.
inline constexpr int64_t kFlatGroupDimMin = (64 + 1) * kVecElems;
inline constexpr int64_t kFlatGroupDimMax = kFlatGroupVecsMax * kVecElems;
// In the dense flat forward (DenseFlatRowConfig), rows of 129..192 vectors
// (H = 1032..1536): rows of 96 threads two to a 192-thread CTA.
inline constexpr int64_t kFlatPairVecsMax = 192;  // H = 1536
// The CTA of the flat forwards' row groups of `threads_per_row` (8..96): as
// many whole rows as 256 threads hold.
constexpr int FlatGroupBlock(int threads_per_row) {
  return kWarpBlock / threads_per_row * threads_per_row;
}
// Rows of `threads_per_row` threads of two vectors, FlatGroupBlock to a CTA.
constexpr RowConfig FlatGroupRowConfig(int threads_per_row) {
  RowConfig c;
  c.threads_per_row = threads_per_row;
  c.vecs_per_thread = 2;
  c.block = FlatGroupBlock(threads_per_row);
  return c;
}
// A row of `dim` in one CTA of the fewest whole warps of `vecs_per_thread`.
constexpr RowConfig FlatCtaRowConfig(int64_t dim, int vecs_per_thread) {
  RowConfig c;
  c.vecs_per_thread = vecs_per_thread;
  c.threads_per_row = static_cast<int>(RoundUp(CeilDiv(dim / kVecElems, vecs_per_thread), 32));
  c.block = c.threads_per_row;
  return c;
}
constexpr RowConfig FlatRowConfig(int64_t dim) {
  const int64_t vecs = dim / kVecElems;
  if (vecs <= 16) return MakeRowConfig(dim, vecs <= 8 ? 8 : 16);
  if (vecs <= 32) return MakeRowConfig(dim, 16);  // two vectors per thread
  if (vecs <= 64) return MakeRowConfig(dim, 32);
  if (vecs <= kFlatGroupVecsMax) return FlatGroupRowConfig(64);
  return FlatCtaRowConfig(dim, 2);
}
// The dense flat forward (rmsnorm.fwd.flat.dense): FlatRowConfig's rows, but
// at H = 1032..1536 rows of 96 threads two to a CTA. There they ran
// 0.90-0.98x the time of one row a CTA (flat or dense) from 1024 rows at
// H = 1032-1408 and at 1536 to 16384 rows (1.02x from 65536); in the flat
// program (40 registers, 8 CTAs an SM) 1.02-1.04x from 65536 rows at H =
// 1280-1536 (H200, 2026-11-30).
constexpr RowConfig DenseFlatRowConfig(int64_t dim) {
  const int64_t vecs = dim / kVecElems;
  if (vecs <= kFlatGroupVecsMax || vecs > kFlatPairVecsMax) return FlatRowConfig(dim);
  return FlatGroupRowConfig(96);
}
// The gated flat forward (z loaded with x): FlatRowConfig's rows, but one row
// of the CTA's threads where those are row groups wider than a warp. Its
// 64-thread row groups at 40 registers (4 bytes of spill) ran 1.02-1.05x the
// time of one row a CTA at D = 1024, 0.95-1.02x at 768 and 0.84-1.04x at 520
// from 1024 rows (H200, 2026-11-30). At 64 registers they are a program of
// their own (rmsnorm_silu_gate.fwd.flat.groups, FlatRowConfig), routed where
// they won (table .42).
constexpr RowConfig GateFlatRowConfig(int64_t dim) {
  const RowConfig c = FlatRowConfig(dim);
  return c.threads_per_row > 32 && c.threads_per_row < c.block ? FlatCtaRowConfig(dim, 2) : c;
}
// The dense gated flat forward (rmsnorm_silu_gate.fwd.flat.dense):
// GateFlatRowConfig's CTA-wide rows of two vectors (D = 1032..16384) at 32
// registers a thread, z kept out of the registers across the row sum.
inline constexpr int64_t kGateFlatDenseDimMin = kFlatGroupDimMax + kVecElems;

// The wide flat forward (rmsnorm.fwd.flat.wide): a row of H = 3072..8192 in
// one CTA of 4 vectors per thread over the fewest whole warps (96..256
// threads: 96 at H = 3072, 160 at 4104..5120, 224 at 6656 and 7168, 192 at
// 5632, 256 at 7680 and 8192), but at H = 6144 256 threads of 3, in place of
// fwd.flat's 192..512 threads of two; no gate. On the H200 (2026-11-30) it
// ran 0.960-0.981x the routed program's time with an FP32 weight at H = 6144
// from 2048 rows and at 8192 from 4096, 0.984-0.994x with a BF16 one at H =
// 6144 from 6144 rows and 8192 from 16384, and 0.946-0.996x at H = 5632, 6656
// and 7168 from 1024-4096 rows. At 6144, 192 threads of 4 ran 1.018-1.020x
// 256 of 3 with an FP32 weight at 2048-4096 rows (level elsewhere); at H =
// 6656 and 7168, 256 threads of 4 ran 1.011-1.063x 224 of 4's time and
// 288-320 of 3 1.006-1.047x; at 32 registers (2048 threads per SM) it spilled
// 36-148 bytes and ran 1.03-1.30x. At H = 3072..4000 above 65536 rows it ran 0.88-0.98x
// the loop's time (3 vectors per thread 0.91-0.97x), at H = 4096 level, and
// at H = 1536-2048 1.00-1.02x (2026-11-30).
inline constexpr int64_t kFlatWideDimMin = 3072;
inline constexpr int64_t kFlatWideDimMax = 8192;
inline constexpr int64_t kFlatWideThreeVecsDim = 6144;  // 256 threads of 3
constexpr RowConfig FlatWideRowConfig(int64_t dim) {
  return FlatCtaRowConfig(dim, dim == kFlatWideThreeVecsDim ? 3 : kMaxVecsPerThread);
}

// The flat forward's shared memory: each thread's weight vectors (16 bytes
// each, 32 as FP32) in slots of its own (RowForwardFlat), where the tensor
// has at most 2^26 elements (FlatWeightSlots), else none. On the H200 the
// slots ran 0.91-0.98x the time up to there ([1024, 4096], [4096, 1536],
// [16384, 4, 256] and [65536, 4, 256] contiguous) and 1.006-1.03x beyond
// ([65536 | 131072, 1536 | 2048], most with an FP32 weight) (2026-11-30).
// The dense program's rows above H = 8192 with an FP32 weight without the
// gate (`fp32_wide_rows`) take them at any row count: 0.934-0.946x the time
// at 16384 and 65536 rows of H = 12288-16384, where the weight's 48-64 KB
// read through L1 for every row had cost 7% against a BF16 weight (with a
// BF16 one 0.990-1.004x; H200, 2026-12-01,
// bench/results/2026-12-01-h200-fwd-wide-widths.txt, run 8).
inline constexpr int64_t kFlatWeightSlotsMaxElems = int64_t{1} << 26;
constexpr bool FlatWeightSlots(int64_t rows, int64_t dim, bool fp32_wide_rows = false) {
  return rows * dim <= kFlatWeightSlotsMaxElems || (fp32_wide_rows && dim > kFlatWideDimMax);
}
constexpr int64_t FlatWeightSmemBytes(const RowConfig& c, bool w_fp32) {
  return int64_t{c.block} * c.vecs_per_thread * (w_fp32 ? 32 : 16);
}

// Row groups of a ring width in one CTA, `ctas` CTAs per SM.
constexpr int BwdRingGroupsBlock(int threads_per_row, int vecs_per_thread, bool gate, int ctas) {
  const int per_sm = BwdThreadsPerSm(threads_per_row, vecs_per_thread, gate);
  const int groups = per_sm / ctas / threads_per_row;
  return (groups > 1 ? groups : 1) * threads_per_row;
}
// The backward's CTA: with the ring and a power of two of threads per row,
// as many row groups as the SM's backward threads hold (BwdThreadsPerSm; 6
// of 128 threads at H = 2048, 3 of 256 at 4096), which reduce their rows in
// lockstep (one barrier a step serves all their row sums) and fold their dw
// sums into one partial row per block. As CTAs of one row group each, the
// six CTAs of an SM at [16384, 2048] (H200) finished their rows 14 us apart
// (median; at most 18) between 48 and 68 us into a 70 us kernel, the last
// ones alone with their two rows in flight; in lockstep the SMs finish
// within 4 us of each other: [16384, 2048] ran 0.89x the time, H = 4096
// 0.96-0.98x from 16384 rows, 65536+ rows at H = 2048 1.00x (the CTAs of
// one row group had reached the copy's rate there, their tail aside) and
// the fused residual's [65536, 4096] 1.05x. Elsewhere one row group (a
// CTA-wide row: whole warps at H = 1536 and 6144, where a lockstep kernel
// of run-time width ran 1.06-1.29x the time, and instances of 96 and 384
// threads 0.93x at [16384, 1536] but 1.05-1.11x at 65536+ rows and at
// H = 6144; det.lockstep below), or 256 threads of warp rows (BlockOf).
constexpr int BwdBlockOf(int threads_per_row, int vecs_per_thread, bool gate) {
  if (threads_per_row <= 32 || !IsPow2(threads_per_row) ||
      !BwdRing(threads_per_row, vecs_per_thread, gate)) {
    return BlockOf(threads_per_row);
  }
  return BwdRingGroupsBlock(threads_per_row, vecs_per_thread, gate, 1);
}
// An sm_90 SM: its resident threads, its 32-bit registers, its shared
// memory (228 KB) and what the hardware keeps of that per resident CTA.
inline constexpr int kSmMaxThreads = 2048;
inline constexpr int kSmRegisters = 65536;
inline constexpr int64_t kSmemPerSm = 228 * 1024;
inline constexpr int64_t kSmemReservedPerCta = 1024;
// Registers per backward thread: the register file over the threads an SM
// holds, rounded down to the allocation step of 8.
constexpr int BwdMaxRegs(int threads_per_row, int vpt, bool gate) {
  const int regs = kSmRegisters / BwdThreadsPerSm(threads_per_row, vpt, gate);
  return (regs > 255 ? 255 : regs) / 8 * 8;
}
// The registers of a RowBackward instance: BwdMaxRegs, but 128 for the fused
// residual's 512-thread ring rows (the dh_in instance, BwdDhInEarly; H =
// 6560..8192), whose CTA is alone on its SM. At 80 they spilled 24 bytes; at 128 (123 used, no
// spill) [16384 | 65536, 7168] with the residual ran 0.973-0.975x the time
// on the H200 and [16384 | 65536, 8192] 0.993-0.996x. The instance without
// dh_in used 111 of 128 and ran level (0.994-1.005x), so it keeps 80
// (bench/results/2026-12-01-h200-bwd-rstd-ring-regs.txt). The dh_in
// instances of 4 vectors a thread (BwdWideRing), alone on their SMs too:
// 128 at 512 threads, 152 at the run-time widths up to 416 (ptxas: 128 and
// 145 used, no spills); the warp rows of 4 (two 256-thread CTAs an SM) keep
// 128 (32 bytes spilled, as their instance without dh_in).
constexpr int BwdInstanceMaxRegs(int threads_per_row, int vpt, bool gate, bool dh_in) {
  if (gate || !dh_in) return BwdMaxRegs(threads_per_row, vpt, gate);
  if (BwdWideRing(vpt)) return threads_per_row == 512 || threads_per_row == 32 ? 128 : 152;
  if (threads_per_row == 512 && BwdRing(threads_per_row, vpt, gate)) return 128;
  return BwdMaxRegs(threads_per_row, vpt, gate);
}
// The dynamic shared memory a persistent backward CTA asks for so that no
// more than `ctas_per_sm` of them fit on an SM: `needed`, or more where
// threads, registers and `needed` would let one more in. Its grid is one
// wave of ctas_per_sm a SM; under a programmatic edge its CTAs start while
// the kernel before still holds SMs, and an SM that takes one more than the
// design runs its CTAs that much slower. At H = 2056..2560 (160 threads,
// four a SM by design, five fit) the checkpointed [16384, 2176 | 2304 |
// 2432] steps with an FP32 weight behind the dense forward ran 175.6,
// 180.5, 189.1 us (the backward 103.2 against 74.3 at 2304); capped, 147.1,
// 151.7, 159.2, and the backward alone level (H200, 2026-11-30).
constexpr int64_t BwdCappedSmemBytes(int64_t needed, int ctas_per_sm, int block, int regs) {
  if (block <= 0 || regs <= 0) return needed;
  const int by_threads = kSmMaxThreads / block;
  const int by_regs = kSmRegisters / (regs * 32 * ((block + 31) / 32));
  const int64_t by_smem = kSmemPerSm / (needed + kSmemReservedPerCta);
  int fits = by_threads < by_regs ? by_threads : by_regs;
  if (by_smem < fits) fits = static_cast<int>(by_smem);
  if (fits > kMaxCtasPerSm) fits = kMaxCtasPerSm;
  if (fits <= ctas_per_sm) return needed;
  return kSmemPerSm / (ctas_per_sm + 1) - kSmemReservedPerCta + 16;
}
// The det.lockstep program's CTA: at 96 threads a row (BwdLockstepWidth,
// H = 1032..1536) four row groups in lockstep, two CTAs per SM; elsewhere
// BwdBlockOf. Routed by row count (planner/routes). On the H200, against
// det.partials' one-group CTAs: [16384, 1536] 0.84x the time, [24576 |
// 32768, 1536] 0.90x and 0.95x, 49152 0.99x, 65536+ 1.01-1.03x; [8192, 1536]
// 0.90x the split program's. Eight groups, one CTA per SM: 0.93x at 16384
// rows, 1.05-1.12x from 32768; two groups, four CTAs: 1.02-1.06x four's
// time. Lockstep CTAs of 192 and 384 threads (H = 3072, 6144) ran 1.03-1.10x
// from 16384 rows, and H = 2048's halved (3 groups of 128, two CTAs per SM)
// 1.06-1.11x from 16384 rows.
inline constexpr int kLockstepCtasPerSm = 2;
constexpr bool BwdLockstepWidth(int threads_per_row) { return threads_per_row == 96; }
constexpr int BwdLockstepBlockOf(int threads_per_row, int vecs_per_thread, bool gate) {
  if (!BwdLockstepWidth(threads_per_row) || !BwdRing(threads_per_row, vecs_per_thread, gate)) {
    return BwdBlockOf(threads_per_row, vecs_per_thread, gate);
  }
  return BwdRingGroupsBlock(threads_per_row, vecs_per_thread, gate, kLockstepCtasPerSm);
}
// Whether a backward with dh_in (the fused residual's incoming gradient)
// runs an instance of its own that loads a row's dh_in before the row sum,
// whose barrier then covers the wait: where rows come through the ring
// (H200: the residual rows of the suite 0.85-0.89x the time against dh_in
// loaded as dx is stored; the rows of 4 vectors, BwdWideRing, 0.64-0.85x
// at H = 8704-16384, 2026-12-01). In the instances without dh_in, the
// registers held across the barrier for it cost 1.02-1.14x the time.
constexpr bool BwdDhInEarly(int threads_per_row, int vecs_per_thread) {
  return BwdRing(threads_per_row, vecs_per_thread, /*gate=*/false) ||
         BwdWideRing(vecs_per_thread);
}
// Stages of the ring: 3 (the current step and two ahead; 2 of two rows
// each with BwdRingPairs, 2 with BwdWideRing), 0 without it; 2 of one row
// for the 256-thread row groups (H = 3280..4096, three in lockstep) without
// the gate and without dh_in (`dh_in`: the fused residual's incoming
// gradient is bound, BwdDhInEarly).
// 16 bytes per vector, tensor (x, dy, and z with the gate) and stage: 192
// bytes per thread (288 with z), so that 768 (512) threads per SM use 144 KB
// besides the weight and the fold. With the lockstep row groups at H = 2048,
// 4 stages (216 KB in all) ran 1.08x the time of 3 at 65536+ rows (H200).
// Two stages ran H = 4096 0.968-0.987x the time of three from 4096 to 16384
// rows, 0.992-0.995x at 65536 and 131072, H = 3584 0.985-0.990x; level at
// the other widths, but the fused residual's [16384 | 65536, 4096] ran 1.30x
// (H200, bench/results/2026-11-30-h200-bwd-waves-stages-counters.txt).
constexpr int BwdAsyncStages(int threads_per_row, int vecs_per_thread, bool gate, bool dh_in) {
  if (BwdWideRing(vecs_per_thread)) return 2;
  if (!BwdRing(threads_per_row, vecs_per_thread, gate)) return 0;
  if (BwdRingPairs(threads_per_row, vecs_per_thread, gate)) return 2;
  if (gate && BwdGateRingAt768(threads_per_row, vecs_per_thread)) return 2;
  if (gate && vecs_per_thread == 3) return 2;  // the gate's warp rows of 3: 147 KB an SM
  return threads_per_row == 256 && !gate && !dh_in ? 2 : 3;
}
// The backward holds x, dy and two FP32 dw sums per column: up to 2 vectors
// per thread (a warp holds rows up to 512, and through the ring up to 1024
// below) while 512 threads suffice (dim <= 8192), 4 above. The CTA:
// BwdBlockOf.
inline constexpr int64_t kMaxBackwardWarpRowDim = 32 * 2 * kVecElems;
// A warp holds rows up to 768 with 3 vectors per thread (through the ring,
// BwdRing; 512 threads an SM at 128 registers, the gate's x, dy and z in two
// stages, the others' in three), where rows of 64 threads of 2 vectors left
// 25-49% of their vector slots empty and reduced 8 or 12 row groups a CTA in
// lockstep behind one barrier a step. On the H200 the backward at
// H = 520..768 ran 0.78-0.86x the time from 65536 rows (0.56-0.79 -> 0.72-0.94
// of copy; 0.846x at [174762, 768]), the checkpointed steps 0.88-0.93x, and
// det.partials now leads the split program from 12288 rows there (routing
// table .55); the gated backward 0.64-0.76x from 65536 rows (0.48-0.71 ->
// 0.76-0.93 of copy), 0.79x at 16384 rows and 0.91x at 4096 (2026-12-01,
// bench/results/2026-12-01-h200-bwd-warp-ring.txt).
inline constexpr int64_t kMaxBackwardWarpRow3Dim = 32 * 3 * kVecElems;
// And up to 1024 with 4 vectors (two ring stages, BwdWideRing; 128
// registers, 24-32 bytes spilled), where rows of 64 threads of 2 left up to
// 24% of their slots empty: on the H200 the backward at H = 776..1024 ran
// 0.89-0.95x the time from 65536 rows (0.67-0.91 -> 0.74-0.95 of copy), the
// gated one at D = 776..896 0.83-0.87x; at D = 1024 (no empty slots in rows
// of 64 threads) the gated one ran 0.97-0.99x from 65536 rows but 1.03x at
// 4096, so the gate keeps its 64-thread rows there (2026-12-01, run 7 of
// bench/results/2026-12-01-h200-bwd-warp-ring.txt).
inline constexpr int64_t kMaxBackwardWarpRow4Dim = 32 * 4 * kVecElems;
constexpr RowConfig BackwardRowConfigOf(int64_t dim, bool gate) {
  if (dim <= kMaxBackwardWarpRowDim) return WarpRowConfig(dim);
  const int64_t warp_rows_max =
      gate ? kMaxBackwardWarpRow4Dim - kVecElems : kMaxBackwardWarpRow4Dim;
  if (dim <= warp_rows_max) {
    RowConfig c;
    c.threads_per_row = 32;
    c.vecs_per_thread = dim <= kMaxBackwardWarpRow3Dim ? 3 : 4;
    c.block = kWarpBlock;
    return c;
  }
  // Whole warps where a power of two would leave threads idle on their
  // second vector (more than a quarter of the CTA), else a power of two.
  const int max_vecs = dim <= 512 * 2 * kVecElems ? 2 : 4;
  const RowConfig pow2 = WideRowConfig(dim, max_vecs, true);
  const int64_t slots = int64_t{pow2.threads_per_row} * pow2.vecs_per_thread;
  RowConfig c = slots * 4 > dim / kVecElems * 5 ? WideRowConfig(dim, max_vecs, false) : pow2;
  // With the gate, whole warps of 2 vectors wider than kGateRing768MaxThreads
  // (416 threads, D = 6152..6552) take the power of two, 512 threads: at 768
  // threads an SM (BwdGateRingAt768) one such CTA would run alone at 80
  // registers.
  if (gate && c.vecs_per_thread == 2 && !IsPow2(c.threads_per_row) &&
      c.threads_per_row > kGateRing768MaxThreads) {
    c = pow2;
  }
  c.block = BwdBlockOf(c.threads_per_row, c.vecs_per_thread, gate);
  return c;
}
constexpr RowConfig BackwardRowConfig(int64_t dim) { return BackwardRowConfigOf(dim, false); }
// The det.lockstep program's config: BackwardRowConfig, with the ring's row
// groups of a BwdLockstepWidth in lockstep CTAs (BwdLockstepBlockOf).
constexpr RowConfig LockstepBackwardRowConfig(int64_t dim) {
  RowConfig c = BackwardRowConfig(dim);
  c.block = BwdLockstepBlockOf(c.threads_per_row, c.vecs_per_thread, false);
  return c;
}
constexpr RowConfig GatedBackwardRowConfig(int64_t dim) { return BackwardRowConfigOf(dim, true); }

// The looped forward: one row per CTA of LoopBlockOf(dim) threads, each
// taking vectors v = lane, lane + block, ... twice (sum of squares, then y).
inline constexpr int kLoopBlock = 256;
// Whether the looped forward's loops step by blockDim.x rather than by the
// constant kLoopBlock (RowForwardLoop): from 4 vectors per thread.
constexpr bool LoopRuntimeStride(int64_t dim) { return dim / kVecElems >= 4 * kLoopBlock; }
// The looped forward's CTA: kLoopBlock threads, or 512 where they would take
// 8 vectors or more each (H = 16384: 0.79x the time of 256 threads at 16384
// rows on the H200; at H = 8192, 4 vectors each, 512 threads ran
// 1.08-1.13x the time).
inline constexpr int kWideLoopBlock = 512;
constexpr int LoopBlockOf(int64_t dim) {
  return dim / kVecElems >= 8 * kLoopBlock ? kWideLoopBlock : kLoopBlock;
}
constexpr RowConfig LoopRowConfig(int64_t dim) {
  RowConfig c;
  c.block = LoopBlockOf(dim);
  c.threads_per_row = c.block;
  c.vecs_per_thread = static_cast<int>(CeilDiv(dim / kVecElems, c.block));
  return c;
}

// The split backward (one kernel of two roles, 256-thread CTAs): dx CTAs of
// sub-warp or warp rows up to 64 vectors; rows of 64 threads of two vectors
// at 65..128 vectors (H = 520..1024, four side by side), of 128 threads of
// two at 129..256 (H = 1032..2048) and of three at 257..288 (H =
// 2056..2304, two side by side); else one CTA-wide row of 2, 3 or 4 vectors
// per thread (dim <= 8192). dw CTAs sum a column tile of 32 vectors (256
// columns) over one block of its partition (SplitPartitionOf). Measured on
// the H200 (2026-11-30), against what each replaced:
// - H = 520..1024: 64 threads of 2 (eight rows a dx CTA, SplitGroupsOf) ran
//   0.73-0.91x the time of a 256-thread row of one vector at 1024-8192 rows
//   of H = 520, 768, 896 and 1024; 32 threads of 3 ran 0.98-1.04x them.
// - H = 1032..2048: 128-thread rows ran 0.92-0.97x one 256-thread row of one
//   vector from 4096 rows (their per-row work, the row's address, sum and
//   coefficient, serves 16 columns a thread rather than 8), 0.99-1.02x at
//   1024-2048 rows; 64 threads of 3 at H = 1152-1536 ran 0.94-1.08x them.
// - H = 2056..2304: 128 threads of 3, four rows a dx CTA, ran 0.915-0.964x
//   256 threads of 2 at 1024-8192 rows of H = 2056, 2176 and 2304; at
//   2560-3072 they were mixed (0.97-1.05x), and with two rows a dx CTA
//   0.97-1.08x.
// - H = 4104..6144: three vectors a thread in place of four (whose last held
//   no columns) ran 0.983-1.000x at 1024-16384 rows of H = 4608, 5120 and
//   6144.
inline constexpr int kSplitBlock = 256;
// Rows of half a CTA (128 threads) up to this many vectors (H = 2304).
inline constexpr int64_t kSplitHalfCtaRowVecsMax = 288;
inline constexpr int64_t kSplitRowsPerPartial = 64;  // SplitPartitionOf
inline constexpr int64_t kMaxSplitDim = kSplitBlock * kMaxVecsPerThread * kVecElems;
constexpr RowConfig SplitRowConfig(int64_t dim) {
  const int64_t vecs = dim / kVecElems;
  if (vecs <= 32) return MakeRowConfig(dim, vecs <= 8 ? 8 : NextPow2(vecs));
  if (vecs <= 64) return MakeRowConfig(dim, 32);
  RowConfig c;
  c.block = kSplitBlock;
  if (vecs <= 128) {  // rows of 64 threads
    c.threads_per_row = 64;
    c.vecs_per_thread = 2;
    return c;
  }
  if (vecs <= kSplitHalfCtaRowVecsMax) {  // rows of 128 threads
    c.threads_per_row = 128;
    c.vecs_per_thread = vecs <= 256 ? 2 : 3;
    return c;
  }
  c.threads_per_row = kSplitBlock;
  c.vecs_per_thread = static_cast<int>(CeilDiv(vecs, kSplitBlock));  // 2..4
  return c;
}

constexpr int64_t BwdRingBytes(const RowConfig& c, bool gate, bool dh_in,
                               bool bf16_weight_smem = false) {
  const int tensor_stages =
      BwdAsyncStages(c.threads_per_row, c.vecs_per_thread, gate, dh_in) *
          BwdRowsInFlight(c.threads_per_row, c.vecs_per_thread, gate) * (gate ? 3 : 2) -
      (BwdZOneStage(c.threads_per_row, c.vecs_per_thread, gate, bf16_weight_smem) ? 1 : 0);
  return int64_t{tensor_stages} * c.vecs_per_thread * c.block * 16;
}
// The backward's FP64 fold of its row groups' dw sums in shared memory:
// one row per group (warp rows loaded into registers), or, for the groups
// that share the ring's steps (the lockstep groups of BwdBlockOf and the
// ring's warp rows), one row of the config's columns into which the groups
// add in turn, each
// thread's 8 * vecs_per_thread values threads_per_row apart (no bank
// conflicts); none with one row group.
constexpr int64_t BwdFoldBytes(const RowConfig& c, int64_t dim, bool gate) {
  if (c.rows_per_cta() == 1) return 0;
  if (BwdRing(c.threads_per_row, c.vecs_per_thread, gate)) {
    return int64_t{c.threads_per_row} * c.vecs_per_thread * kVecElems * 8;
  }
  return c.rows_per_cta() * dim * 8;
}
// Whether a backward thread issues the next step's loads (into registers)
// before it reduces the current step: where the row is not copied through
// the ring and a step is one row group of up to 2 vectors, which leaves out
// the ungated warp rows (three row groups a step, loaded after the previous
// step is reduced; BwdRowsInFlight).
constexpr bool BwdPrefetchesStep(int threads_per_row, int vecs_per_thread, bool gate) {
  if (BwdRing(threads_per_row, vecs_per_thread, gate)) return false;
  return BwdWarpRowSteps(threads_per_row, vecs_per_thread) ? gate : vecs_per_thread <= 2;
}
// Rows a backward CTA takes per step; its blocks of rows are multiples of it
// from two steps up (BwdBlockRows).
constexpr int64_t BwdRowsPerStep(const RowConfig& c, bool gate) {
  return int64_t{c.rows_per_cta()} * BwdRowsInFlight(c.threads_per_row, c.vecs_per_thread, gate);
}
// A backward block of at least `rows` rows: whole steps, or whole row
// groups where that is under two steps (a short last step costs less there
// than fewer, longer blocks: gated 260x48 with blocks of two steps of 32
// rows, 195 CTAs, ran 1.11x the time of 48-row blocks, 260 CTAs).
constexpr int64_t BwdBlockRows(int64_t rows, const RowConfig& c, bool gate) {
  const int64_t step = BwdRowsPerStep(c, gate);
  return RoundUp(rows, rows < 2 * step ? c.rows_per_cta() : step);
}

// How a backward block takes its rows: block b of a partition into P blocks
// reads units b, b + P, b + 2P, ... of one step each (BwdRowsPerStep), so
// that at any time the CTAs of a wave read neighbouring steps: one front
// through memory rather than one per CTA (H200: 0.94-0.98x the time at
// 65536+ rows and H <= 6144, D = 256 views 0.95-0.98x, gated 0.98-0.99x).
// Blocks stay contiguous (one unit) where a step is one row of 16 KB or more
// of each tensor (H > 8192, and H = 8192 with the gate: at H = 8192 one row
// a step interleaved ran 1.05-1.06x, units of 4 rows 1.00-1.04x, 2026-11-29)
// and where a block is not whole steps (the small-T blocks of whole row
// groups). H = 8192 without the gate now takes two rows a step
// (BwdRingPairs), and interleaved by steps its backward ran 0.92-0.95x the
// time at 16384-131072 rows, units of 4 steps 0.96-0.98x, of 16 steps
// 0.98-1.00x (2026-12-01). Which rows a block sums is a function of the
// shape only.
inline constexpr int64_t kBwdContiguousRowBytes = 16384;
constexpr int64_t BwdUnitRows(int64_t rows_per_block, int64_t step_rows, int64_t dim) {
  if (step_rows <= 0 || rows_per_block % step_rows != 0) return rows_per_block;
  return dim * 2 >= kBwdContiguousRowBytes && step_rows < 2 ? rows_per_block : step_rows;
}

// The deterministic backward's row partition: a function of (rows, dim, op)
// and the program only, never of the SM count or the grid, so its dw partial
// rows and their reduce order are the same on every device and grid size.
// The target count of blocks is 132 per backward CTA an SM holds at that dim
// and op (1 to 8): one block per CTA of a full wave on a 132-SM H200, with
// the partials at most 17 MB (FP64) (dim 16384), inside L2 for the reduce.
// Two blocks per resident CTA (256 per CTA an SM holds, before) left about
// 3% of the CTAs with one block and wrote twice the partials: 0.92-0.99x the
// time at 65536 rows and more (H200), where 1.45 blocks per CTA (the gated
// rows, counted with the CTAs of the ungated backward) ran 1.2x.
inline constexpr int64_t kDetBlocksPerCtaPerSm = 132;
constexpr int64_t DetTargetPartials(const RowConfig& c, bool gate) {
  return kDetBlocksPerCtaPerSm *
         c.ctas_per_sm(BwdThreadsPerSm(c.threads_per_row, c.vecs_per_thread, gate));
}
constexpr int64_t DetTargetPartials(int64_t dim, bool gate) {
  return DetTargetPartials(BackwardRowConfigOf(dim, gate), gate);
}

struct DetPartition {
  int64_t rows_per_block = 0;
  int64_t partials = 0;
};

// The bytes of one element of a dw partial row. Each partial is the FP64 fold
// of a block's Kahan sums, rounded once to FP32 above H = 4096 without the
// gate, where the partial rows and the reduce after the grid are largest: on
// the H200 the backward at [4096, 8192] 0.949x the time, [16384, 4608-6144]
// 0.971-0.980x, [16384, 8192] 0.986-0.995x, 65536+ rows 0.992-0.999x, 4096
// rows of H = 4608-6144 level; the worst dw error at T = 131072 0.394 of the
// budget at H = 8192 (0.27 with FP64 partials), 0.263 at 5120, 0.281 at 16384
// (0.25). (At H = 1536-4096 they had run 0.98-1.01x.) The rounding is
// relative to each partial, so it does not grow with T. The gated op keeps
// FP64 partials: they hold its dw within the budget for |z| up to 30.
inline constexpr int64_t kFp32PartialsFromDim = 4104;  // the first width past 4096
constexpr int DwPartialBytes(int64_t dim, bool gate) {
  return !gate && dim >= kFp32PartialsFromDim ? 4 : 8;
}
// At least this many rows per partial: a partial row is DwPartialBytes per
// column against 4 bytes per column and row of x and dy, so the partials
// (written once, read by the reduce) stay within a quarter of the input: 8
// rows with FP64 partials, 4 with FP32 ones. With one or two rows per block
// (small T) they had been larger than it. FP32 partial rows of 4 rows in
// place of 8 ran det.partials 0.86-0.91x the time at 768-1280 rows of H =
// 4608-6144, where blocks of 8 left CTAs idle (H200, 2026-12-01,
// bench/results/2026-12-01-h200-bwd-wide-ring.txt, run 7).
constexpr int64_t MinRowsPerPartial(int64_t dim, bool gate) {
  return DwPartialBytes(dim, gate) == 4 ? 4 : 8;
}
// Whether a backward row group of `threads_per_row` threads (0: set at run
// time, up to kMaxWideBlock) of `vecs_per_thread` vectors each holds rows as
// wide as those DwPartialBytes gives FP32 partial rows. The kernel instances
// that cannot are built without the FP32 store: with a run-time choice in
// every instance, the backward at H = 1536 (96 threads a row) ran 1.06-1.12x
// the time on the H200.
constexpr bool BwdMayWriteFp32Partials(int threads_per_row, int vecs_per_thread, bool gate) {
  return !gate && int64_t{threads_per_row > 0 ? threads_per_row : kMaxWideBlock} *
                          vecs_per_thread * kVecElems >= kFp32PartialsFromDim;
}

// Of a program's config `c` for rows of `dim` (the det.partials and
// det.lockstep programs).
constexpr DetPartition DetPartitionOf(int64_t rows, int64_t dim, const RowConfig& c, bool gate) {
  DetPartition p;
  const int64_t per_block = CeilDiv(rows, DetTargetPartials(c, gate));
  const int64_t min_rows = MinRowsPerPartial(dim, gate);
  p.rows_per_block = BwdBlockRows(per_block < min_rows ? min_rows : per_block, c, gate);
  p.partials = rows == 0 ? 0 : CeilDiv(rows, p.rows_per_block);
  return p;
}
constexpr DetPartition DetPartitionOf(int64_t rows, int64_t dim, bool gate) {
  return DetPartitionOf(rows, dim, BackwardRowConfigOf(dim, gate), gate);
}

// Row groups per dx CTA of the split backward of rows of `dim` in config c:
// each thread loads its vectors of that many rows before reducing any
// (bytes in flight without a persistent loop), up to 4 vectors of x and of
// dy per thread (2 with z), and whole groups per block of the partition.
// Without z, two row groups of three vectors (6 of each tensor, 80
// registers and no spills with the weight read through L1 in each pass) up
// to kSplitPairDimMax: at H = 4608 they ran 0.937-0.981x the time of one
// row at 1024-16384 rows, at 5120 0.961-0.972x at 1024-2048 rows and level
// from 4096, but at 6144 1.02x from 4096 rows; rows of 4 vectors two to a
// CTA (H = 6656-8192, 124 registers, two CTAs per SM) ran 1.004-1.055x at
// 1024-4096 rows (H200, 2026-11-30).
inline constexpr int64_t kSplitPairDimMax = 5120;
constexpr int SplitGroupsOf(const RowConfig& c, bool gate, int64_t dim) {
  const bool pair = !gate && c.vecs_per_thread == 3 && dim <= kSplitPairDimMax;
  const int by_regs = pair ? 2 : (gate ? 2 : 4) / c.vecs_per_thread;
  const int by_block = static_cast<int>(kSplitRowsPerPartial / c.rows_per_cta());
  const int g = by_regs < by_block ? by_regs : by_block;
  return g < 1 ? 1 : g;
}

// How far ahead of its own rows a dx CTA of the split backward prefetches
// rows into L2 (cp.async.bulk.prefetch.L2 of x and dy, one instruction
// each), 0 for none: 1 MB of each tensor, where rows are wider than a warp
// (D > 512) and packed (row r at r * dim), from 4096 rows. On the H200
// that ran 0.93-0.99x the time at 4096-16384 rows of H = 1024..8192 ([4096,
// 2048] 24.5 -> 23.7 us, [4096, 6144] 58.7 -> 55.3; [4096, 768] 1.01x). With
// the 64-thread rows at H = 520..1024, turning it off there ran 0.99-1.01x
// at 4096 rows and 1.02-1.07x at 8192-16384.
// Before, by rows: 256 ahead ran 0.96-0.98x at H = 1536..3200 and 1.00-1.02x
// at 4096..8192, where 128 ran 0.97-0.99x; at 1024 rows 0.99-1.05x (the
// first wave of CTAs already asks for most rows), on the D = 256 views
// 1.00-1.03x (2026-11-30, bench/results/2026-11-30-h200-bwd-flat-split-routing.txt).
inline constexpr int64_t kSplitL2AheadBytes = int64_t{1} << 20;
inline constexpr int64_t kSplitL2AheadMinRows = 4096;
constexpr int64_t SplitL2AheadRows(int64_t rows, int64_t dim, bool packed) {
  const bool on = packed && dim > 64 * kVecElems && rows >= kSplitL2AheadMinRows;
  return on ? CeilDiv(kSplitL2AheadBytes, dim * 2) : 0;
}

// The split backward's row partition, a function of the row count only:
// blocks of a multiple of kSplitRowsPerPartial rows (so a block is whole row
// groups of every SplitRowConfig and SplitGroupsOf), at most
// kSplitTargetPartials of them. A block's dw CTAs run next to its dx CTAs
// and find its rows in L2 if they are short-lived: 64 rows are two rounds
// of loads per warp. The FP64 partial rows then add 2 x 8 bytes per column
// and 64 rows against 4 bytes per column and row of x and dy (6%), less past
// 65536 rows, where the blocks grow so that the partials stay under 64 MB.
inline constexpr int64_t kSplitTargetPartials = 1024;
constexpr DetPartition SplitPartitionOf(int64_t rows) {
  DetPartition p;
  p.rows_per_block = RoundUp(CeilDiv(rows, kSplitTargetPartials), kSplitRowsPerPartial);
  if (p.rows_per_block == 0) p.rows_per_block = kSplitRowsPerPartial;
  p.partials = CeilDiv(rows, p.rows_per_block);
  return p;
}

}  // namespace cake

#endif  // CAKE_OPS_ROW_CONFIG_H_
