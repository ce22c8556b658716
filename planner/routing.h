// Routing: which program runs each routed launch, from the arch's routing
// table (checked-in data, embedded in the binary).
//
// Windows are tried in table order; the first window that matches the spec
// and whose program supports it wins. A recompute tries the
// PHASE_KIND_RECOMPUTE windows first, then the PHASE_KIND_FORWARD ones. A
// spec no window covers gets the default rule:
//   forward:  <op>.fwd.warp for dim <= 1024, else <op>.fwd.cta;
//   backward: <op>.bwd.det.partials when deterministic, else <op>.bwd.kb.
#ifndef CAKE_PLANNER_ROUTING_H_
#define CAKE_PLANNER_ROUTING_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "cake/routing.pb.h"
#include "cake/step.pb.h"
#include "ops/registry.h"

namespace cake {

struct Route {
  const ProgramInfo* program = nullptr;
  bool default_rule = false;
  std::string reason;  // which window (and its evidence) or which default
};

// Parses a text-format table and checks it: every program exists and runs the
// window's op and phase kind, ranges are ordered, evidence is present.
// `source` names the text in error messages.
absl::StatusOr<RoutingTable> ParseRoutingTable(absl::string_view text, absl::string_view source);
absl::Status CheckRoutingTable(const RoutingTable& table);

// The embedded table of `arch`, parsed once. InvalidArgumentError when the
// arch has none.
absl::StatusOr<const RoutingTable*> RoutingTableFor(absl::string_view arch);

// Routes one launch of a canonical spec: `kind` is PHASE_KIND_FORWARD,
// PHASE_KIND_RECOMPUTE or PHASE_KIND_BACKWARD.
absl::StatusOr<Route> RouteLaunch(const RoutingTable& table, const StepSpec& spec,
                                  PhaseKind kind);

// A window as one line, e.g. for explanations and `cake routes`.
std::string DescribeWindow(const Window& w);

}  // namespace cake

#endif  // CAKE_PLANNER_ROUTING_H_
