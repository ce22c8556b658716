// The benchmark suite of BENCH.md as data: shapes, the ops timed on each, the
// spec of each (shape, op) and the bytes it must move.
#ifndef CAKE_BENCH_SUITE_H_
#define CAKE_BENCH_SUITE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cake/step.pb.h"

namespace cake::bench {

// One row of the suite before the op is chosen: op, layout, weight dtype,
// residual. `shape` names it in tables ("[65536, 4096] bf16w").
struct SuiteShape {
  std::string shape;
  StepSpec base;
};

// "fwd", "bwd", "ckpt" (forward, recompute, backward; dw FP32) and
// "ckpt.cast" (the same with dw in the weight dtype; only where that differs).
std::vector<std::string> OpsOf(const SuiteShape& s);

// The spec of `op` on `s`, with the backward mode given.
absl::StatusOr<StepSpec> SpecFor(const SuiteShape& s, const std::string& op, bool deterministic);

// The default suite of BENCH.md, in order.
std::vector<SuiteShape> DefaultSuite();

// Bytes a spec's phases must move: the activations each phase reads and
// writes once (BENCH.md: forward 4*T*H + 4*T, backward 6*T*H + 4*T + dw,
// gated 6 and 10 per element; the residual adds its tensors), rstd, and the
// dw row. Strided views count the normalized elements, not the gaps.
double BytesMoved(const StepSpec& spec);

}  // namespace cake::bench

#endif  // CAKE_BENCH_SUITE_H_
