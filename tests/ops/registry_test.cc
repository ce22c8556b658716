#include "ops/registry.h"

#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/row_config.h"
#include "ops/row_kernels.h"
#include "ops/target.h"
#include "planner/validate.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::testing::HasSubstr;

TEST(RegistryTest, IdsAreUniqueAndWellFormed) {
  std::set<std::string> ids;
  const std::regex form(R"([a-z_]+\.[a-z_]+(\.[a-z_]+)*)");
  for (const ProgramInfo& p : Programs()) {
    EXPECT_TRUE(ids.insert(std::string(p.id)).second) << p.id;
    EXPECT_TRUE(std::regex_match(std::string(p.id), form)) << p.id;
    EXPECT_FALSE(p.summary.empty()) << p.id;
    EXPECT_NE(p.geometry, nullptr) << p.id;
    EXPECT_EQ(FindProgram(p.id), &p);
    if (p.dw_output == DwOutput::kPartials) {
      const ProgramInfo* reduce = FindProgram(p.reduce_program);
      ASSERT_NE(reduce, nullptr) << p.id;
      EXPECT_EQ(reduce->stage, Stage::kReduce);
      EXPECT_NE(p.workspace_bytes, nullptr);
    }
  }
  EXPECT_EQ(FindProgram("rmsnorm.fwd.v0"), nullptr);
}

