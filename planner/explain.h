// A readable account of a plan: what runs, in what order, why, and the
// workspace it needs.
#ifndef CAKE_PLANNER_EXPLAIN_H_
#define CAKE_PLANNER_EXPLAIN_H_

#include <string>

#include "cake/plan.pb.h"
#include "cake/step.pb.h"

namespace cake {

std::string Explain(const Plan& plan);
// One line: op, shape, dtypes, mode, phases.
std::string DescribeSpec(const StepSpec& canonical_spec);

}  // namespace cake

#endif  // CAKE_PLANNER_EXPLAIN_H_
