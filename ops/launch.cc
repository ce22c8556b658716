#include "ops/launch.h"

#include <cstdint>
#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_format.h"
#include "ops/registry.h"
#include "ops/row_kernels.h"
#include "ops/shape.h"
#include "ops/status.h"

namespace cake {
namespace {

absl::Status CheckRole(const char* role, const void* ptr, uintptr_t alignment, const char* why) {
  if (ptr == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("bindings.", role, ": null; ", why));
  }
  if (reinterpret_cast<uintptr_t>(ptr) % alignment != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("bindings.%s = %p: not %d-byte aligned (%s)",
                                                      role, ptr, alignment, why));
  }
  return absl::OkStatus();
}

// The workspace region a launch names.
absl::StatusOr<const WorkspaceRegion*> LaunchRegion(const Plan& plan, const Launch& launch) {
  for (const WorkspaceRegion& r : plan.workspace()) {
    if (r.name() == launch.region()) return &r;
  }
  return absl::InvalidArgumentError(absl::StrCat("plan launches[", launch.index(), "].region = \"",
                                                 launch.region(),
                                                 "\": the plan has no such workspace region"));
}

// A MEMSET launch is the zero kernel over the first memset_bytes of its
// region.
absl::StatusOr<KernelLaunch> ZeroLaunch(const Plan& plan, const Launch& launch, const Bindings& b) {
  CAKE_ASSIGN_OR_RETURN(const WorkspaceRegion* region, LaunchRegion(plan, launch));
  const int64_t bytes = launch.memset_bytes();
  if (bytes <= 0 || bytes % 4 != 0 || bytes > region->bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan launches[", launch.index(), "].memset_bytes = ", bytes,
        ": must be a positive multiple of 4 within region \"", region->name(), "\" (",
        region->bytes(), " bytes)"));
  }
  ZeroParams p{};
  p.dst = reinterpret_cast<uint32_t*>(static_cast<char*>(b.workspace) + region->offset());
  p.words = bytes / 4;
  KernelLaunch k;
  k.function = ZeroWordsKernel();
  k.grid = dim3(static_cast<unsigned>(std::min<int64_t>(CeilDiv(p.words, kZeroBlock), 1024)));
  k.block = dim3(kZeroBlock);
  k.SetParams(p);
  return k;
}

RowLayout LayoutOf(const StepSpec& spec) {
  const RowShape s = RowShapeOf(spec);
  return MakeRowLayout(s.rows(), s.heads, s.dim, s.token_stride, s.head_stride);
}

// A row kernel's launch as the plan states it, against its program: a
// program that takes the plan's spec; dynamic shared memory at least its
// launch rule's (the staged weight, the fused backward's ring and fold), so
// that an edited plan cannot run a kernel past the end of its shared memory
// (the flat forward may take less: it then reads the weight through L1,
// RowKernelFor); exactly the rule's grid where a CTA holds fixed rows rather
// than walking a persistent grid (the flat and looped forwards, the split
// backward), so that no row is left out or read past; a one-dimensional
// grid. Step build and eager launches: about 30 ns a launch on the host.
absl::Status CheckLaunchShape(const Plan& plan, const ProgramInfo& program, const Launch& launch) {
  if (launch.dynamic_smem_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("plan launches[", launch.index(),
                                                   "].dynamic_smem_bytes = ",
                                                   launch.dynamic_smem_bytes(), ": negative"));
  }
  if (launch.grid().y() > 1 || launch.grid().z() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan launches[", launch.index(), "].grid = (", launch.grid().x(), ", ", launch.grid().y(),
        ", ", launch.grid().z(), "): ", program.id, " runs a one-dimensional grid"));
  }
  if (const absl::Status takes = CheckSupports(program, plan.spec()); !takes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("plan launches[", launch.index(),
                                                   "].program = \"", program.id,
                                                   "\": ", takes.message()));
  }
  const TargetDevice device{plan.arch(), plan.sm_count(), 0};
  const Geometry g = program.geometry(plan.spec(), device);
  const bool flat_forward =
      program.stage == Stage::kForward &&
      (program.kernel == RowKernel::kFlat || program.kernel == RowKernel::kFlatDense);
  if (!flat_forward && int64_t{launch.dynamic_smem_bytes()} < g.dynamic_smem_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan launches[", launch.index(), "].dynamic_smem_bytes = ", launch.dynamic_smem_bytes(),
        ": ", program.id, " needs ", g.dynamic_smem_bytes, " for its spec"));
  }
  if (program.kernel != RowKernel::kPersistent && launch.grid().x() != g.grid.x()) {
    return absl::InvalidArgumentError(absl::StrCat("plan launches[", launch.index(),
                                                   "].grid.x = ", launch.grid().x(), ": ",
                                                   program.id, " runs ", g.grid.x(),
                                                   " CTAs for its spec"));
  }
  return absl::OkStatus();
}

