// The device a plan is made for: its arch and the figures the launch rules
// size grids by.
#ifndef CAKE_OPS_TARGET_H_
#define CAKE_OPS_TARGET_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace cake {

struct TargetDevice {
  std::string arch;  // "sm_90a"
  int sm_count = 0;
  // Dynamic shared memory one CTA may opt into, in bytes; the planner refuses
  // a plan whose launches need more (0: not known, not checked).
  int max_smem_per_block_optin = 0;

  // The nominal device of an arch (sm_90a: an H200, 132 SMs), for planning on
  // a machine without it. InvalidArgumentError for an arch Cake does not know.
  static absl::StatusOr<TargetDevice> ForArch(absl::string_view arch);
  // The current CUDA device. FailedPreconditionError when there is none or
  // its compute capability is not one Cake builds for.
  static absl::StatusOr<TargetDevice> Current();
};

// The arches Cake knows, e.g. {"sm_90a", ...}.
std::vector<std::string> KnownArches();

}  // namespace cake

#endif  // CAKE_OPS_TARGET_H_
