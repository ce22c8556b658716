#include "planner/planner.h"

#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "ops/registry.h"
#include "ops/row_config.h"
#include "ops/shape.h"
#include "ops/status.h"
#include "planner/routing.h"
#include "planner/validate.h"

namespace cake {
namespace {

// Builds the launch list and the workspace of one plan.
class PlanBuilder {
 public:
  PlanBuilder(Plan* plan, const TargetDevice& target) : plan_(plan), target_(target) {}

  int AddKernel(const ProgramInfo& program, Phase phase, std::initializer_list<int> deps,
                std::string reason, absl::string_view region = {}) {
    const Geometry g = program.geometry(plan_->spec(), target_);
    Launch* l = NewLaunch(KERNEL, phase, deps, std::move(reason));
    l->set_program(std::string(program.id));
    *l->mutable_grid() = g.grid;
    *l->mutable_block() = g.block;
    l->set_dynamic_smem_bytes(g.dynamic_smem_bytes);
    l->set_rows_per_block(g.rows_per_block);
    l->set_partials(g.partials);
    l->set_region(std::string(region));
    if (program.workspace_bytes != nullptr) {
      AddRegion(program.workspace_region, program.workspace_bytes(plan_->spec(), g), false);
    }
    return l->index();
  }

  int AddMemset(MemsetTarget target, absl::string_view region, int64_t bytes, std::string reason) {
    Launch* l = NewLaunch(MEMSET, BACKWARD, {}, std::move(reason));
    l->set_program("memset");
    l->set_memset_target(target);
    l->set_region(std::string(region));
    l->set_memset_bytes(bytes);
    return l->index();
  }

  void AddRegion(absl::string_view name, int64_t bytes, bool zero_init) {
    WorkspaceRegion* r = plan_->add_workspace();
    r->set_name(std::string(name));
    r->set_offset(RoundUp(plan_->workspace_bytes(), kWorkspaceAlignment));
    r->set_bytes(bytes);
    r->set_zero_init(zero_init);
    plan_->set_workspace_bytes(RoundUp(r->offset() + bytes, kWorkspaceAlignment));
  }

 private:
  Launch* NewLaunch(LaunchKind kind, Phase phase, std::initializer_list<int> deps,
                    std::string reason) {
    Launch* l = plan_->add_launches();
    l->set_index(plan_->launches_size() - 1);
    l->set_kind(kind);
    l->set_phase(phase);
    for (int d : deps) {
      if (d >= 0) l->add_depends_on(d);
    }
    l->set_reason(std::move(reason));
    return l;
  }

