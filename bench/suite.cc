#include "bench/suite.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cake::bench {
namespace {

StepSpec Base(Op op, int64_t tokens, int64_t heads, int64_t dim, DType weight) {
  StepSpec s;
  s.set_op(op);
  s.mutable_layout()->set_tokens(tokens);
  s.mutable_layout()->set_heads(heads);
  s.mutable_layout()->set_dim(dim);
  s.set_weight_dtype(weight);
  return s;
}

}  // namespace

std::vector<std::string> OpsOf(const SuiteShape& s) {
  std::vector<std::string> ops = {"fwd", "bwd", "ckpt"};
  if (s.base.weight_dtype() != FP32) ops.push_back("ckpt.cast");
  return ops;
}

absl::StatusOr<StepSpec> SpecFor(const SuiteShape& s, const std::string& op, bool deterministic) {
  StepSpec spec = s.base;
  spec.set_name(absl::StrCat(s.shape, " ", op));
  spec.set_deterministic(deterministic);
  spec.set_dw_dtype(FP32);
  spec.clear_phases();
  if (op == "fwd") {
    spec.add_phases(FORWARD);
    spec.set_residual_grad_in(false);  // a backward input
  } else if (op == "bwd") {
    spec.add_phases(BACKWARD);
  } else if (op == "ckpt" || op == "ckpt.cast") {
    spec.add_phases(FORWARD);
    spec.add_phases(RECOMPUTE);
    spec.add_phases(BACKWARD);
    if (op == "ckpt.cast") spec.set_dw_dtype(s.base.weight_dtype() == FP32 ? FP32 : BF16);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("op \"", op, "\": expected fwd, bwd, ckpt or ckpt.cast"));
  }
  return spec;
}

std::vector<SuiteShape> DefaultSuite() {
  std::vector<SuiteShape> suite;
  for (DType w : {BF16, FP32}) {
    for (int64_t h : {1536, 2048, 4096, 6144, 8192}) {
      for (int64_t t : {1024, 4096, 16384, 65536, 131072}) {
        suite.push_back({absl::StrFormat("[%d, %d] %s", t, h, w == FP32 ? "fp32w" : "bf16w"),
                         Base(RMSNORM, t, 1, h, w)});
      }
    }
  }
  for (int64_t t : {4096, 16384, 65536}) {
    StepSpec strided = Base(RMSNORM, t, 24, 256, BF16);
    strided.mutable_layout()->set_token_stride(32 * 256);
    suite.push_back({absl::StrFormat("[%d, 24, 256] strided", t), strided});
    suite.push_back({absl::StrFormat("[%d, 4, 256] contiguous", t), Base(RMSNORM, t, 4, 256, BF16)});
  }
  for (int64_t h : {4096, 6144}) {
    for (int64_t t : {16384, 65536}) {
      StepSpec r = Base(RMSNORM, t, 1, h, BF16);
      r.set_residual(true);
      r.set_residual_grad_in(true);
      suite.push_back({absl::StrFormat("[%d, %d] residual", t, h), r});
    }
  }
  for (auto [t, heads] : {std::pair<int64_t, int64_t>{260, 48}, {1031, 48}, {3534, 48},
                          {8192, 32}, {16384, 48}}) {
    suite.push_back({absl::StrFormat("gate %dx%dx128", t, heads),
                     Base(RMSNORM_SILU_GATE, t, heads, 128, BF16)});
  }
  return suite;
}

double BytesMoved(const StepSpec& spec) {
  const Layout& l = spec.layout();
  const double rows = static_cast<double>(l.tokens()) * std::max<int64_t>(l.heads(), 1);
  const double n = rows * l.dim();
  const bool gate = spec.op() == RMSNORM_SILU_GATE;
  double bytes = 0;
  for (int phase : spec.phases()) {
    if (phase == FORWARD || phase == RECOMPUTE) {
      // x read, y written (+ z read; + residual read, h written).
      bytes += (4 + (gate ? 2 : 0) + (spec.residual() ? 4 : 0)) * n + 4 * rows;
    } else if (phase == BACKWARD) {
      // x (or h) and dy read, dx written (+ z read, dz written; + dh_in).
      bytes += (6 + (gate ? 4 : 0) + (spec.residual_grad_in() ? 2 : 0)) * n + 4 * rows;
      bytes += static_cast<double>(l.dim()) * (spec.dw_dtype() == BF16 ? 2 : 4);
    }
  }
  return bytes;
}

}  // namespace cake::bench
