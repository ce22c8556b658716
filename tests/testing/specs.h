// Spec builders shared by the tests.
#ifndef CAKE_TESTS_TESTING_SPECS_H_
#define CAKE_TESTS_TESTING_SPECS_H_

#include <cstdint>
#include <initializer_list>

#include "cake/step.pb.h"

namespace cake::testing {

// A valid rmsnorm_train spec over plain rows [tokens, dim].
inline StepSpec RowsSpec(int64_t tokens, int64_t dim, bool deterministic = false,
                         std::initializer_list<Phase> phases = {FORWARD, RECOMPUTE, BACKWARD}) {
  StepSpec s;
  s.set_name("test");
  s.set_op(RMSNORM);
  s.mutable_layout()->set_tokens(tokens);
  s.mutable_layout()->set_dim(dim);
  s.set_deterministic(deterministic);
  for (Phase p : phases) s.add_phases(p);
  return s;
}

// A valid per-head spec [tokens, heads, dim] with the given strides (0: dense).
inline StepSpec HeadsSpec(int64_t tokens, int64_t heads, int64_t dim, int64_t token_stride = 0,
                          int64_t head_stride = 0) {
  StepSpec s = RowsSpec(tokens, dim);
  s.mutable_layout()->set_heads(heads);
  s.mutable_layout()->set_token_stride(token_stride);
  s.mutable_layout()->set_head_stride(head_stride);
  return s;
}

// `spec` as the gated op (rmsnorm_silu_gate_train).
inline StepSpec Gated(StepSpec spec) {
  spec.set_op(RMSNORM_SILU_GATE);
  return spec;
}

// `spec` with the fused residual and its incoming gradient dh_in.
inline StepSpec WithResidualGradIn(StepSpec spec) {
  spec.set_residual(true);
  spec.set_residual_grad_in(true);
  return spec;
}

}  // namespace cake::testing

#endif  // CAKE_TESTS_TESTING_SPECS_H_