  Plan* plan_;
  const TargetDevice& target_;
};

constexpr char kDwAccum[] = "dw_accum";

// The backward program and its companions. `after` is the last launch of the
// phases before; returns the last launch of the backward.
absl::StatusOr<int> AddBackward(PlanBuilder& b, const RoutingTable& table, const StepSpec& spec,
                                int after, Plan* plan) {
  CAKE_ASSIGN_OR_RETURN(Route route, RouteLaunch(table, spec, PHASE_KIND_BACKWARD));
  if (route.default_rule) plan->add_notes(absl::StrCat("backward: ", route.reason));
  const ProgramInfo& program = *route.program;
  const int64_t dw_bytes = spec.layout().dim() * 4;
  switch (program.dw_output) {
    case DwOutput::kPartials: {
      const ProgramInfo* reduce = FindProgram(program.reduce_program);
      if (reduce == nullptr) {
        return absl::InternalError(absl::StrCat(program.id, " names missing reduce program ",
                                                program.reduce_program));
      }
      const int k = b.AddKernel(program, BACKWARD, {after}, route.reason, program.workspace_region);
      return b.AddKernel(*reduce, BACKWARD, {k},
                         absl::StrCat("reduces the dw partial rows of launch ", k,
                                      " in a fixed order into dw (",
                                      spec.accumulate_dw() ? "added into FP32"
                                                           : DType_Name(spec.dw_dtype()),
                                      ")"),
                         program.workspace_region);
    }
    case DwOutput::kAtomic: {
      if (spec.accumulate_dw()) {
        return b.AddKernel(program, BACKWARD, {after},
                           absl::StrCat(route.reason, "; adds into the caller's FP32 dw"));
      }
      if (spec.dw_dtype() == FP32) {
        const int m = b.AddMemset(MEMSET_TARGET_DW, "", dw_bytes,
                                  absl::StrCat("zeroes dw for the FP32 atomics of ", program.id));
        return b.AddKernel(program, BACKWARD, {after, m}, route.reason);
      }
      b.AddRegion(kDwAccum, dw_bytes, true);
      const int m = b.AddMemset(MEMSET_TARGET_WORKSPACE, kDwAccum, dw_bytes,
                                absl::StrCat("zeroes the FP32 dw accumulator of ", program.id));
      const int k = b.AddKernel(program, BACKWARD, {after, m}, route.reason, kDwAccum);
      const ProgramInfo* cast = FindProgram("dw.cast");
      return b.AddKernel(*cast, BACKWARD, {k},
                         absl::StrCat("casts the FP32 dw accumulator to ",
                                      DType_Name(spec.dw_dtype())),
                         kDwAccum);
    }
    case DwOutput::kNone:
      break;
  }
  return absl::InternalError(absl::StrCat(program.id, " is routed as a backward but sums no dw"));
}

// FNV-1a, 64-bit, from a given offset basis.
uint64_t Fnv1a(absl::string_view bytes, uint64_t basis) {
  uint64_t h = basis;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

std::string Fingerprint(const StepSpec& canonical_spec, const TargetDevice& target,
                        const std::string& routing_table_version) {
  std::string spec_bytes;
  {
    google::protobuf::io::StringOutputStream raw(&spec_bytes);
    google::protobuf::io::CodedOutputStream out(&raw);
    out.SetSerializationDeterministic(true);
    canonical_spec.SerializeToCodedStream(&out);
  }
  const std::string input =
      absl::StrCat("cake-plan/", kPlanFormatVersion, "/", target.arch, "/", target.sm_count, "/",
                   routing_table_version.size(), ":", routing_table_version, "/", spec_bytes);
  return absl::StrFormat("%016x%016x", Fnv1a(input, 0xcbf29ce484222325ULL),
                         Fnv1a(input, 0x84222325cbf29ce4ULL));
}

absl::StatusOr<Plan> MakePlan(const StepSpec& in, const TargetDevice& target) {
  CAKE_ASSIGN_OR_RETURN(StepSpec spec, Canonicalize(in));
  CAKE_ASSIGN_OR_RETURN(const RoutingTable* table, RoutingTableFor(target.arch));
  if (target.sm_count <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("target.sm_count = ", target.sm_count, ": must be > 0"));
  }
  Plan plan;
  plan.set_format_version(kPlanFormatVersion);
  *plan.mutable_spec() = spec;
  plan.set_arch(target.arch);
  plan.set_sm_count(target.sm_count);
  plan.set_routing_table_version(table->version());
  plan.set_fingerprint(Fingerprint(spec, target, table->version()));
  if (RowShapeOf(spec).rows() == 0) {
    plan.add_notes("layout.tokens = 0: nothing to run");
    return plan;
  }
  PlanBuilder b(&plan, target);
  int last = -1;
  for (int p : spec.phases()) {
    const Phase phase = static_cast<Phase>(p);
    if (phase == BACKWARD) {
      CAKE_ASSIGN_OR_RETURN(last, AddBackward(b, *table, spec, last, &plan));
      continue;
    }
    CAKE_ASSIGN_OR_RETURN(Route route, RouteLaunch(*table, spec, PHASE_KIND_FORWARD));
    if (route.default_rule) {
      plan.add_notes(absl::StrCat(Phase_Name(phase), ": ", route.reason));
    }
    // Forward and recompute write the same outputs, so they stay ordered.
    last = b.AddKernel(*route.program, phase, {last}, route.reason);
  }
  return plan;
}

Planner::Planner(PlannerOptions options) : cache_(options.cache_capacity) {}

absl::StatusOr<std::shared_ptr<const Plan>> Planner::GetPlan(const StepSpec& spec,
                                                             const TargetDevice& target) {
  CAKE_ASSIGN_OR_RETURN(StepSpec canonical, Canonicalize(spec));
  CAKE_ASSIGN_OR_RETURN(const RoutingTable* table, RoutingTableFor(target.arch));
  const std::string key = Fingerprint(canonical, target, table->version());
  if (std::shared_ptr<const Plan> hit = cache_.Find(key)) return hit;
  CAKE_ASSIGN_OR_RETURN(Plan plan, MakePlan(canonical, target));
  return cache_.Insert(key, std::make_shared<const Plan>(std::move(plan)));
}

}  // namespace cake