TEST(RowConfigTest, EveryDimFitsItsRowConfigAndHasAKernel) {
  // The shared memory an sm_90a CTA may opt in to.
  const int64_t smem_optin = TargetDevice::ForArch("sm_90a")->max_smem_per_block_optin;
  for (int64_t dim = 8; dim <= kMaxDim; dim += 8) {
    const RowConfig fwd = CtaRowConfig(dim), bwd = BackwardRowConfig(dim);
    const RowConfig gated_bwd = GatedBackwardRowConfig(dim);
    for (const RowConfig c : {fwd, bwd, gated_bwd}) {
      ASSERT_GE(int64_t{c.threads_per_row} * c.vecs_per_thread * kVecElems, dim) << dim;
      ASSERT_LE(c.vecs_per_thread, kMaxVecsPerThread);
      ASSERT_EQ(c.block % c.threads_per_row, 0);
      ASSERT_LE(c.block, 1024);
    }
    // The forward's wide rows get a CTA each, so their barriers wait for no
    // other row.
    if (fwd.threads_per_row > 32) {
      ASSERT_EQ(fwd.rows_per_cta(), 1) << dim;
    }
    // The backward's wide rows: where a power of two of threads holds a row
    // that comes through the ring, one CTA holds as many row groups as an
    // SM's backward threads take (they reduce in lockstep), else one. Its
    // weight (FP32, or BF16 where kept so), ring and fold fit a CTA's shared
    // memory. The gate's rows are the same but for whole warps of 2 vectors
    // wider than kGateRing768MaxThreads (D = 6152..6552), which take 512.
    for (bool gate : {false, true}) {
      const RowConfig c = gate ? gated_bwd : bwd;
      const bool gate_pow2 = gate && dim >= 6152 && dim <= 6552;
      ASSERT_EQ(gate_pow2, bwd.vecs_per_thread == 2 && !IsPow2(bwd.threads_per_row) &&
                               bwd.threads_per_row > kGateRing768MaxThreads && gate)
          << dim;
      // Warp rows of 3 vectors at 520..768 and of 4 at 776..1024 (BwdRing),
      // with the gate or without, but for the gate's rows of 64 threads of 2
      // at D = 1024.
      const bool warp3 = dim > 512 && dim <= 768;
      const bool warp4 = dim > 768 && dim <= 1024;
      ASSERT_EQ(bwd.threads_per_row == 32 && bwd.vecs_per_thread == 3, warp3) << dim;
      ASSERT_EQ(bwd.threads_per_row == 32 && bwd.vecs_per_thread == 4, warp4) << dim;
      if (gate && dim == 1024) {
        ASSERT_EQ(c.threads_per_row, 64) << dim;
        ASSERT_EQ(c.vecs_per_thread, 2) << dim;
      } else {
        ASSERT_EQ(c.threads_per_row, gate_pow2 ? 512 : bwd.threads_per_row) << dim;
        ASSERT_EQ(c.vecs_per_thread, bwd.vecs_per_thread) << dim;
      }
      ASSERT_LE(c.block, BwdThreadsPerSm(c.threads_per_row, c.vecs_per_thread, gate)) << dim;
      for (bool dh_in : {false, true}) {
        for (bool w_fp32 : {false, true}) {
          const bool bf16_w = BwdBf16WeightSmem(c.threads_per_row, c.vecs_per_thread, gate, w_fp32);
          // Every row of 4 vectors comes through the ring; z through one
          // stage where an FP32 weight leaves no room for two (the gate's
          // 512-thread rows).
          ASSERT_EQ(BwdAsyncStages(c.threads_per_row, c.vecs_per_thread, gate, dh_in) > 0,
                    BwdRing(c.threads_per_row, c.vecs_per_thread, gate) || c.vecs_per_thread == 4)
              << dim;
          ASSERT_EQ(BwdZOneStage(c.threads_per_row, c.vecs_per_thread, gate, bf16_w),
                    gate && dim > 13104 && w_fp32)
              << dim;
          ASSERT_LE(BwdWeightSmemBytes(dim, bf16_w) + BwdRingBytes(c, gate, dh_in, bf16_w) +
                        BwdFoldBytes(c, dim, gate),
                    smem_optin)
              << dim;
        }
        // The instance's registers for a whole CTA fit an SM's register file.
        ASSERT_LE(int64_t{BwdInstanceMaxRegs(c.threads_per_row, c.vecs_per_thread, gate, dh_in)} *
                      c.block,
                  kSmRegisters)
            << dim;
      }
      if (c.threads_per_row <= 32) continue;
      if (IsPow2(c.threads_per_row) && BwdRing(c.threads_per_row, c.vecs_per_thread, gate)) {
        ASSERT_GT(c.block + c.threads_per_row,
                  BwdThreadsPerSm(c.threads_per_row, c.vecs_per_thread, gate))
            << dim;
      } else {
        ASSERT_EQ(c.rows_per_cta(), 1) << dim;
      }
    }
    // The forward takes the fewest threads, a power of two, that hold the row:
    // half as many would not.
    if (fwd.threads_per_row > 64) {
      ASSERT_LT(int64_t{fwd.threads_per_row / 2} * kMaxVecsPerThread * kVecElems, dim) << dim;
    }
    // The backward's wide rows are whole warps, never with more idle vector
    // slots than the power-of-two config would leave.
    if (bwd.threads_per_row > 32) {
      ASSERT_EQ(bwd.threads_per_row % 32, 0) << dim;
      const RowConfig p2 = WideRowConfig(dim, dim <= 8192 ? 2 : 4, /*pow2=*/true);
      ASSERT_LE(int64_t{bwd.threads_per_row} * bwd.vecs_per_thread,
                int64_t{p2.threads_per_row} * p2.vecs_per_thread)
          << dim;
    }
    ASSERT_LE(fwd.block, kMaxWideBlock);
    // The backward holds at most 2 vectors per thread up to dim 8192, but
    // for its warp rows of 3 and 4.
    if (dim <= 8192 && !(bwd.threads_per_row == 32 && bwd.vecs_per_thread >= 3)) {
      ASSERT_LE(bwd.vecs_per_thread, 2) << dim;
    }
    // Every forward instance has its reverse twin (the recompute's).
    const void* persistent = RowForwardKernel(fwd.threads_per_row, fwd.vecs_per_thread);
    ASSERT_NE(persistent, nullptr) << dim;
    const void* persistent_rev = RowForwardKernel(fwd.threads_per_row, fwd.vecs_per_thread, true);
    ASSERT_NE(persistent_rev, nullptr) << dim;
    ASSERT_NE(persistent_rev, persistent) << dim;
    for (bool gate : {false, true}) {
      const RowConfig c = gate ? gated_bwd : bwd;
      for (bool dh_in : {false, true}) {
        for (bool w_fp32 : {false, true}) {
          ASSERT_NE(
              RowBackwardKernel(c.threads_per_row, c.vecs_per_thread, gate, dh_in, c.block, w_fp32),
              nullptr)
              << dim;
        }
      }
      // A BF16 weight kept as such has an instance of its own (the ring's),
      // exactly where BwdBf16WeightSmem says, which rows of 4 vectors in
      // 512 threads with the gate alone get.
      const bool bf16_own =
          RowBackwardKernel(c.threads_per_row, c.vecs_per_thread, gate, false, c.block, false) !=
          RowBackwardKernel(c.threads_per_row, c.vecs_per_thread, gate, false, c.block, true);
      ASSERT_EQ(bf16_own, BwdBf16WeightSmem(c.threads_per_row, c.vecs_per_thread, gate, false))
          << dim;
      ASSERT_EQ(bf16_own, gate && dim > 13104) << dim;
    }
    // The residual's dh_in has instances of its own where rows come through
    // the ring, and only there.
    const bool own =
        RowBackwardKernel(bwd.threads_per_row, bwd.vecs_per_thread, false, true, bwd.block,
                          false) !=
        RowBackwardKernel(bwd.threads_per_row, bwd.vecs_per_thread, false, false, bwd.block, false);
    ASSERT_EQ(own, BwdDhInEarly(bwd.threads_per_row, bwd.vecs_per_thread)) << dim;
    // The det.lockstep program: det.partials' rows, with several row groups
    // per CTA exactly where det.partials has one at a width built for it,
    // each with a kernel of its own (with and without dh_in) that fits.
    const RowConfig lock = LockstepBackwardRowConfig(dim);
    ASSERT_EQ(lock.threads_per_row, bwd.threads_per_row) << dim;
    ASSERT_EQ(lock.vecs_per_thread, bwd.vecs_per_thread) << dim;
    const bool lockstep_only = lock.block != bwd.block;
    ASSERT_EQ(lockstep_only, BwdLockstepWidth(bwd.threads_per_row) && bwd.rows_per_cta() == 1 &&
                                 BwdRing(bwd.threads_per_row, bwd.vecs_per_thread, false))
        << dim;
    if (lockstep_only) {
      ASSERT_GT(lock.rows_per_cta(), 1) << dim;
      ASSERT_LE(lock.block, BwdThreadsPerSm(lock.threads_per_row, lock.vecs_per_thread)) << dim;
      // Its CTAs per SM hold as many row groups as fit the SM's threads.
      const int per_sm = BwdThreadsPerSm(lock.threads_per_row, lock.vecs_per_thread);
      ASSERT_EQ(lock.ctas_per_sm(per_sm), kLockstepCtasPerSm) << dim;
      ASSERT_GT(lock.ctas_per_sm(per_sm) * lock.block + lock.threads_per_row, per_sm) << dim;
      for (bool dh_in : {false, true}) {
        ASSERT_LE(dim * 4 + BwdRingBytes(lock, false, dh_in) + BwdFoldBytes(lock, dim, false),
                  smem_optin)
            << dim;
        const void* k = RowBackwardKernel(lock.threads_per_row, lock.vecs_per_thread, false,
                                          dh_in, lock.block, false);
        ASSERT_NE(k, nullptr) << dim;
        ASSERT_NE(k, RowBackwardKernel(bwd.threads_per_row, bwd.vecs_per_thread, false, dh_in,
                                       bwd.block, false))
            << dim;
      }
    }
    // The flat forward: the row fits, one or two vectors per thread, whole
    // warps for a wide row, a CTA of at most 1024 threads, a kernel built.
    const RowConfig flat = FlatRowConfig(dim);
    ASSERT_GE(int64_t{flat.threads_per_row} * flat.vecs_per_thread * kVecElems, dim) << dim;
    ASSERT_LE(flat.vecs_per_thread, 2) << dim;
    ASSERT_LE(flat.block, kMaxFlatBlock) << dim;
    ASSERT_GE(flat.rows_per_cta(), 1) << dim;
    if (flat.threads_per_row > 32) {
      ASSERT_EQ(flat.threads_per_row % 32, 0) << dim;
    }
    // H = 520..1024: row groups of 64 threads, four to a 256-thread CTA,
    // each thread's first vector in the row.
    if (dim >= 520 && dim <= 1024) {
      ASSERT_EQ(flat.threads_per_row, 64) << dim;
      ASSERT_EQ(flat.block, kWarpBlock) << dim;
      ASSERT_EQ(flat.rows_per_cta(), 4) << dim;
      ASSERT_LE(int64_t{flat.threads_per_row} * kVecElems, dim) << dim;
    } else if (flat.threads_per_row > 32) {
      ASSERT_EQ(flat.block, flat.threads_per_row) << dim;
    }
    // The gated groups program (rmsnorm_silu_gate.fwd.flat.groups) runs
    // fwd.flat's 64-thread groups with the gate: instances of their own.
    if (dim >= kFlatGroupDimMin && dim <= kFlatGroupDimMax) {
      for (bool slots : {false, true}) {
        for (bool reverse : {false, true}) {
          const void* gated = RowForwardFlatKernel(flat, true, false, slots, reverse);
          ASSERT_NE(gated, nullptr) << dim;
          ASSERT_NE(gated, RowForwardFlatKernel(flat, false, false, slots, reverse)) << dim;
        }
      }
    }
    // The gated flat forward: one row of the CTA's threads above 64 vectors.
    const RowConfig gate_flat = GateFlatRowConfig(dim);
    if (dim > 512) {
      ASSERT_EQ(gate_flat.block, gate_flat.threads_per_row) << dim;
      ASSERT_GE(int64_t{gate_flat.threads_per_row} * 2 * kVecElems, dim) << dim;
    } else {
      ASSERT_EQ(gate_flat.threads_per_row, flat.threads_per_row) << dim;
      ASSERT_EQ(gate_flat.block, flat.block) << dim;
    }
    // With and without the weight's slots, two instances.
    for (bool gate : {false, true}) {
      const RowConfig& c = gate ? gate_flat : flat;
      const void* with = RowForwardFlatKernel(c, gate, false, true);
      ASSERT_NE(with, nullptr) << dim;
      ASSERT_NE(with, RowForwardFlatKernel(c, gate, false, false)) << dim;
      for (bool slots : {false, true}) {
        const void* fwd_rev = RowForwardFlatKernel(c, gate, false, slots, true);
        ASSERT_NE(fwd_rev, nullptr) << dim;
        ASSERT_NE(fwd_rev, RowForwardFlatKernel(c, gate, false, slots)) << dim;
      }
    }
    // fwd.flat.dense: an instance of its own at two vectors per thread, the
    // plain one (already at 32 registers) at one.
    // Its rows are fwd.flat's but at H = 1032..1536: 96 threads two to a CTA.
    const RowConfig dense_cfg = DenseFlatRowConfig(dim);
    if (dim >= 1032 && dim <= 1536) {
      ASSERT_EQ(dense_cfg.threads_per_row, 96) << dim;
      ASSERT_EQ(dense_cfg.block, 192) << dim;
      ASSERT_EQ(dense_cfg.vecs_per_thread, 2) << dim;
      ASSERT_LE(int64_t{dense_cfg.threads_per_row} * kVecElems, dim) << dim;
      ASSERT_GE(int64_t{dense_cfg.threads_per_row} * 2 * kVecElems, dim) << dim;
    } else {
      ASSERT_EQ(dense_cfg.threads_per_row, flat.threads_per_row) << dim;
      ASSERT_EQ(dense_cfg.block, flat.block) << dim;
    }
    for (bool slots : {false, true}) {
      const void* dense = RowForwardFlatKernel(dense_cfg, false, true, slots);
      ASSERT_NE(dense, nullptr) << dim;
      ASSERT_EQ(dense == RowForwardFlatKernel(flat, false, false, slots), flat.vecs_per_thread == 1)
          << dim;
      const void* dense_rev = RowForwardFlatKernel(dense_cfg, false, true, slots, true);
      ASSERT_NE(dense_rev, nullptr) << dim;
      ASSERT_NE(dense_rev, dense) << dim;
    }
    for (bool residual : {false, true}) {
      const void* loop_fwd = RowForwardLoopKernel(residual, LoopRuntimeStride(dim));
      ASSERT_NE(loop_fwd, nullptr) << dim;
      ASSERT_NE(RowForwardLoopKernel(residual, LoopRuntimeStride(dim), true), loop_fwd) << dim;
    }
    const RowConfig loop = LoopRowConfig(dim);
    ASSERT_GE(int64_t{loop.threads_per_row} * loop.vecs_per_thread * kVecElems, dim) << dim;
    // The constant-stride loop steps by kLoopBlock: it must run that many threads.
    if (!LoopRuntimeStride(dim)) {
      ASSERT_EQ(loop.block, kLoopBlock) << dim;
    }
    ASSERT_EQ(loop.block % 32, 0) << dim;
    ASSERT_LE(loop.block, kWideLoopBlock) << dim;
    // The split backward's dx role, up to its largest dim.
    if (dim <= kMaxSplitDim) {
      const RowConfig split = SplitRowConfig(dim);
      ASSERT_GE(int64_t{split.threads_per_row} * split.vecs_per_thread * kVecElems, dim) << dim;
      ASSERT_EQ(split.block, kSplitBlock) << dim;
      // A CTA-wide row's last vector slot holds columns (3 vectors at H = 4104..6144).
      if (split.threads_per_row == kSplitBlock) {
        ASSERT_LT(int64_t{split.threads_per_row} * (split.vecs_per_thread - 1) * kVecElems, dim)
            << dim;
      }
      for (bool gate : {false, true}) {
        ASSERT_NE(RowBackwardSplitKernel(split.threads_per_row, split.vecs_per_thread, gate,
                                         SplitGroupsOf(split, gate, dim)),
                  nullptr)
            << dim << (gate ? " gate" : "");
      }
    }
    if (dim <= kMaxWarpRowDim) {
      const RowConfig w = WarpRowConfig(dim);
      ASSERT_LE(w.threads_per_row, 32);
      ASSERT_GE(int64_t{w.threads_per_row} * w.vecs_per_thread * kVecElems, dim) << dim;
      ASSERT_NE(RowForwardKernel(w.threads_per_row, w.vecs_per_thread), nullptr) << dim;
      ASSERT_NE(RowForwardKernel(w.threads_per_row, w.vecs_per_thread, true), nullptr) << dim;
    }
  }
}

