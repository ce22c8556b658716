// Device buffers for every role of a plan's spec, filled from a seed, and the
// check of a step's outputs against the FP64 reference. Used by the GPU tests
// and by `cake run`.
#ifndef CAKE_TESTS_TESTING_STEP_BUFFERS_H_
#define CAKE_TESTS_TESTING_STEP_BUFFERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cake/plan.pb.h"
#include "ops/launch.h"
#include "tests/testing/reference.h"

namespace cake::testing {

class StepBuffers {
 public:
  // Allocates every buffer the spec's roles need (activations span the whole
  // strided extent, gaps included) and the plan's workspace.
  static absl::StatusOr<std::unique_ptr<StepBuffers>> Create(const Plan& plan);
  ~StepBuffers();
  StepBuffers(const StepBuffers&) = delete;
  StepBuffers& operator=(const StepBuffers&) = delete;

  // Inputs from `seed` (x in [-2, 2), dy, residual, dh_in, w = 1 +- 0.5, z in
  // [-z_scale, z_scale)), then Poison().
  void Fill(uint64_t seed, float z_scale = 3.f);
  // Outputs (gaps of strided views included) become the same noise every
  // time, so an unwritten element fails a check and reruns compare equal.
  void Poison();

  RefInputs Inputs(bool with_backward = true) const;
  // dw as FP32 (a BF16 dw widened).
  std::vector<float> Dw() const;
  // Elements an activation buffer spans.
  int64_t elems() const { return elems_; }

  Bindings b;

 private:
  explicit StepBuffers(const StepSpec& spec) : spec_(spec) {}
  StepSpec spec_;
  int64_t elems_ = 0;
  std::vector<void*> owned_;
};

// Each output's worst error as a multiple of its budget (<= 1 passes).
struct Worst {
  double y = 0, h = 0, rstd = 0, dx = 0, dz = 0, dw = 0;
  void Add(const Violations& v, double dw_violation);
  void Merge(const Worst& o);
  bool Within() const;
};

// Checks the outputs in `buf` of a step that ran the spec's phases (forward
// outputs when it has FORWARD or RECOMPUTE, backward outputs when BACKWARD).
Worst CheckOutputs(const StepSpec& spec, const StepBuffers& buf);

}  // namespace cake::testing

#endif  // CAKE_TESTS_TESTING_STEP_BUFFERS_H_
