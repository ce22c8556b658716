// Plan edits for tests and benchmarks: run a program the routing table does
// not pick for a shape.
#ifndef CAKE_TESTS_TESTING_PLANS_H_
#define CAKE_TESTS_TESTING_PLANS_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cake/plan.pb.h"
#include "ops/registry.h"
#include "ops/row_config.h"
#include "ops/status.h"
#include "ops/target.h"
#include "planner/planner.h"
#include "planner/routing.h"

namespace cake::testing {

// `plan` with every launch of program `from` switched to `to` (which must
// have the same stage), geometry and all: the reduce after it reads `to`'s
// partial rows, and `to`'s workspace region grows where it needs more (the
// regions after it move, as the planner would have laid them out).
inline Plan ForceProgram(Plan plan, const std::string& from, const std::string& to,
                         const TargetDevice& target) {
  const ProgramInfo* p = FindProgram(to);
  const Geometry g = p->geometry(plan.spec(), target);
  for (Launch& l : *plan.mutable_launches()) {
    if (l.program() != from) continue;
    l.set_program(to);
    *l.mutable_grid() = g.grid;
    *l.mutable_block() = g.block;
    l.set_dynamic_smem_bytes(g.dynamic_smem_bytes);
    l.set_rows_per_block(g.rows_per_block);
    l.set_partials(g.partials);
    l.set_reason("forced by a test or benchmark");
    for (Launch& after : *plan.mutable_launches()) {
      for (int d : after.depends_on()) {
        if (d == l.index() && after.program() == "dw.reduce") after.set_partials(g.partials);
      }
    }
  }
  if (p->workspace_bytes == nullptr) return plan;
  const int64_t need = p->workspace_bytes(plan.spec(), g);
  int64_t end = 0;
  for (WorkspaceRegion& r : *plan.mutable_workspace()) {
    if (r.name() == p->workspace_region && r.bytes() < need) r.set_bytes(need);
    r.set_offset(RoundUp(end, kWorkspaceAlignment));
    end = r.offset() + r.bytes();
  }
  plan.set_workspace_bytes(RoundUp(end, kWorkspaceAlignment));
  return plan;
}

// `spec` planned by the target's routing table with a first window that
// routes `to`'s stage to `to` (`evidence` says why): unlike ForceProgram, the
// plan has the launches and workspace of `to`'s dw form (dw.reduce, or a
// zeroed accumulator and dw.finish). Its table version names `to`. A forward
// program runs the recompute too, unless `kinds` names the phase kinds its
// windows take (e.g. PHASE_KIND_RECOMPUTE alone).
inline absl::StatusOr<Plan> PlanRoutedTo(const StepSpec& spec, const ProgramInfo& to,
                                         const TargetDevice& target, const std::string& evidence,
                                         std::vector<PhaseKind> kinds = {}) {
  CAKE_ASSIGN_OR_RETURN(const RoutingTable* routed, RoutingTableFor(target.arch));
  RoutingTable table;
  table.set_arch(routed->arch());
  const bool recompute_only = kinds.size() == 1 && kinds[0] == PHASE_KIND_RECOMPUTE;
  table.set_version(
      absl::StrCat(routed->version(), "+", recompute_only ? "recompute:" : "", to.id));
  if (kinds.empty()) {
    kinds = to.stage == Stage::kForward
                ? std::vector<PhaseKind>{PHASE_KIND_RECOMPUTE, PHASE_KIND_FORWARD}
                : std::vector<PhaseKind>{PHASE_KIND_BACKWARD};
  }
  for (PhaseKind kind : kinds) {
    Window* w = table.add_windows();
    w->set_op(spec.op());
    w->set_phase_kind(kind);
    w->set_program(std::string(to.id));
    w->set_evidence(evidence);
  }
  for (const Window& rest : routed->windows()) *table.add_windows() = rest;
  return MakePlan(spec, target, table);
}

// The first launch of program `id` in `plan`, or null.
inline const Launch* LaunchOf(const Plan& plan, const std::string& id) {
  for (const Launch& l : plan.launches()) {
    if (l.program() == id) return &l;
  }
  return nullptr;
}

// `plan` with every program of `to`'s stage (a recompute may run another
// forward program than the forward) switched to `to` everywhere it runs.
inline Plan ForceStage(Plan plan, const std::string& to, const TargetDevice& target) {
  const ProgramInfo* p = FindProgram(to);
  std::vector<std::string> from;
  for (const Launch& l : plan.launches()) {
    const ProgramInfo* q = FindProgram(l.program());
    if (q != nullptr && q->stage == p->stage &&
        std::find(from.begin(), from.end(), l.program()) == from.end()) {
      from.push_back(l.program());
    }
  }
  for (const std::string& f : from) plan = ForceProgram(std::move(plan), f, to, target);
  return plan;
}

}  // namespace cake::testing

#endif  // CAKE_TESTS_TESTING_PLANS_H_