TEST(RowConfigTest, DetPartitionCoversRowsExactlyOnce) {
  for (int64_t rows : {1, 7, 255, 256, 257, 1024, 46593, 131072, 1572864}) {
    for (int64_t dim : {64, 256, 1536, 4096, 6144, 16384}) {
      for (bool gate : {false, true}) {
        const DetPartition p = DetPartitionOf(rows, dim, gate);
        ASSERT_GE(p.partials * p.rows_per_block, rows);
        ASSERT_LT((p.partials - 1) * p.rows_per_block, rows) << "an empty block";
        ASSERT_LE(p.partials, DetTargetPartials(dim, gate));
        ASSERT_LE(p.partials * dim * 8, int64_t{32} << 20) << "partials stay inside L2";
        const RowConfig c = BackwardRowConfigOf(dim, gate);
        const int64_t step = BwdRowsPerStep(c, gate);
        ASSERT_EQ(p.rows_per_block % c.rows_per_cta(), 0) << "whole row groups";
        if (p.rows_per_block >= 2 * step) {
          ASSERT_EQ(p.rows_per_block % step, 0)
              << "whole steps of the row groups a CTA loads together";
        }
        // A partial row's bytes per column within a quarter of the block's x
        // and dy (4 bytes a row).
        ASSERT_LE(4 * DwPartialBytes(dim, gate), 4 * p.rows_per_block)
            << "partials within a quarter of x and dy";
      }
    }
  }
}

