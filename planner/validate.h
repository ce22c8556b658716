// Spec validation: every malformed field is an InvalidArgumentError that names
// the field, its value and what was expected.
#ifndef CAKE_PLANNER_VALIDATE_H_
#define CAKE_PLANNER_VALIDATE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cake/step.pb.h"

namespace cake {

inline constexpr double kDefaultEps = 1e-6;
// Rows (tokens * heads) above this are refused: grids and row indices are
// sized for it, and it is far above any training step.
inline constexpr int64_t kMaxRows = int64_t{1} << 31;

absl::Status Validate(const StepSpec& spec);

// Validates `spec` and returns it with every default filled in (heads,
// strides, dtypes, eps). Plans and fingerprints are made from this form, so
// two specs that mean the same step plan the same.
absl::StatusOr<StepSpec> Canonicalize(const StepSpec& spec);

}  // namespace cake

#endif  // CAKE_PLANNER_VALIDATE_H_