// dw.reduce's CTA: C columns by kDwReduceLanes lanes, 1 <= C <= 32 (a plan
// saved by another version may hold another C than DwReduceColumns; the
// kernel sums the same for any), and the one-dimensional grid of C-column
// CTAs that covers dim, so that no column of dw is left unwritten.
absl::Status CheckReduceShape(const Plan& plan, const Launch& launch) {
  const int64_t dim = plan.spec().layout().dim();
  const uint32_t columns = launch.block().x();
  if (columns < 1 || columns > static_cast<uint32_t>(kDwReduceMaxColumns) ||
      launch.block().y() != static_cast<uint32_t>(kDwReduceLanes) || launch.block().z() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan launches[", launch.index(), "].block = (", columns, ", ", launch.block().y(), ", ",
        launch.block().z(), "): dw.reduce runs blocks of 1 to ", kDwReduceMaxColumns,
        " columns by ", kDwReduceLanes, " lanes"));
  }
  const int64_t ctas = CeilDiv(dim, int64_t{columns});
  if (int64_t{launch.grid().x()} != ctas || launch.grid().y() > 1 || launch.grid().z() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan launches[", launch.index(), "].grid = (", launch.grid().x(), ", ",
        launch.grid().y(), ", ", launch.grid().z(), "): dw.reduce runs ", ctas, " CTAs of ",
        columns, " columns for dim ", dim));
  }
  return absl::OkStatus();
}

absl::StatusOr<const void*> RowKernelFor(const ProgramInfo& program, const Launch& launch,
                                         const StepSpec& spec) {
  const int64_t dim = spec.layout().dim();
  const RowConfig cfg = program.row_config(dim);
  if (launch.block().x() != static_cast<uint32_t>(cfg.block) || launch.block().y() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("plan launches[", launch.index(),
                                                   "].block.x = ", launch.block().x(), ": ",
                                                   program.id, " runs blocks of ", cfg.block));
  }
  const bool gate = program.op == RMSNORM_SILU_GATE;
  const int tpr = cfg.threads_per_row, vpt = cfg.vecs_per_thread;
  const void* f = nullptr;
  const bool forward = program.stage == Stage::kForward;
  // The flat forward copies the weight into shared memory where the launch
  // holds the slots (FlatWeightSlots).
  const bool slots = int64_t{launch.dynamic_smem_bytes()} >=
                     FlatWeightSmemBytes(cfg, spec.weight_dtype() == FP32);
  const bool reverse = WalksRowsFromTheLast(spec, launch);
  switch (program.kernel) {
    case RowKernel::kPersistent:
      f = forward ? RowForwardKernel(tpr, vpt, reverse)
                  : RowBackwardKernel(tpr, vpt, gate, spec.residual_grad_in(), cfg.block,
                                      spec.weight_dtype() == FP32);
      break;
    case RowKernel::kFlat:
      f = forward ? RowForwardFlatKernel(cfg, gate, false, slots, reverse)
                  : RowBackwardSplitKernel(tpr, vpt, gate, SplitGroupsOf(cfg, gate, dim));
      break;
    case RowKernel::kFlatDense:
      f = forward ? RowForwardFlatKernel(cfg, gate, true, slots, reverse) : nullptr;
      break;
    case RowKernel::kLoop:
      f = forward && !gate ? RowForwardLoopKernel(spec.residual(), LoopRuntimeStride(dim), reverse)
                           : nullptr;
      break;
  }
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat(program.id, ": no kernel built for ",
                                            cfg.threads_per_row, " threads x ",
                                            cfg.vecs_per_thread, " vectors per row"));
  }
  return f;
}