// The backward's walk of its blocks (FirstUnit, Advance over BwdUnitRows),
// step by step as the kernel and its ring take them, and row by row: every
// row once, each block no more than its rows_per_block, the
// blocks interleaved by steps where a row holds under 16 KB of a tensor or
// a step holds two rows (H = 8192 without the gate).
TEST(RowConfigTest, BackwardBlocksWalkEveryRowOnce) {
  for (int64_t rows : {1, 7, 255, 257, 1024, 12480, 46593, 131072, 786432}) {
    for (int64_t dim : {128, 256, 1536, 2048, 6144, 8192}) {
      for (bool gate : {false, true}) {
        const RowConfig c = BackwardRowConfigOf(dim, gate);
        const int64_t step = BwdRowsPerStep(c, gate);
        const DetPartition det = DetPartitionOf(rows, dim, gate);
        const int64_t kb_rows = BwdBlockRows(CeilDiv(rows, 132 * 2), c, gate);
        for (const DetPartition& p : {det, DetPartition{kb_rows, CeilDiv(rows, kb_rows)}}) {
          const int64_t unit = BwdUnitRows(p.rows_per_block, step, dim);
          const bool whole_steps = p.rows_per_block % step == 0;
          if (whole_steps && (dim * 2 < kBwdContiguousRowBytes || step >= 2)) {
            ASSERT_EQ(unit, step) << rows << " x " << dim;
          } else {
            ASSERT_EQ(unit, p.rows_per_block) << rows << " x " << dim;
          }
          for (int64_t n : {step, int64_t{1}}) {
            std::vector<int> seen(rows, 0);
            for (int64_t b = 0; b < p.partials; ++b) {
              int64_t count = 0;
              UnitCursor at = FirstUnit(b, unit, rows);
              ASSERT_LT(at.at, rows) << "block " << b << " is empty";
              for (bool more = true; more;) {
                for (int64_t r = at.at; r < at.end && r < at.at + n; ++r, ++count) ++seen[r];
                more = Advance(at, n, unit, p.partials * unit, rows);
              }
              ASSERT_LE(count, p.rows_per_block) << "block " << b;
            }
            for (int64_t r = 0; r < rows; ++r) {
              ASSERT_EQ(seen[r], 1) << "row " << r << " of " << rows << " x " << dim;
            }
          }
        }
      }
    }
  }
}

// The 32-bit row counters of the backward (FirstUnit, Advance over
// uint32_t) walk a block's units as the 64-bit ones do up to kMaxRows rows:
// the first and last blocks of partitions near 2^31 rows, unit by unit,
// with units of a step (H = 2048, 4096, 8192) and of a whole block
// (H = 16384).
TEST(RowConfigTest, BackwardRowCountersIn32BitsWalkAsIn64) {
  for (int64_t rows : {kMaxRows, kMaxRows - 5, int64_t{1} << 30, int64_t{3} << 29}) {
    for (int64_t dim : {2048, 4096, 8192, 16384}) {
      const RowConfig c = BackwardRowConfigOf(dim, false);
      const int64_t step = BwdRowsPerStep(c, false);
      const DetPartition p = DetPartitionOf(rows, dim, false);
      const int64_t unit = BwdUnitRows(p.rows_per_block, step, dim);
      const int64_t stride = p.partials * unit;
      ASSERT_LE(stride, kMaxRows + unit) << rows;
      for (int64_t b : {int64_t{0}, p.partials - 2, p.partials - 1}) {
        UnitCursor wide = FirstUnit(b, unit, rows);
        UnitCursorOf<uint32_t> narrow = FirstUnit<uint32_t>(
            static_cast<uint32_t>(b), static_cast<uint32_t>(unit), static_cast<uint32_t>(rows));
        int64_t units = 0, covered = 0;
        for (bool more = true; more; ++units) {
          covered += wide.end - wide.at;
          ASSERT_EQ(int64_t{narrow.at}, wide.at) << rows << " block " << b << " unit " << units;
          ASSERT_EQ(int64_t{narrow.end}, wide.end) << rows << " block " << b << " unit " << units;
          more = Advance(wide, unit, unit, stride, rows);
          const bool narrow_more =
              Advance<uint32_t>(narrow, static_cast<uint32_t>(unit), static_cast<uint32_t>(unit),
                                static_cast<uint32_t>(stride), static_cast<uint32_t>(rows));
          ASSERT_EQ(narrow_more, more) << rows << " block " << b << " unit " << units;
        }
        ASSERT_GT(covered, 0) << rows << " block " << b;
        ASSERT_LE(covered, p.rows_per_block) << rows << " block " << b;
      }
    }
  }
}

