#include "planner/validate.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "ops/row_config.h"
#include "ops/shape.h"
#include "ops/status.h"

namespace cake {
namespace {

template <typename... Args>
absl::Status Bad(Args&&... args) {
  return absl::InvalidArgumentError(absl::StrCat(std::forward<Args>(args)...));
}

template <typename Enum>
std::string EnumValue(int value, bool (*is_valid)(int), const std::string& (*name)(Enum)) {
  return is_valid(value) ? name(static_cast<Enum>(value)) : absl::StrCat(value);
}

std::string OpName(int v) { return EnumValue<Op>(v, Op_IsValid, Op_Name<Op>); }
std::string DTypeName(int v) { return EnumValue<DType>(v, DType_IsValid, DType_Name<DType>); }
std::string PhaseName(int v) { return EnumValue<Phase>(v, Phase_IsValid, Phase_Name<Phase>); }

absl::Status ValidateLayout(const Layout& l) {
  if (l.tokens() < 0) return Bad("layout.tokens = ", l.tokens(), ": must be >= 0");
  if (l.heads() < 0) return Bad("layout.heads = ", l.heads(), ": must be >= 0 (0 means 1)");
  if (l.dim() < kVecElems || l.dim() > kMaxDim || l.dim() % kVecElems != 0) {
    return Bad("layout.dim = ", l.dim(), ": must be a multiple of ", kVecElems,
               " (16-byte vector loads) from ", kVecElems, " to ", kMaxDim);
  }
  const int64_t heads = l.heads() == 0 ? 1 : l.heads();
  if (heads > kMaxRows) return Bad("layout.heads = ", l.heads(), ": must be <= ", kMaxRows);
  if (l.tokens() > 0 && l.tokens() > kMaxRows / heads) {
    return Bad("layout.tokens = ", l.tokens(), ": tokens * heads = ",
               static_cast<double>(l.tokens()) * static_cast<double>(heads),
               " rows; at most ", kMaxRows, " are supported");
  }
  if (l.head_stride() < 0 || l.head_stride() % kVecElems != 0) {
    return Bad("layout.head_stride = ", l.head_stride(), ": must be >= 0 and a multiple of ",
               kVecElems, " (16-byte aligned heads)");
  }
  const int64_t head_stride = l.head_stride() == 0 ? l.dim() : l.head_stride();
  if (head_stride < l.dim()) {
    return Bad("layout.head_stride = ", l.head_stride(), ": heads overlap; must be >= layout.dim (",
               l.dim(), ")");
  }
  // Strides are bounded so that every element offset fits in int64.
  constexpr int64_t kMaxStride = int64_t{1} << 40;
  if (head_stride > kMaxStride) {
    return Bad("layout.head_stride = ", l.head_stride(), ": must be <= ", kMaxStride);
  }
  const int64_t row_extent = (heads - 1) * head_stride + l.dim();
  if (row_extent > kMaxStride) {
    return Bad("layout.heads = ", l.heads(), ": a token spans ", row_extent,
               " elements; at most ", kMaxStride);
  }
  if (l.token_stride() < 0 || l.token_stride() % kVecElems != 0) {
    return Bad("layout.token_stride = ", l.token_stride(), ": must be >= 0 and a multiple of ",
               kVecElems, " (16-byte aligned rows)");
  }
  if (l.token_stride() != 0 && l.token_stride() < row_extent) {
    return Bad("layout.token_stride = ", l.token_stride(), ": tokens overlap; must be >= ",
               row_extent, " ((heads - 1) * head_stride + dim)");
  }
  if (l.token_stride() > kMaxStride) {
    return Bad("layout.token_stride = ", l.token_stride(), ": must be <= ", kMaxStride);
  }
  const int64_t token_stride = l.token_stride() == 0 ? heads * head_stride : l.token_stride();
  if (l.tokens() > 0 && token_stride > (int64_t{1} << 62) / l.tokens()) {
    return Bad("layout.tokens = ", l.tokens(), ": tokens * token_stride overflows a 64-bit offset");
  }
  return absl::OkStatus();
}

absl::Status ValidatePhases(const StepSpec& spec) {
  if (spec.phases().empty()) {
    return Bad("phases: empty; expected one or more of FORWARD, RECOMPUTE, BACKWARD, in that order");
  }
  int previous = PHASE_UNSPECIFIED;
  for (int i = 0; i < spec.phases_size(); ++i) {
    const int p = spec.phases(i);
    if (p != FORWARD && p != RECOMPUTE && p != BACKWARD) {
      return Bad("phases[", i, "] = ", PhaseName(p), ": expected FORWARD, RECOMPUTE or BACKWARD");
    }
    if (p <= previous) {
      return Bad("phases[", i, "] = ", PhaseName(p),
                 ": phases must be listed in the order FORWARD, RECOMPUTE, BACKWARD, each at most "
                 "once (it follows ",
                 PhaseName(previous), ")");
    }
    previous = p;
  }
  return absl::OkStatus();
}


}  // namespace

absl::Status Validate(const StepSpec& spec) {
  if (spec.op() != RMSNORM && spec.op() != RMSNORM_SILU_GATE) {
    return Bad("op = ", OpName(spec.op()), ": expected RMSNORM or RMSNORM_SILU_GATE");
  }
  if (!spec.has_layout()) return Bad("layout: missing; expected tokens and dim at least");
  CAKE_RETURN_IF_ERROR(ValidateLayout(spec.layout()));
  const int w = spec.weight_dtype();
  if (w != DTYPE_UNSPECIFIED && w != BF16 && w != FP32) {
    return Bad("weight_dtype = ", DTypeName(w), ": expected BF16 or FP32");
  }
  const int weight = w == DTYPE_UNSPECIFIED ? BF16 : w;
  const int dw = spec.dw_dtype();
  if (dw != DTYPE_UNSPECIFIED && dw != FP32 && dw != weight) {
    return Bad("dw_dtype = ", DTypeName(dw), ": expected FP32 or the weight dtype (",
               DTypeName(weight), ")");
  }
  const int64_t heads = spec.layout().heads() == 0 ? 1 : spec.layout().heads();
  if (spec.residual()) {
    if (spec.op() != RMSNORM) {
      return Bad("residual = true: the fused residual add is an RMSNORM form; op = ",
                 OpName(spec.op()));
    }
    if (heads > 1) {
      return Bad("residual = true: not supported with per-head views (layout.heads = ",
                 spec.layout().heads(), ")");
    }
  }
  if (spec.residual_grad_in() && !spec.residual()) {
    return Bad("residual_grad_in = true: needs residual = true");
  }
  if (spec.has_eps() && !(std::isfinite(spec.eps()) && spec.eps() > 0)) {
    return Bad("eps = ", spec.eps(), ": must be finite and > 0");
  }
  if (spec.accumulate_dw() && dw != DTYPE_UNSPECIFIED && dw != FP32) {
    return Bad("accumulate_dw = true: needs dw_dtype FP32, not ", DTypeName(dw));
  }
  CAKE_RETURN_IF_ERROR(ValidatePhases(spec));
  if (!HasPhase(spec, BACKWARD)) {
    if (spec.accumulate_dw()) return Bad("accumulate_dw = true: needs the BACKWARD phase");
    if (spec.residual_grad_in()) return Bad("residual_grad_in = true: needs the BACKWARD phase");
  }
  return absl::OkStatus();
}

absl::StatusOr<StepSpec> Canonicalize(const StepSpec& spec) {
  CAKE_RETURN_IF_ERROR(Validate(spec));
  StepSpec c = spec;
  Layout& l = *c.mutable_layout();
  if (l.heads() == 0) l.set_heads(1);
  // One head has no head stride; dim keeps equal steps equal.
  if (l.head_stride() == 0 || l.heads() == 1) l.set_head_stride(l.dim());
  if (l.token_stride() == 0) l.set_token_stride(l.heads() * l.head_stride());
  if (c.weight_dtype() == DTYPE_UNSPECIFIED) c.set_weight_dtype(BF16);
  if (c.dw_dtype() == DTYPE_UNSPECIFIED) c.set_dw_dtype(FP32);
  if (!c.has_eps()) c.set_eps(kDefaultEps);
  return c;
}

}  // namespace cake