// The workspace a launch reads or writes, `bytes` from the start of its
// region: its address, or an error naming the launch's region where the
// region is missing or smaller.
absl::StatusOr<void*> LaunchWorkspace(const Plan& plan, const Launch& launch, const Bindings& b,
                                      int64_t bytes, absl::string_view what) {
  CAKE_ASSIGN_OR_RETURN(const WorkspaceRegion* region, LaunchRegion(plan, launch));
  if (bytes > region->bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan launches[", launch.index(), "].region = \"", region->name(), "\": ",
        region->bytes(), " bytes, the launch ", what, " ", bytes));
  }
  return static_cast<char*>(b.workspace) + region->offset();
}

// A backward launch's blocks as the plan states them: blocks of at least
// one row, and as many as the rows fill where each writes a partial row (an
// edited plan could otherwise skip rows or, with blocks of no rows, never
// finish). Returns the block count.
absl::StatusOr<int64_t> BackwardBlocks(const Launch& launch, int64_t rows, DwOutput dw_output) {
  const int64_t per_block = launch.rows_per_block();
  if (per_block < 1) {
    return absl::InvalidArgumentError(absl::StrCat("plan launches[", launch.index(),
                                                   "].rows_per_block = ", per_block,
                                                   ": a block holds at least one row"));
  }
  const int64_t blocks = (rows + per_block - 1) / per_block;
  if (dw_output == DwOutput::kPartials && launch.partials() != blocks) {
    return absl::InvalidArgumentError(absl::StrCat("plan launches[", launch.index(),
                                                   "].partials = ", launch.partials(), ": ", rows,
                                                   " rows in blocks of ", per_block, " make ",
                                                   blocks));
  }
  return blocks;
}

int DwStoreOf(const StepSpec& spec) {
  if (spec.accumulate_dw()) return kDwAddFp32;
  return spec.dw_dtype() == BF16 ? kDwStoreBf16 : kDwStoreFp32;
}