TEST(RowConfigTest, SplitPartitionCoversRowsInWholeRowGroups) {
  for (int64_t rows : {1, 7, 63, 64, 65, 1024, 46593, 65536, 65537, 131072, 1572864}) {
    const DetPartition p = SplitPartitionOf(rows);
    ASSERT_GE(p.partials * p.rows_per_block, rows);
    ASSERT_LT((p.partials - 1) * p.rows_per_block, rows) << "an empty block";
    ASSERT_LE(p.partials, kSplitTargetPartials) << rows;
    ASSERT_EQ(p.rows_per_block % kSplitRowsPerPartial, 0) << rows;
    for (int64_t dim = 8; dim <= kMaxSplitDim; dim += 8) {
      for (bool gate : {false, true}) {
        const RowConfig c = SplitRowConfig(dim);
        const int groups = SplitGroupsOf(c, gate, dim);
        ASSERT_EQ(p.rows_per_block % (c.rows_per_cta() * groups), 0) << rows << " " << dim;
        // More than one row group only while the loads fit in registers:
        // up to 4 vectors a thread (2 with z), or two rows of 3 without z
        // up to kSplitPairDimMax.
        if (groups > 1) {
          const bool pair = !gate && c.vecs_per_thread == 3;
          ASSERT_LE(groups * c.vecs_per_thread, pair ? 6 : gate ? 2 : 4) << dim;
          ASSERT_TRUE(!pair || dim <= kSplitPairDimMax) << dim;
        }
      }
    }
  }
  EXPECT_EQ(SplitPartitionOf(65536).rows_per_block, 64);
  EXPECT_EQ(SplitPartitionOf(131072).rows_per_block, 128);
}

// The flat forward's launch holds each thread's weight slots (16 bytes a
// vector, 32 as FP32) up to 2^26 elements, none above: the launch then runs
// the instance that reads the weight through L1.
TEST(RegistryTest, FlatForwardWeightSlots) {
  const TargetDevice h200 = *TargetDevice::ForArch("sm_90a");
  const ProgramInfo* flat = FindProgram("rmsnorm.fwd.flat");
  ASSERT_NE(flat, nullptr);
  struct Case {
    int64_t tokens, dim;
    DType weight;
    int32_t smem;
  } cases[] = {
      {4096, 1536, BF16, 96 * 2 * 16},     // 96 threads x 2 vectors
      {4096, 1536, FP32, 96 * 2 * 32},
      {43690, 1536, BF16, 96 * 2 * 16},    // 67.1 M elements
      {4096, 768, BF16, 256 * 2 * 16},     // 4 rows of 64 threads x 2 vectors
      {43691, 1536, BF16, 0},              // past 2^26
      {131072, 2048, FP32, 0},
      {262144, 256, BF16, 256 * 2 * 16},   // 16 rows of 16 lanes x 2 vectors
  };
  for (const Case& c : cases) {
    StepSpec spec = testing::RowsSpec(c.tokens, c.dim, true, {FORWARD});
    spec.set_weight_dtype(c.weight);
    spec = *Canonicalize(spec);
    ASSERT_TRUE(CheckSupports(*flat, spec).ok()) << c.tokens;
    EXPECT_EQ(flat->geometry(spec, h200).dynamic_smem_bytes, c.smem)
        << c.tokens << " x " << c.dim;
  }
  // The dense program's rows above H = 8192 keep an FP32 weight in the slots
  // at any row count; a BF16 one, the flat program's and the gated ones keep
  // the rule.
  const ProgramInfo* dense = FindProgram("rmsnorm.fwd.flat.dense");
  const ProgramInfo* gate_dense = FindProgram("rmsnorm_silu_gate.fwd.flat.dense");
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(gate_dense, nullptr);
  for (int64_t dim : {8192, 8200, 12288, 16384}) {
    for (DType w : {BF16, FP32}) {
      StepSpec spec = testing::RowsSpec(65536, dim, true, {FORWARD});
      spec.set_weight_dtype(w);
      spec = *Canonicalize(spec);
      const RowConfig c = dense->row_config(dim);
      const bool slots = w == FP32 && dim > 8192;
      EXPECT_EQ(dense->geometry(spec, h200).dynamic_smem_bytes,
                slots ? c.block * c.vecs_per_thread * 32 : 0)
          << dim << " " << DType_Name(w);
      if (dim > 8192) {
        ASSERT_TRUE(CheckSupports(*flat, spec).ok()) << dim;
        EXPECT_EQ(flat->geometry(spec, h200).dynamic_smem_bytes, 0) << dim << " flat";
      }
      spec.set_op(RMSNORM_SILU_GATE);
      ASSERT_TRUE(CheckSupports(*gate_dense, spec).ok()) << dim;
      EXPECT_EQ(gate_dense->geometry(spec, h200).dynamic_smem_bytes, 0) << dim << " gated";
    }
  }
}

// The wide flat forward: at every width it takes, the row over the fewest
// whole warps of 4 vectors (256 threads of 3 at H = 6144), an instance for
// each of slots and direction, none with the gate.
TEST(RegistryTest, WideFlatRowsTakeTheFewestWarpsOfFourVectors) {
  const ProgramInfo* wide = FindProgram("rmsnorm.fwd.flat.wide");
  ASSERT_NE(wide, nullptr);
  EXPECT_EQ(wide->dim_min, 3072);
  EXPECT_EQ(wide->dim_max, 8192);
  for (int64_t dim = wide->dim_min; dim <= wide->dim_max; dim += 8) {
    const RowConfig c = wide->row_config(dim);
    ASSERT_EQ(c.block, c.threads_per_row) << dim;
    ASSERT_EQ(c.threads_per_row % 32, 0) << dim;
    ASSERT_EQ(c.vecs_per_thread, dim == 6144 ? 3 : 4) << dim;
    ASSERT_GE(int64_t{c.threads_per_row} * c.vecs_per_thread * kVecElems, dim) << dim;
    // No whole warp without a vector of the row.
    ASSERT_LT(int64_t{c.threads_per_row - 32} * c.vecs_per_thread * kVecElems, dim) << dim;
    ASSERT_GE(c.threads_per_row, 96) << dim;
    ASSERT_LE(c.threads_per_row, 256) << dim;
    std::set<const void*> kernels;
    for (bool slots : {false, true}) {
      for (bool reverse : {false, true}) {
        const void* k = RowForwardFlatKernel(c, false, false, slots, reverse);
        ASSERT_NE(k, nullptr) << dim;
        kernels.insert(k);
        EXPECT_EQ(RowForwardFlatKernel(c, true, false, slots, reverse), nullptr) << dim;
      }
    }
    EXPECT_EQ(kernels.size(), 4u) << dim;
  }
}

