#include "ops/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ops/row_config.h"
#include "ops/row_kernels.h"
#include "ops/shape.h"

namespace cake {
namespace {

Dim3 D3(int64_t x, int64_t y = 1, int64_t z = 1) {
  Dim3 d;
  d.set_x(static_cast<uint32_t>(x));
  d.set_y(static_cast<uint32_t>(y));
  d.set_z(static_cast<uint32_t>(z));
  return d;
}

// A persistent grid over row groups: no more CTAs than are resident at once.
Geometry PersistentRows(const RowConfig& cfg, int64_t rows, const TargetDevice& device) {
  const int64_t groups = CeilDiv(rows, cfg.rows_per_cta());
  const int64_t resident = int64_t{device.sm_count} * cfg.ctas_per_sm();
  Geometry g;
  g.grid = D3(std::max<int64_t>(1, std::min(groups, resident)));
  g.block = D3(cfg.block);
  return g;
}

// The forward keeps the weight in shared memory as FP32.
Geometry ForwardWarp(const StepSpec& spec, const TargetDevice& device) {
  const RowShape s = RowShapeOf(spec);
  Geometry g = PersistentRows(WarpRowConfig(s.dim), s.rows(), device);
  g.dynamic_smem_bytes = static_cast<int32_t>(s.dim * 4);
  return g;
}

Geometry ForwardCta(const StepSpec& spec, const TargetDevice& device) {
  const RowShape s = RowShapeOf(spec);
  Geometry g = PersistentRows(CtaRowConfig(s.dim), s.rows(), device);
  g.dynamic_smem_bytes = static_cast<int32_t>(s.dim * 4);
  return g;
}

// One row group of config `cfg` per CTA; each thread copies its weight
// vectors into shared memory where FlatWeightSlots (`fp32_wide_rows`: the
// dense program without the gate).
Geometry FlatRows(const RowConfig& cfg, const StepSpec& spec, bool fp32_wide_rows = false) {
  const RowShape s = RowShapeOf(spec);
  Geometry g;
  g.grid = D3(std::max<int64_t>(1, CeilDiv(s.rows(), cfg.rows_per_cta())));
  g.block = D3(cfg.block);
  if (FlatWeightSlots(s.rows(), s.dim, fp32_wide_rows && spec.weight_dtype() == FP32)) {
    g.dynamic_smem_bytes =
        static_cast<int32_t>(FlatWeightSmemBytes(cfg, spec.weight_dtype() == FP32));
  }
  return g;
}

Geometry ForwardFlat(const StepSpec& spec, const TargetDevice&) {
  return FlatRows(FlatRowConfig(spec.layout().dim()), spec);
}

Geometry ForwardFlatDense(const StepSpec& spec, const TargetDevice&) {
  return FlatRows(DenseFlatRowConfig(spec.layout().dim()), spec, /*fp32_wide_rows=*/true);
}

Geometry GateForwardFlat(const StepSpec& spec, const TargetDevice&) {
  return FlatRows(GateFlatRowConfig(spec.layout().dim()), spec);
}

Geometry ForwardFlatWide(const StepSpec& spec, const TargetDevice&) {
  return FlatRows(FlatWideRowConfig(spec.layout().dim()), spec);
}

// One row per CTA.
Geometry ForwardLoop(const StepSpec& spec, const TargetDevice&) {
  const RowShape s = RowShapeOf(spec);
  Geometry g;
  g.grid = D3(std::max<int64_t>(1, s.rows()));
  g.block = D3(LoopRowConfig(s.dim).block);
  return g;
}

// The backward keeps the weight in shared memory as FP32 (or as BF16,
// BwdBf16WeightSmem), copies the next rows into a ring there
// (BwdAsyncStages) and folds its row groups' dw sums there (BwdFoldBytes).
BackwardSmem BackwardSmemOf(const RowConfig& cfg, const StepSpec& spec, bool gate) {
  const int64_t dim = spec.layout().dim();
  const bool bf16_weight = BwdBf16WeightSmem(cfg.threads_per_row, cfg.vecs_per_thread, gate,
                                             spec.weight_dtype() == FP32);
  const int64_t ring = BwdRingBytes(cfg, gate, spec.residual_grad_in(), bf16_weight);
  return {BwdWeightSmemBytes(dim, bf16_weight) + ring + BwdFoldBytes(cfg, dim, gate),
          cfg.ctas_per_sm(BwdThreadsPerSm(cfg.threads_per_row, cfg.vecs_per_thread, gate))};
}
// What its launch asks for: at least as much as keeps its CTAs per SM at the
// config's (BwdCappedSmemBytes).
int32_t BackwardSmemBytes(const RowConfig& cfg, const StepSpec& spec, bool gate) {
  const BackwardSmem smem = BackwardSmemOf(cfg, spec, gate);
  const int regs = BwdInstanceMaxRegs(cfg.threads_per_row, cfg.vecs_per_thread, gate,
                                      spec.residual_grad_in());
  return static_cast<int32_t>(BwdCappedSmemBytes(smem.used, smem.ctas_per_sm, cfg.block, regs));
}

// A persistent grid over the fixed row blocks of config `cfg`'s partition.
Geometry DetBlocks(const RowConfig& cfg, const StepSpec& spec, const TargetDevice& device) {
  const RowShape s = RowShapeOf(spec);
  const bool gate = spec.op() == RMSNORM_SILU_GATE;
  const DetPartition p = DetPartitionOf(s.rows(), s.dim, cfg, gate);
  Geometry g;
  const int64_t resident = int64_t{device.sm_count} *
                           cfg.ctas_per_sm(BwdThreadsPerSm(cfg.threads_per_row,
                                                           cfg.vecs_per_thread, gate));
  g.grid = D3(std::max<int64_t>(1, std::min(p.partials, resident)));
  g.block = D3(cfg.block);
  g.dynamic_smem_bytes = BackwardSmemBytes(cfg, spec, gate);
  g.rows_per_block = p.rows_per_block;
  g.partials = p.partials;
  return g;
}

Geometry BackwardDetPartials(const StepSpec& spec, const TargetDevice& device) {
  return DetBlocks(BackwardRowConfigOf(spec.layout().dim(), spec.op() == RMSNORM_SILU_GATE), spec,
                   device);
}

Geometry BackwardDetLockstep(const StepSpec& spec, const TargetDevice& device) {
  return DetBlocks(LockstepBackwardRowConfig(spec.layout().dim()), spec, device);
}

// Per block of the split partition: its dx CTAs (SplitGroupsOf row groups
// each; the last block's may run past the rows and do nothing), then a dw
// CTA per 256-column tile.
Geometry BackwardSplit(const StepSpec& spec, const TargetDevice&) {
  const RowShape s = RowShapeOf(spec);
  const RowConfig cfg = SplitRowConfig(s.dim);
  const DetPartition p = SplitPartitionOf(s.rows());
  const int64_t tiles = CeilDiv(s.dim / kVecElems, 32);
  const int64_t cta_rows =
      int64_t{cfg.rows_per_cta()} * SplitGroupsOf(cfg, spec.op() == RMSNORM_SILU_GATE, s.dim);
  Geometry g;
  g.grid = D3(std::max<int64_t>(1, p.partials * (p.rows_per_block / cta_rows + tiles)));
  g.block = D3(cfg.block);
  g.rows_per_block = p.rows_per_block;
  g.partials = p.partials;
  return g;
}

int64_t DetPartialsBytes(const StepSpec& spec, const Geometry& g) {
  return DwPartialRowsBytes(spec, g.partials);
}

// Each persistent CTA owns one block of rows (read in units, BwdUnitRows).
Geometry BackwardKb(const StepSpec& spec, const TargetDevice& device) {
  const RowShape s = RowShapeOf(spec);
  const bool gate = spec.op() == RMSNORM_SILU_GATE;
  const RowConfig cfg = BackwardRowConfigOf(s.dim, gate);
  const int64_t resident = int64_t{device.sm_count} *
                           cfg.ctas_per_sm(BwdThreadsPerSm(cfg.threads_per_row,
                                                           cfg.vecs_per_thread, gate));
  Geometry g;
  g.rows_per_block = BwdBlockRows(CeilDiv(s.rows(), resident), cfg, gate);
  g.grid = D3(std::max<int64_t>(1, CeilDiv(s.rows(), g.rows_per_block)));
  g.block = D3(cfg.block);
  g.dynamic_smem_bytes = BackwardSmemBytes(cfg, spec, gate);
  return g;
}

// DwReduceColumns(dim) columns x kDwReduceLanes lanes of partial rows per
// CTA (ops/row_kernels.h). How many partial rows it reads is the backward
// launch's count, which the planner copies into the reduce launch.
Geometry DwReduce(const StepSpec& spec, const TargetDevice&) {
  const RowShape s = RowShapeOf(spec);
  const int columns = DwReduceColumns(s.dim);
  Geometry g;
  g.grid = D3(CeilDiv(s.dim, columns));
  g.block = D3(columns, kDwReduceLanes);
  return g;
}

Geometry DwFinish(const StepSpec& spec, const TargetDevice&) {
  Geometry g;
  g.grid = D3(CeilDiv(spec.layout().dim(), 256));
  g.block = D3(256);
  return g;
}

constexpr int64_t kAnyDim = kMaxDim;

const ProgramInfo kPrograms[] = {
    {"rmsnorm.fwd.warp", RMSNORM, Stage::kForward, true, 8, kMaxWarpRowDim, true, true, false,
     DwOutput::kNone, "", ForwardWarp, nullptr, "",
     WarpRowConfig, "forward, a warp (or 8/16 lanes) per row, row in registers, persistent grid"},
    {"rmsnorm.fwd.cta", RMSNORM, Stage::kForward, true, 64, kAnyDim, true, true, false,
     DwOutput::kNone, "", ForwardCta, nullptr, "",
     CtaRowConfig, "forward, 64..512 threads per row, row in registers, persistent grid"},
    {"rmsnorm.fwd.warp.prefetch", RMSNORM, Stage::kForward, true, 8, kMaxWarpRowDim, true, true,
     true, DwOutput::kNone, "", ForwardWarp, nullptr, "", WarpRowConfig,
     "fwd.warp plus a bulk L2 prefetch of the row group after next (packed rows)"},
    {"rmsnorm.fwd.cta.prefetch", RMSNORM, Stage::kForward, true, 64, kAnyDim, true, true, true,
     DwOutput::kNone, "", ForwardCta, nullptr, "", CtaRowConfig,
     "fwd.cta plus a bulk L2 prefetch of the row after next (packed rows)"},
    {"rmsnorm.fwd.flat", RMSNORM, Stage::kForward, true, 8, kAnyDim, true, true, false,
     DwOutput::kNone, "", ForwardFlat, nullptr, "", FlatRowConfig,
     "forward, one row group per CTA (8..32 lanes, four rows of 64 threads at H = 520..1024, "
     "or a CTA of up to 1024 threads per row), one vector per thread in a sub-warp or warp "
     "row (two above 256 columns), two in wider rows, the thread's weight vectors copied "
     "into shared memory behind its loads",
     RowKernel::kFlat},
    {"rmsnorm.fwd.flat.dense", RMSNORM, Stage::kForward, true, 8, kAnyDim, true, true, false,
     DwOutput::kNone, "", ForwardFlatDense, nullptr, "", DenseFlatRowConfig,
     "fwd.flat at 32 registers a thread: 2048 threads per SM with two vectors per thread "
     "too, so that more row groups are resident at once; rows of 96 threads two to a CTA "
     "at H = 1032..1536; above H = 8192 an FP32 weight in the slots at any row count",
     RowKernel::kFlatDense},
    {"rmsnorm.fwd.flat.wide", RMSNORM, Stage::kForward, true, kFlatWideDimMin, kFlatWideDimMax,
     true, true, false, DwOutput::kNone, "", ForwardFlatWide, nullptr, "", FlatWideRowConfig,
     "fwd.flat with the row (H = 3072..8192) over the fewest whole warps of 4 vectors each "
     "(96..256 threads; 256 of 3 at H = 6144) in place of 192..512 threads of two",
     RowKernel::kFlat},
    {"rmsnorm.fwd.loop", RMSNORM, Stage::kForward, true, 8, kAnyDim, true, true, false,
     DwOutput::kNone, "", ForwardLoop, nullptr, "", LoopRowConfig,
     "forward, one row per CTA of 256 threads (512 from H = 16384) reading the row twice in "
     "a loop (sum of squares, then y from cache; with the residual, h written in the first "
     "pass and read back), about 32 registers at any dim",
     RowKernel::kLoop},
    {"rmsnorm.bwd.det.partials", RMSNORM, Stage::kBackward, true, 8, kAnyDim,
     true, true, false, DwOutput::kPartials, "dw.reduce", BackwardDetPartials, DetPartialsBytes,
     "dw_partials",
     BackwardRowConfig,
     "backward, fixed row blocks (shape only; interleaved by steps where a row is under 16 KB "
     "a tensor or a step two rows), one dw partial row per block (FP64; FP32 above "
     "H = 4096); where whole warps hold a row (and in the ungated warp rows of 2-4 "
     "vectors, H = 264..1024), the next "
     "two steps (one with 4 vectors a thread) copied into shared memory (cp.async) and a "
     "row's dh_in (the fused residual) "
     "loaded before its row sum, and with a power of two of them, as many row groups per CTA "
     "as an SM holds, in lockstep; three row groups loaded per step up to 256 columns"},
    {"rmsnorm.bwd.det.lockstep", RMSNORM, Stage::kBackward, true, 8, kAnyDim, true, true, false,
     DwOutput::kPartials, "dw.reduce", BackwardDetLockstep, DetPartialsBytes, "dw_partials",
     LockstepBackwardRowConfig,
     "det.partials, with the ring's row groups of 96 threads (H = 1032..1536) four to a "
     "CTA in lockstep, two CTAs per SM, as det.partials runs those of a power of two; one "
     "FP64 dw partial row per block"},
    {"rmsnorm.bwd.split", RMSNORM, Stage::kBackward, true, 8, kMaxSplitDim, true, true, false,
     DwOutput::kPartials, "dw.reduce", BackwardSplit, DetPartialsBytes, "dw_partials",
     SplitRowConfig,
     "backward in one launch of two roles, block by block of 64+ rows: dx CTAs of up to 4 "
     "row groups each, then dw CTAs over 256-column tiles of the block's rows (partial rows "
     "in FP64; FP32 above H = 4096)",
     RowKernel::kFlat},
    {"rmsnorm.bwd.kb", RMSNORM, Stage::kBackward, false, 8, kAnyDim, true,
     true, false, DwOutput::kAtomic, "dw.finish", BackwardKb, nullptr, "",
     BackwardRowConfig,
     "backward, one row block per persistent CTA, Kahan FP32 dw sums, FP64 atomics; rows "
     "loaded as in det.partials"},
    {"rmsnorm_silu_gate.fwd.warp", RMSNORM_SILU_GATE, Stage::kForward, true, 8,
     kMaxWarpRowDim, true, false, false, DwOutput::kNone, "", ForwardWarp, nullptr, "",
     WarpRowConfig, "gated forward, a warp (or 8/16 lanes) per row, persistent grid"},
    {"rmsnorm_silu_gate.fwd.cta", RMSNORM_SILU_GATE, Stage::kForward, true, 64, kAnyDim,
     true, false, false, DwOutput::kNone, "", ForwardCta, nullptr, "",
     CtaRowConfig, "gated forward, 64..512 threads per row, persistent grid"},
    {"rmsnorm_silu_gate.fwd.warp.prefetch", RMSNORM_SILU_GATE, Stage::kForward, true, 8,
     kMaxWarpRowDim, true, false, true, DwOutput::kNone, "", ForwardWarp, nullptr, "",
     WarpRowConfig, "gated fwd.warp plus a bulk L2 prefetch of x and z two row groups ahead"},
    {"rmsnorm_silu_gate.fwd.flat", RMSNORM_SILU_GATE, Stage::kForward, true, 8, kAnyDim, true,
     false, false, DwOutput::kNone, "", GateForwardFlat, nullptr, "", GateFlatRowConfig,
     "gated forward, one row group per CTA, z loaded with x, up to 2048 threads per SM",
     RowKernel::kFlat},
    {"rmsnorm_silu_gate.fwd.flat.dense", RMSNORM_SILU_GATE, Stage::kForward, true,
     kGateFlatDenseDimMin, kAnyDim, true, false, false, DwOutput::kNone, "", GateForwardFlat,
     nullptr, "", GateFlatRowConfig,
     "gated fwd.flat with its CTA-wide rows (D = 1032..16384) at 32 registers a thread, "
     "2048 threads per SM: z's lines asked into L1 with x, each vector loaded as its y is "
     "formed",
     RowKernel::kFlatDense},
    {"rmsnorm_silu_gate.fwd.flat.groups", RMSNORM_SILU_GATE, Stage::kForward, true,
     kFlatGroupDimMin, kFlatGroupDimMax, true, false, false, DwOutput::kNone, "",
     ForwardFlat, nullptr, "", FlatRowConfig,
     "gated fwd.flat with rows of D = 520..1024 in groups of 64 threads four to a CTA (as "
     "fwd.flat's), up to 64 registers a thread, in place of one row a CTA",
     RowKernel::kFlat},
    {"rmsnorm_silu_gate.bwd.det.partials", RMSNORM_SILU_GATE, Stage::kBackward,
     true, 8, kAnyDim, true, false, false, DwOutput::kPartials, "dw.reduce",
     BackwardDetPartials, DetPartialsBytes, "dw_partials",
     GatedBackwardRowConfig,
     "gated backward (dx, dz), fixed row blocks (interleaved by steps where a row is under 16 "
     "KB a tensor), one FP64 dw partial row per block; where whole warps hold a row (and in "
     "the warp rows of 3-4 vectors, D = 520..1016), x, dy "
     "and z of the next steps copied into shared memory as in rmsnorm's (at D = "
     "13112..16384 a BF16 weight kept as BF16, or z through one stage beside an FP32 one)"},
    {"rmsnorm_silu_gate.bwd.split", RMSNORM_SILU_GATE, Stage::kBackward, true, 8, kMaxSplitDim,
     true, false, false, DwOutput::kPartials, "dw.reduce", BackwardSplit, DetPartialsBytes,
     "dw_partials", SplitRowConfig,
     "gated backward in one launch of two roles, block by block of 64+ rows: dx, dz CTAs of "
     "up to 2 row groups, then dw CTAs over column tiles",
     RowKernel::kFlat},
    {"rmsnorm_silu_gate.bwd.kb", RMSNORM_SILU_GATE, Stage::kBackward,
     false, 8, kAnyDim, true, false, false, DwOutput::kAtomic, "dw.finish", BackwardKb,
     nullptr, "", GatedBackwardRowConfig,
     "gated backward (dx, dz), Kahan FP32 dw sums, FP64 atomics"},
    {"dw.reduce", OP_UNSPECIFIED, Stage::kReduce, true, 8, kAnyDim, true, true, false,
     DwOutput::kNone, "", DwReduce, nullptr, "",
     nullptr, "sums dw partial rows in a fixed order; writes FP32, casts to BF16 or adds into FP32 dw"},
    {"dw.finish", OP_UNSPECIFIED, Stage::kFinish, true, 8, kAnyDim, true, true, false,
     DwOutput::kNone, "", DwFinish, nullptr, "", nullptr,
     "rounds the FP64 dw accumulator once into dw: FP32, BF16, or added into FP32"},
};

}  // namespace

bool DwPartialsFp32(const StepSpec& spec) {
  return DwPartialBytes(spec.layout().dim(), spec.op() == RMSNORM_SILU_GATE) == 4;
}

int64_t DwPartialRowsBytes(const StepSpec& spec, int64_t count) {
  const int64_t dim = spec.layout().dim();
  return count * dim * DwPartialBytes(dim, spec.op() == RMSNORM_SILU_GATE);
}

absl::Span<const ProgramInfo> Programs() { return kPrograms; }

const ProgramInfo* FindProgram(absl::string_view id) {
  for (const ProgramInfo& p : kPrograms) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

std::optional<BackwardSmem> PersistentBackwardSmem(const ProgramInfo& program,
                                                   const StepSpec& spec) {
  if (program.stage != Stage::kBackward || program.kernel != RowKernel::kPersistent ||
      program.row_config == nullptr) {
    return std::nullopt;
  }
  return BackwardSmemOf(program.row_config(spec.layout().dim()), spec,
                        spec.op() == RMSNORM_SILU_GATE);
}

absl::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kForward: return "forward";
    case Stage::kBackward: return "backward";
    case Stage::kReduce: return "reduce";
    case Stage::kFinish: return "finish";
  }
  return "?";
}