// Raises a kernel's dynamic shared memory limit to at least `bytes` (the
// default cap is 48 KB, static shared memory included). Limits only grow, so
// launches of other shapes from other threads never see a smaller one.
absl::Status AllowDynamicSmem(const void* function, unsigned bytes) {
  static absl::Mutex* const mu = new absl::Mutex;
  static auto* const limits = new absl::flat_hash_map<const void*, unsigned>;
  absl::MutexLock lock(mu);
  unsigned& limit = (*limits)[function];
  if (bytes <= limit) return absl::OkStatus();
  CAKE_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(function, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  limit = bytes;
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckBindings(const Plan& plan, const Bindings& b) {
  const StepSpec& spec = plan.spec();
  if (plan.launches().empty()) return absl::OkStatus();
  const bool forward = HasPhase(spec, FORWARD) || HasPhase(spec, RECOMPUTE);
  const bool backward = HasPhase(spec, BACKWARD);
  const bool gate = spec.op() == RMSNORM_SILU_GATE;
  constexpr uintptr_t kVec = 16;
  const char* fwd = "the forward reads or writes it with 16-byte vectors";
  const char* bwd = "the backward reads or writes it with 16-byte vectors";
  CAKE_RETURN_IF_ERROR(CheckRole("w", b.w, kVec, "the weight is read with 16-byte vectors"));
  CAKE_RETURN_IF_ERROR(CheckRole("rstd", b.rstd, 4, "FP32 per row"));
  if (forward) {
    CAKE_RETURN_IF_ERROR(CheckRole("x", b.x, kVec, fwd));
    CAKE_RETURN_IF_ERROR(CheckRole("y", b.y, kVec, fwd));
    if (spec.residual()) {
      CAKE_RETURN_IF_ERROR(CheckRole("residual", b.residual, kVec, fwd));
      CAKE_RETURN_IF_ERROR(CheckRole("h", b.h, kVec, fwd));
    }
    if (gate) CAKE_RETURN_IF_ERROR(CheckRole("z", b.z, kVec, fwd));
  }
  if (backward) {
    if (spec.residual()) {
      CAKE_RETURN_IF_ERROR(CheckRole("h", b.h, kVec, "the backward reads h, the normalized input"));
    } else {
      CAKE_RETURN_IF_ERROR(CheckRole("x", b.x, kVec, bwd));
    }
    CAKE_RETURN_IF_ERROR(CheckRole("dy", b.dy, kVec, bwd));
    CAKE_RETURN_IF_ERROR(CheckRole("dx", b.dx, kVec, bwd));
    if (spec.residual_grad_in()) CAKE_RETURN_IF_ERROR(CheckRole("dh_in", b.dh_in, kVec, bwd));
    if (gate) {
      CAKE_RETURN_IF_ERROR(CheckRole("z", b.z, kVec, bwd));
      CAKE_RETURN_IF_ERROR(CheckRole("dz", b.dz, kVec, bwd));
    }
    CAKE_RETURN_IF_ERROR(
        CheckRole("dw", b.dw, spec.dw_dtype() == FP32 ? 4 : 2, "the backward writes dw"));
  }
  if (plan.workspace_bytes() > 0) {
    CAKE_RETURN_IF_ERROR(CheckRole("workspace", b.workspace, 256,
                                   "the plan's workspace regions are 256-byte aligned"));
    if (b.workspace_bytes < plan.workspace_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bindings.workspace_bytes = ", b.workspace_bytes, ": the plan needs ",
                       plan.workspace_bytes()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelLaunch> MakeKernelLaunch(const Plan& plan, const Launch& launch,
                                              const Bindings& b) {
  if (launch.kind() == MEMSET) return ZeroLaunch(plan, launch, b);
  const ProgramInfo* program = FindProgram(launch.program());
  if (program == nullptr || launch.kind() != KERNEL) {
    return absl::InvalidArgumentError(absl::StrCat("plan launches[", launch.index(),
                                                   "].program = \"", launch.program(),
                                                   "\": not a kernel program"));
  }
  const StepSpec& spec = plan.spec();
  const bool gate = spec.op() == RMSNORM_SILU_GATE;
  KernelLaunch k;
  k.grid = dim3(launch.grid().x(), std::max(1u, launch.grid().y()), std::max(1u, launch.grid().z()));
  k.block = dim3(launch.block().x(), std::max(1u, launch.block().y()), std::max(1u, launch.block().z()));
  k.dynamic_smem_bytes = static_cast<unsigned>(launch.dynamic_smem_bytes());
  switch (program->stage) {
    case Stage::kForward: {
      CAKE_RETURN_IF_ERROR(CheckLaunchShape(plan, *program, launch));
      CAKE_ASSIGN_OR_RETURN(k.function, RowKernelFor(*program, launch, spec));
      RowForwardParams p{};
      p.layout = LayoutOf(spec);
      p.x = b.x;
      p.residual = spec.residual() ? b.residual : nullptr;
      p.h = spec.residual() ? b.h : nullptr;
      p.z = gate ? b.z : nullptr;
      p.w = b.w;
      p.y = b.y;
      p.rstd = b.rstd;
      p.eps = static_cast<float>(spec.eps());
      p.w_fp32 = spec.weight_dtype() == FP32;
      p.l2_prefetch = program->l2_prefetch;
      if (WalksRowsFromTheLast(spec, launch)) ReverseRows(p);
      k.SetParams(p);
      CAKE_RETURN_IF_ERROR(AllowDynamicSmem(k.function, k.dynamic_smem_bytes));
      break;
    }
    case Stage::kBackward: {
      CAKE_RETURN_IF_ERROR(CheckLaunchShape(plan, *program, launch));
      CAKE_ASSIGN_OR_RETURN(k.function, RowKernelFor(*program, launch, spec));
      RowBackwardParams p{};
      p.layout = LayoutOf(spec);
      // The dh_in instances take row r at r * row_stride (RowBackward): the
      // fused residual's rows are plain ones (validate.cc refuses heads > 1).
      if (spec.residual_grad_in() && p.layout.row_stride == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan spec.residual_grad_in = true with layout.heads = ",
                         spec.layout().heads(), ": the fused residual needs plain rows"));
      }
      p.x = spec.residual() ? b.h : b.x;
      p.z = gate ? b.z : nullptr;
      p.dy = b.dy;
      p.dh_in = spec.residual_grad_in() ? b.dh_in : nullptr;
      p.w = b.w;
      p.rstd = b.rstd;
      p.dx = b.dx;
      p.dz = gate ? b.dz : nullptr;
      CAKE_ASSIGN_OR_RETURN(p.blocks, BackwardBlocks(launch, p.layout.rows, program->dw_output));
      p.rows_per_block = launch.rows_per_block();
      p.unit_rows = BwdUnitRows(p.rows_per_block,
                                BwdRowsPerStep(program->row_config(p.layout.dim), gate),
                                p.layout.dim);
      p.w_fp32 = spec.weight_dtype() == FP32;
      p.inputs_before_wait = InputsBeforeWait(spec, launch);
      if (program->kernel == RowKernel::kFlat) {  // the split backward
        p.l2_ahead_rows = SplitL2AheadRows(p.layout.rows, p.layout.dim,
                                           p.layout.row_stride == p.layout.dim);
      }
      // det: a partial row per block (DwPartialRowsBytes); kb: one FP64 accumulator row.
      const bool partials = program->dw_output == DwOutput::kPartials;
      CAKE_ASSIGN_OR_RETURN(
          void* sums, LaunchWorkspace(plan, launch, b,
                                      partials ? DwPartialRowsBytes(spec, p.blocks)
                                               : p.layout.dim * 8,
                                      partials ? "writes" : "adds into"));
      if (partials) {
        p.partials = sums;
        p.partials_fp32 = DwPartialsFp32(spec);
      } else {
        p.acc = static_cast<double*>(sums);
      }
      k.SetParams(p);
      CAKE_RETURN_IF_ERROR(AllowDynamicSmem(k.function, k.dynamic_smem_bytes));
      break;
    }
    case Stage::kReduce: {
      CAKE_RETURN_IF_ERROR(CheckReduceShape(plan, launch));
      DwReduceParams p{};
      CAKE_ASSIGN_OR_RETURN(
          void* partials,
          LaunchWorkspace(plan, launch, b, DwPartialRowsBytes(spec, launch.partials()), "reads"));
      p.partials = partials;
      p.count = launch.partials();
      p.dim = spec.layout().dim();
      p.dw = b.dw;
      p.store = DwStoreOf(spec);
      k.function = DwReduceKernel(DwPartialsFp32(spec));
      k.SetParams(p);
      break;
    }
    case Stage::kFinish: {
      DwFinishParams p{};
      CAKE_ASSIGN_OR_RETURN(void* acc,
                            LaunchWorkspace(plan, launch, b, spec.layout().dim() * 8, "reads"));
      p.acc = static_cast<const double*>(acc);
      p.dim = spec.layout().dim();
      p.dw = b.dw;
      p.store = DwStoreOf(spec);
      k.function = DwFinishKernel();
      k.SetParams(p);
      break;
    }
  }
  return k;
}

bool InputsBeforeWait(const StepSpec& spec, const Launch& launch) {
  return launch.depends_on_size() > 0 && !spec.residual();
}

bool WalksRowsFromTheLast(const StepSpec& spec, const Launch& launch) {
  if (launch.phase() != RECOMPUTE) return false;
  const Layout& l = spec.layout();
  return l.tokens() * std::max<int64_t>(1, l.heads()) * l.dim() * 2 > kRecomputeFromLastMinBytes;
}

bool InPhases(const Launch& launch, absl::Span<const Phase> phases) {
  return phases.empty() || std::find(phases.begin(), phases.end(), launch.phase()) != phases.end();
}

absl::Status LaunchEager(const Plan& plan, const Bindings& bindings, cudaStream_t stream,
                         absl::Span<const Phase> phases) {
  CAKE_RETURN_IF_ERROR(CheckBindings(plan, bindings));
  // Build every launch before the first runs, so a bad plan launches nothing.
  std::vector<KernelLaunch> kernels;
  for (const Launch& l : plan.launches()) {
    if (!InPhases(l, phases)) continue;
    CAKE_ASSIGN_OR_RETURN(KernelLaunch k, MakeKernelLaunch(plan, l, bindings));
    kernels.push_back(k);
  }
  // Launches are listed in dependency order, so issuing them in order on one
  // stream respects every edge. Each kernel after the first follows the one
  // before programmatically, as in the graphs (graphs/step.cc); the first
  // follows whatever the stream ran before in full.
  cudaLaunchAttribute chained{};
  chained.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  chained.val.programmaticStreamSerializationAllowed = 1;
  for (size_t i = 0; i < kernels.size(); ++i) {
    KernelLaunch& k = kernels[i];
    cudaLaunchConfig_t config{};
    config.gridDim = k.grid;
    config.blockDim = k.block;
    config.dynamicSmemBytes = k.dynamic_smem_bytes;
    config.stream = stream;
    config.attrs = i > 0 ? &chained : nullptr;
    config.numAttrs = i > 0 ? 1 : 0;
    CAKE_CUDA_RETURN_IF_ERROR(cudaLaunchKernelExC(&config, k.function, k.args()));
  }
  return absl::OkStatus();
}

}  // namespace cake