// Where DwPartialBytes gives a width FP32 partial rows, the row config of
// every backward that writes partial rows (the kernel instance's threads and
// vectors) is one built with the FP32 store (BwdMayWriteFp32Partials): an
// instance without it would write FP64 rows into a region sized for FP32.
TEST(RegistryTest, Fp32PartialRowsOnlyReachInstancesBuiltForThem) {
  int fp32_widths = 0;
  for (const ProgramInfo& program : Programs()) {
    if (program.stage != Stage::kBackward || program.dw_output != DwOutput::kPartials) continue;
    const bool gate = program.op == RMSNORM_SILU_GATE;
    for (int64_t dim = 8; dim <= kMaxDim; dim += 8) {
      if (DwPartialBytes(dim, gate) != 4) continue;
      StepSpec spec = testing::RowsSpec(4096, dim, true, {BACKWARD});
      spec.set_op(program.op);
      const absl::StatusOr<StepSpec> canonical = Canonicalize(spec);
      if (!canonical.ok() || !CheckSupports(program, *canonical).ok()) continue;
      const RowConfig cfg = program.row_config(dim);
      EXPECT_TRUE(BwdMayWriteFp32Partials(cfg.threads_per_row, cfg.vecs_per_thread, gate))
          << program.id << " at H = " << dim << ": " << cfg.threads_per_row << " threads x "
          << cfg.vecs_per_thread;
      ++fp32_widths;
    }
  }
  EXPECT_GT(fp32_widths, 0);
  // And the narrow instances are built without it: 96 threads of 2 vectors
  // (H = 1536), 256 of 2 (H = 4096), the gated op at any width.
  EXPECT_FALSE(BwdMayWriteFp32Partials(96, 2, false));
  EXPECT_FALSE(BwdMayWriteFp32Partials(256, 2, false));
  EXPECT_FALSE(BwdMayWriteFp32Partials(0, 4, true));
  EXPECT_TRUE(BwdMayWriteFp32Partials(0, 2, false));
}

// Block by block of its partition, the split backward launches a dx CTA per
// row group and a dw CTA per 256-column tile; the reduce reads its partials.
TEST(RegistryTest, SplitBackwardGeometry) {
  const TargetDevice h200 = *TargetDevice::ForArch("sm_90a");
  const ProgramInfo* split = FindProgram("rmsnorm.bwd.split");
  ASSERT_NE(split, nullptr);
  struct Case {
    int64_t tokens, dim, dx_ctas_per_block;
  } cases[] = {
      {1024, 2048, 16},    // 4 rows per CTA of 256 threads x 1 vector
      {46593, 8192, 64},   // 256 threads x 4 vectors, one row
      {7, 128, 1},         // 4 groups of 16 rows of 16 lanes per CTA
      {4096, 512, 4},      // 2 groups of 8 rows of 32 lanes x 2 vectors
      {131072, 4096, 64},  // 128 rows per block, 2 per CTA
      {4096, 768, 8},      // 2 groups of 4 rows of 64 threads x 2 vectors per CTA
      {4096, 2304, 16},    // 2 groups of 2 rows of 128 threads x 3 vectors per CTA
      {4096, 4608, 32},    // 256 threads x 3 vectors, two rows (kSplitPairDimMax)
      {4096, 5128, 64},    // 256 threads x 3 vectors, one row
  };
  for (const Case& c : cases) {
    const StepSpec spec = *Canonicalize(testing::RowsSpec(c.tokens, c.dim, true, {BACKWARD}));
    ASSERT_TRUE(CheckSupports(*split, spec).ok()) << c.dim;
    const Geometry g = split->geometry(spec, h200);
    const DetPartition p = SplitPartitionOf(c.tokens);
    const int64_t tiles = (c.dim / 8 + 31) / 32;
    EXPECT_EQ(g.grid.x(), p.partials * (c.dx_ctas_per_block + tiles)) << c.dim;
    const RowConfig cfg = SplitRowConfig(c.dim);
    EXPECT_EQ(c.dx_ctas_per_block * cfg.rows_per_cta() * SplitGroupsOf(cfg, false, c.dim),
              p.rows_per_block);
    EXPECT_EQ(g.block.x(), 256u);
    EXPECT_EQ(g.partials, p.partials);
    EXPECT_EQ(g.rows_per_block, p.rows_per_block);
    // FP64 partial rows, FP32 above H = 4096 (DwPartialBytes).
    EXPECT_EQ(split->workspace_bytes(spec, g), p.partials * c.dim * (c.dim > 4096 ? 4 : 8))
        << c.dim;
  }
  const StepSpec wide = *Canonicalize(testing::RowsSpec(8, 16384, true, {BACKWARD}));
  EXPECT_FALSE(CheckSupports(*split, wide).ok()) << "dim above 8192";
}

// Gated rows of D = 128 take one row group of 16 rows per step (three
// 256-thread CTAs per SM): blocks of whole row groups, which are whole
// steps. The suite's 260x48, 12480 rows over 132 x 3 target blocks, gives
// blocks of 32 rows. Without the gate, D = 256 takes three row groups of 8
// rows per step: blocks of whole steps from two steps up, of whole row
// groups below.
// At few rows a block has at least 8 rows where its partial row is FP64 and
// 4 where it is FP32 (H > 4096 without the gate), so that the partials stay
// within a quarter of x and dy; more rows share out over the target count.
TEST(RowConfigTest, BlocksOfFewRowsFollowThePartialRowsBytes) {
  EXPECT_EQ(DetTargetPartials(6144, false), 264);
  EXPECT_EQ(DetPartitionOf(1024, 6144, false).rows_per_block, 4);   // FP32, 1024 / 264 -> 4
  EXPECT_EQ(DetPartitionOf(1024, 6144, false).partials, 256);
  EXPECT_EQ(DetPartitionOf(512, 6144, false).rows_per_block, 4);    // 2 a block, raised to 4
  EXPECT_EQ(DetPartitionOf(1280, 6144, false).rows_per_block, 5);
  EXPECT_EQ(DetPartitionOf(512, 1536, false).rows_per_block, 8);    // FP64: 1 raised to 8
  EXPECT_EQ(DetPartitionOf(1024, 6144, true).rows_per_block, 8);    // gated: FP64
}

