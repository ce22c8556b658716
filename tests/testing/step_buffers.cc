#include "tests/testing/step_buffers.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ops/shape.h"

namespace cake::testing {
absl::StatusOr<std::unique_ptr<StepBuffers>> StepBuffers::Create(const Plan& plan) {
  std::unique_ptr<StepBuffers> buf(new StepBuffers(plan.spec()));
  const StepSpec& spec = plan.spec();
  const RowShape s = RowShapeOf(spec);
  buf->elems_ = s.rows() == 0
                    ? 0
                    : (s.tokens - 1) * s.token_stride + (s.heads - 1) * s.head_stride + s.dim;
  const int64_t act = std::max<int64_t>(buf->elems_, 8) * 2;
  absl::Status status;
  auto alloc = [&](int64_t bytes) -> void* {
    void* p = nullptr;
    if (status.ok() && cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      status = absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
      return nullptr;
    }
    if (p != nullptr) buf->owned_.push_back(p);
    return p;
  };
  Bindings& b = buf->b;
  b.x = alloc(act);
  b.y = alloc(act);
  b.dy = alloc(act);
  b.dx = alloc(act);
  b.rstd = static_cast<float*>(alloc(std::max<int64_t>(s.rows(), 1) * 4));
  b.w = alloc(s.dim * (spec.weight_dtype() == FP32 ? 4 : 2));
  b.dw = alloc(s.dim * (spec.dw_dtype() == FP32 ? 4 : 2));
  if (spec.residual()) {
    b.residual = alloc(act);
    b.h = alloc(act);
  }
  if (spec.residual_grad_in()) b.dh_in = alloc(act);
  if (spec.op() == RMSNORM_SILU_GATE) {
    b.z = alloc(act);
    b.dz = alloc(act);
  }
  if (plan.workspace_bytes() > 0) {
    b.workspace = alloc(plan.workspace_bytes());
    b.workspace_bytes = plan.workspace_bytes();
  }
  if (!status.ok()) return status;
  return buf;
}

StepBuffers::~StepBuffers() {
  for (void* p : owned_) cudaFree(p);
}

void StepBuffers::Fill(uint64_t seed, float z_scale) {
  const int64_t dim = spec_.layout().dim();
  FillBf16(const_cast<void*>(b.x), elems_, seed * 16 + 1, 2.f);
  FillBf16(const_cast<void*>(b.dy), elems_, seed * 16 + 2, 1.f);
  if (b.residual) FillBf16(const_cast<void*>(b.residual), elems_, seed * 16 + 3, 1.f);
  if (b.dh_in) FillBf16(const_cast<void*>(b.dh_in), elems_, seed * 16 + 4, 0.5f);
  if (b.z) FillBf16(const_cast<void*>(b.z), elems_, seed * 16 + 5, z_scale);
  if (spec_.weight_dtype() == FP32) {
    FillF32(static_cast<float*>(const_cast<void*>(b.w)), dim, seed * 16 + 6, 0.5f, 1.f);
  } else {
    FillBf16(const_cast<void*>(b.w), dim, seed * 16 + 6, 0.5f, 1.f);
  }
  Poison();
}

void StepBuffers::Poison() {
  for (void* out : {b.y, b.dx, b.dz, b.h}) {
    if (out) FillBf16(out, elems_, 977, 100.f);
  }
}

RefInputs StepBuffers::Inputs(bool with_backward) const {
  const RowShape s = RowShapeOf(spec_);
  return RefInputs{MakeRowLayout(s.rows(), s.heads, s.dim, s.token_stride, s.head_stride),
                   b.x, b.residual, b.z, b.w, spec_.weight_dtype() == FP32,
                   with_backward ? b.dy : nullptr, b.dh_in, spec_.eps()};
}

std::vector<float> StepBuffers::Dw() const {
  const int64_t dim = spec_.layout().dim();
  std::vector<float> out(dim, NAN);
  if (spec_.dw_dtype() == FP32) {
    cudaMemcpy(out.data(), b.dw, dim * 4, cudaMemcpyDeviceToHost);
  } else {
    std::vector<uint16_t> bits(dim);
    cudaMemcpy(bits.data(), b.dw, dim * 2, cudaMemcpyDeviceToHost);
    for (int64_t i = 0; i < dim; ++i) out[i] = static_cast<float>(HostBf16(bits[i]));
  }
  return out;
}

void Worst::Add(const Violations& v, double dw_violation) {
  y = std::max(y, v.y), h = std::max(h, v.h), rstd = std::max(rstd, v.rstd);
  dx = std::max(dx, v.dx), dz = std::max(dz, v.dz), dw = std::max(dw, dw_violation);
}

void Worst::Merge(const Worst& o) { Add(Violations{o.h, o.y, o.rstd, o.dx, o.dz}, o.dw); }

bool Worst::Within() const {
  return y <= 1 && h <= 1 && rstd <= 1 && dx <= 1 && dz <= 1 && dw <= 1;
}

Worst CheckOutputs(const StepSpec& spec, const StepBuffers& buf) {
  const bool forward = HasPhase(spec, FORWARD) || HasPhase(spec, RECOMPUTE);
  const bool backward = HasPhase(spec, BACKWARD);
  const Bindings& b = buf.b;
  std::vector<double> dw_ref;
  const Violations v = CheckRows(
      buf.Inputs(backward),
      RefOutputs{forward ? b.h : nullptr, forward ? b.y : nullptr, forward ? b.rstd : nullptr,
                 backward ? b.dx : nullptr, backward ? b.dz : nullptr},
      &dw_ref);
  Worst w;
  w.Add(v, backward ? DwViolation(buf.Dw(), dw_ref, spec.dw_dtype() == BF16) : 0.0);
  return w;
}

}  // namespace cake::testing