absl::Status CheckSupports(const ProgramInfo& program, const StepSpec& spec) {
  const RowShape s = RowShapeOf(spec);
  if (program.op != OP_UNSPECIFIED && program.op != spec.op()) {
    return absl::InvalidArgumentError(
        absl::StrCat(program.id, " runs ", Op_Name(program.op), ", not ", Op_Name(spec.op())));
  }
  if (s.dim < program.dim_min || s.dim > program.dim_max) {
    return absl::InvalidArgumentError(absl::StrCat(program.id, " takes dim ", program.dim_min,
                                                   "..", program.dim_max, ", not ", s.dim));
  }
  if (s.heads > 1 && !program.heads) {
    return absl::InvalidArgumentError(absl::StrCat(program.id, " takes no per-head views"));
  }
  if (spec.residual() && !program.residual) {
    return absl::InvalidArgumentError(absl::StrCat(program.id, " has no fused residual"));
  }
  if (program.l2_prefetch && (s.token_stride != s.heads * s.dim || s.head_stride != s.dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        program.id, " needs packed rows (token_stride = heads * dim, head_stride = dim)"));
  }
  if (spec.deterministic() && !program.deterministic) {
    return absl::InvalidArgumentError(absl::StrCat(program.id, " is not deterministic"));
  }
  return absl::OkStatus();
}

}  // namespace cake