TEST(RowConfigTest, BackwardBlocksAreWholeStepsFromTwoSteps) {
  const RowConfig gated = BackwardRowConfig(128);
  ASSERT_EQ(BwdRowsPerStep(gated, true), 16);
  EXPECT_EQ(BwdBlockRows(40, gated, true), 48);
  EXPECT_EQ(BwdBlockRows(63, gated, true), 64);
  EXPECT_EQ(BwdBlockRows(65, gated, true), 80);
  EXPECT_EQ(DetTargetPartials(128, true), 396);
  EXPECT_EQ(DetPartitionOf(260 * 48, 128, true).rows_per_block, 32);
  const RowConfig views = BackwardRowConfig(256);
  ASSERT_EQ(BwdRowsPerStep(views, false), 24);
  EXPECT_EQ(BwdBlockRows(42, views, false), 48);
  EXPECT_EQ(BwdBlockRows(49, views, false), 72);
}

TEST(RegistryTest, KbRowBlocksCoverRows) {
  const TargetDevice h200 = *TargetDevice::ForArch("sm_90a");
  for (int64_t dim : {128, 256, 4096}) {
    const RowConfig cfg = BackwardRowConfig(dim);
    for (int64_t tokens : {1, 7, 1024, 46593, 131072}) {
      StepSpec spec = *Canonicalize(testing::RowsSpec(tokens, dim, false));
      const Geometry g = FindProgram("rmsnorm.bwd.kb")->geometry(spec, h200);
      ASSERT_GE(g.grid.x() * g.rows_per_block, tokens);
      ASSERT_LT((g.grid.x() - 1) * g.rows_per_block, tokens);
      ASSERT_LE(g.grid.x(),
                132u * cfg.ctas_per_sm(BwdThreadsPerSm(cfg.threads_per_row, cfg.vecs_per_thread)));
      ASSERT_EQ(g.rows_per_block % cfg.rows_per_cta(), 0) << dim;
      if (g.rows_per_block >= 2 * BwdRowsPerStep(cfg, false)) {
        ASSERT_EQ(g.rows_per_block % BwdRowsPerStep(cfg, false), 0) << dim;
      }
    }
  }
}

// The backward's shared memory (weight, fold or ring) fits one CTA's opt-in
// limit, and the CTAs per SM that its grid counts as resident fit the SM's
// shared memory together (the H200's 228 KB, 1 KB reserved per CTA), at
// every dim, with and without z and with the fused residual's dh_in; one
// CTA more does not fit (threads, registers or shared memory), so that an
// SM never holds more than the grid's design (BwdCappedSmemBytes).
TEST(RegistryTest, BackwardSharedMemoryFitsTheResidentCtas) {
  const TargetDevice h200 = *TargetDevice::ForArch("sm_90a");
  constexpr int64_t kSmemPerSm = 228 * 1024, kReservedPerCta = 1024;
  for (int64_t dim = 8; dim <= kMaxDim; dim += 8) {
    for (int kind = 0; kind < 3; ++kind) {  // rows, gated rows, the fused residual's rows
      const bool gate = kind == 1, dh_in = kind == 2;
      StepSpec spec = testing::RowsSpec(65536, dim, true, {BACKWARD});
      if (gate) spec.set_op(RMSNORM_SILU_GATE);
      spec.set_residual(dh_in);
      spec.set_residual_grad_in(dh_in);
      spec = *Canonicalize(spec);
      for (const char* id : {"det.partials", "kb", "det.lockstep"}) {
        const std::string program =
            std::string(gate ? "rmsnorm_silu_gate.bwd." : "rmsnorm.bwd.") + id;
        if (gate && std::string(id) == "det.lockstep") continue;  // no gated program
        ASSERT_NE(FindProgram(program), nullptr) << program;
        const RowConfig cfg = FindProgram(program)->row_config(dim);
        const Geometry g = FindProgram(program)->geometry(spec, h200);
        ASSERT_LE(g.dynamic_smem_bytes, h200.max_smem_per_block_optin) << program << " " << dim;
        const int64_t ctas =
            cfg.ctas_per_sm(BwdThreadsPerSm(cfg.threads_per_row, cfg.vecs_per_thread, gate));
        ASSERT_LE(ctas * (g.dynamic_smem_bytes + kReservedPerCta), kSmemPerSm)
            << program << " dim " << dim << ": " << ctas << " CTAs of " << g.dynamic_smem_bytes
            << " bytes";
        const int64_t more = ctas + 1, warps = (cfg.block + 31) / 32;
        const bool threads_full = more * cfg.block > 2048;
        const int regs = BwdInstanceMaxRegs(cfg.threads_per_row, cfg.vecs_per_thread, gate, dh_in);
        const bool regs_full = more * warps * 32 * regs > 65536;
        const bool smem_full = more * (g.dynamic_smem_bytes + kReservedPerCta) > kSmemPerSm;
        ASSERT_TRUE(threads_full || regs_full || smem_full)
            << program << " dim " << dim << ": " << more << " CTAs of " << cfg.block
            << " threads and " << g.dynamic_smem_bytes << " bytes fit an SM";
      }
    }
  }
}

