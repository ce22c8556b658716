// `cake run`: build a plan's step on the GPU, replay it, and check every
// output against the FP64 reference.
#ifndef CAKE_TOOLS_RUN_COMMAND_H_
#define CAKE_TOOLS_RUN_COMMAND_H_

#include <cstdint>

#include "cake/plan.pb.h"

namespace cake {

// Returns the process exit code: 0 when every output is within budget, 1
// when one is not or CUDA fails, 3 when there is no CUDA device (the plan is
// printed and nothing runs).
int RunOnDevice(const Plan& plan, int replays, uint64_t seed);

}  // namespace cake

#endif  // CAKE_TOOLS_RUN_COMMAND_H_
