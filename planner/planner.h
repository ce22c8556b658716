// The planner: StepSpec + target device -> Plan.
//
// It validates the spec, picks one program per launch from the arch's
// routing table, adds the companion launches a program needs (memset, ordered
// reduce, cast), lays out the workspace and fingerprints the result. It never
// touches the GPU: the target device is given.
#ifndef CAKE_PLANNER_PLANNER_H_
#define CAKE_PLANNER_PLANNER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cake/plan.pb.h"
#include "cake/routing.pb.h"
#include "cake/step.pb.h"
#include "ops/target.h"
#include "planner/plan_cache.h"

namespace cake {

// Bumped when a Plan written by an older build would mean something else.
inline constexpr uint32_t kPlanFormatVersion = 1;
inline constexpr int64_t kWorkspaceAlignment = 256;

// Plans `spec` for `target`, uncached.
absl::StatusOr<Plan> MakePlan(const StepSpec& spec, const TargetDevice& target);
// The same with `table` in place of the arch's routing table (its version
// enters the fingerprint): candidates for a window, timed side by side.
absl::StatusOr<Plan> MakePlan(const StepSpec& spec, const TargetDevice& target,
                              const RoutingTable& table);

// Hex digest of a plan's inputs: format version, canonical spec, arch, SM
// count and routing-table version, from their deterministic serialization.
// Stable across runs and processes of one build (not a security hash).
std::string Fingerprint(const StepSpec& canonical_spec, const TargetDevice& target,
                        const std::string& routing_table_version);

struct PlannerOptions {
  size_t cache_capacity = 256;  // plans kept, least recently used out first
};

// MakePlan behind a bounded, thread-safe cache keyed by fingerprint.
class Planner {
 public:
  explicit Planner(PlannerOptions options = {});

  absl::StatusOr<std::shared_ptr<const Plan>> GetPlan(const StepSpec& spec,
                                                      const TargetDevice& target);
  PlanCache::Stats cache_stats() const { return cache_.stats(); }

 private:
  PlanCache cache_;
};

}  // namespace cake

#endif  // CAKE_PLANNER_PLANNER_H_