TEST(RegistryTest, CheckSupportsSaysWhatIsMissing) {
  StepSpec rows = *Canonicalize(testing::RowsSpec(8, 4096, true));
  EXPECT_THAT(std::string(CheckSupports(*FindProgram("rmsnorm.fwd.warp"), rows).message()),
              HasSubstr("takes dim 8..1024, not 4096"));
  EXPECT_THAT(std::string(CheckSupports(*FindProgram("rmsnorm.bwd.kb"), rows).message()),
              HasSubstr("rmsnorm.bwd.kb is not deterministic"));
  EXPECT_THAT(std::string(CheckSupports(*FindProgram("rmsnorm_silu_gate.fwd.cta"), rows).message()),
              HasSubstr("runs RMSNORM_SILU_GATE, not RMSNORM"));
  StepSpec gate = rows;
  gate.set_op(RMSNORM_SILU_GATE);
  gate.set_residual(true);
  EXPECT_THAT(std::string(CheckSupports(*FindProgram("rmsnorm_silu_gate.fwd.cta"), gate).message()),
              HasSubstr("has no fused residual"));
  EXPECT_TRUE(CheckSupports(*FindProgram("rmsnorm.bwd.det.partials"), rows).ok());
  // The L2-prefetch forwards need packed rows.
  StepSpec strided = *Canonicalize(testing::HeadsSpec(8, 24, 256, 8192, 256));
  EXPECT_THAT(std::string(CheckSupports(*FindProgram("rmsnorm.fwd.warp.prefetch"), strided).message()),
              HasSubstr("needs packed rows"));
  EXPECT_TRUE(CheckSupports(*FindProgram("rmsnorm.fwd.warp.prefetch"),
                            *Canonicalize(testing::HeadsSpec(8, 4, 256)))
                  .ok());
  // A deterministic program serves the non-deterministic mode too.
  rows.set_deterministic(false);
  EXPECT_TRUE(CheckSupports(*FindProgram("rmsnorm.bwd.det.partials"), rows).ok());
}

// The row layout's division by heads (a multiply and a shift) against the
// division it replaces, at the rows where an error would show first: around
// multiples of heads and up to the largest row it serves (2^31 - 1).
TEST(RowLayoutTest, HeadsQuotientIsExactDivision) {
  std::vector<int64_t> heads_list;
  for (int64_t h = 1; h <= 70; ++h) heads_list.push_back(h);
  for (int64_t h : {96, 127, 128, 1000, 4097, 65535, 1 << 20, (1 << 30) + 7}) heads_list.push_back(h);
  const int64_t max_rows = int64_t{1} << 31;
  uint64_t state = 88172645463325252ull;  // xorshift64
  for (int64_t heads : heads_list) {
    const RowLayout l = MakeRowLayout(max_rows, heads, 256, 8192, 256);
    ASSERT_NE(l.heads_mul, 0u) << heads;
    std::vector<int64_t> rows = {0, 1, max_rows - 1, max_rows - 2, max_rows - heads};
    for (int64_t q : {int64_t{1}, int64_t{2}, int64_t{1000}, (max_rows - 1) / heads}) {
      for (int64_t d = -1; d <= 1; ++d) rows.push_back(q * heads + d);
    }
    for (int k = 0; k < 2000; ++k) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      rows.push_back(static_cast<int64_t>(state % static_cast<uint64_t>(max_rows)));
    }
    for (int64_t r : rows) {
      if (r < 0 || r >= max_rows) continue;
      ASSERT_EQ(int64_t{HeadsQuotient32(l, static_cast<uint32_t>(r))}, r / heads)
          << "heads " << heads << " row " << r;
    }
  }
  // Past 2^31 rows (or heads) the layout divides (RowOffset).
  const RowLayout big = MakeRowLayout(max_rows + 1, 24, 256, 8192, 256);
  EXPECT_EQ(big.heads_mul, 0u);
  EXPECT_EQ(RowOffset(big, max_rows), max_rows / 24 * 8192 + max_rows % 24 * 256);
  EXPECT_EQ(MakeRowLayout(1000, max_rows + 1, 256, 0, 256).heads_mul, 0u);
}

// RowOffset against token * token_stride + head * head_stride with a plain
// division, on strided views (its 32-bit token and head), with strides past
// 2^16 and 2^20 whose offsets pass 2^32, negated (ReverseRows), and past 2^31
// rows (its division). Every offset here is below 2^53 in magnitude.
TEST(RowLayoutTest, RowOffsetIsTokenAndHeadStrides) {
  struct Case {
    int64_t rows, heads, dim, token_stride, head_stride;
  };
  const int64_t max_rows = int64_t{1} << 31;
  const std::vector<Case> cases = {
      {max_rows, 24, 256, 32 * 256, 256},           // q heads in a packed QKV row
      {max_rows, 3, 8, 40, 16},                     // gaps between heads
      {max_rows, 48, 128, 50 * 128, 128},
      {max_rows, 1000, 64, 1000 * 72 + 8, 72},
      {max_rows - 7, 7, 1024, (int64_t{1} << 24) + 8, (int64_t{1} << 21) + 8},  // past 2^32
      {max_rows, 65535, 16, 65535 * 16 + 64, 16},
      {max_rows + 48, 24, 256, 32 * 256, 256},      // past 2^31 rows: divides
  };
  uint64_t state = 0x9E3779B97F4A7C15ull;  // xorshift64
  for (const Case& c : cases) {
    for (const bool reversed : {false, true}) {
      RowForwardParams p{};
      p.layout = MakeRowLayout(c.rows, c.heads, c.dim, c.token_stride, c.head_stride);
      ASSERT_EQ(p.layout.row_stride, 0) << c.heads;  // strided: RowOffset's own path
      EXPECT_EQ(p.layout.heads_mul != 0, c.rows <= max_rows) << c.rows;
      if (reversed) ReverseRows(p);
      const RowLayout& l = p.layout;
      std::vector<int64_t> rows = {0, 1, c.heads - 1, c.heads, c.rows - 1, c.rows - c.heads};
      for (int k = 0; k < 4000; ++k) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        rows.push_back(static_cast<int64_t>(state % static_cast<uint64_t>(c.rows)));
      }
      for (int64_t r : rows) {
        const int64_t want = r / c.heads * l.token_stride + r % c.heads * l.head_stride;
        ASSERT_EQ(RowOffset(l, r), want)
            << "heads " << c.heads << " row " << r << (reversed ? " reversed" : "");
      }
    }
  }
}

}  // namespace
}  // namespace cake
