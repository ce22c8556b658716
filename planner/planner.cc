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

  int AddMemset(absl::string_view region, int64_t bytes, std::string reason) {
    Launch* l = NewLaunch(MEMSET, BACKWARD, {}, std::move(reason));
    l->set_program("memset");
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

constexpr char kDwAcc[] = "dw_acc";

// The element of a spec's dw partial rows, as plans name it.
const char* PartialRowsName(const StepSpec& spec) { return DwPartialsFp32(spec) ? "FP32" : "FP64"; }

// The backward program and the launch that turns its sums into dw. `after`
// is the last launch of the phases before; returns the last launch of the
// backward.
absl::StatusOr<int> AddBackward(PlanBuilder& b, const RoutingTable& table, const StepSpec& spec,
                                int after, Plan* plan) {
  CAKE_ASSIGN_OR_RETURN(Route route, RouteLaunch(table, spec, PHASE_KIND_BACKWARD));
  if (route.default_rule) plan->add_notes(absl::StrCat("backward: ", route.reason));
  const ProgramInfo& program = *route.program;
  const ProgramInfo* finish = FindProgram(program.reduce_program);
  if (program.dw_output == DwOutput::kNone || finish == nullptr) {
    return absl::InternalError(
        absl::StrCat(program.id, " is routed as a backward but names no dw reduce or finish"));
  }
  const std::string dw = spec.accumulate_dw()
                             ? "added into the caller's FP32 dw"
                             : absl::StrCat("written as ", DType_Name(spec.dw_dtype()));
  if (program.dw_output == DwOutput::kPartials) {
    const int k = b.AddKernel(program, BACKWARD, {after}, route.reason, program.workspace_region);
    const int r = b.AddKernel(*finish, BACKWARD, {k},
                              absl::StrCat("sums the ", PartialRowsName(spec),
                                           " dw partial rows of launch ", k,
                                           " in FP64 in a fixed order; dw ", dw),
                              program.workspace_region);
    plan->mutable_launches(r)->set_partials(plan->launches(k).partials());
    return r;
  }
  const int64_t acc_bytes = spec.layout().dim() * 8;
  b.AddRegion(kDwAcc, acc_bytes, true);
  const int m = b.AddMemset(kDwAcc, acc_bytes,
                            absl::StrCat("zeroes the FP64 dw accumulator of ", program.id));
  const int k = b.AddKernel(program, BACKWARD, {after, m}, route.reason, kDwAcc);
  return b.AddKernel(*finish, BACKWARD, {k},
                     absl::StrCat("rounds the FP64 dw accumulator of launch ", k, " once; dw ", dw),
                     kDwAcc);
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

namespace {

// Each launch's dynamic shared memory within what one CTA may opt into on
// the target (not checked where the target does not say, 0).
absl::Status CheckSharedMemory(const Plan& plan, const TargetDevice& target) {
  if (target.max_smem_per_block_optin <= 0) return absl::OkStatus();
  for (const Launch& l : plan.launches()) {
    if (l.dynamic_smem_bytes() > target.max_smem_per_block_optin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target.max_smem_per_block_optin = ", target.max_smem_per_block_optin, ": launches[",
          l.index(), "] (", l.program(), ") needs ", l.dynamic_smem_bytes(),
          " bytes of dynamic shared memory per CTA"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const StepSpec& in, const TargetDevice& target) {
  CAKE_ASSIGN_OR_RETURN(const RoutingTable* table, RoutingTableFor(target.arch));
  return MakePlan(in, target, *table);
}

absl::StatusOr<Plan> MakePlan(const StepSpec& in, const TargetDevice& target,
                              const RoutingTable& table) {
  CAKE_ASSIGN_OR_RETURN(StepSpec spec, Canonicalize(in));
  if (table.arch() != target.arch) {
    return absl::InvalidArgumentError(absl::StrCat("routing table arch = \"", table.arch(),
                                                   "\": the target is ", target.arch));
  }
  if (target.sm_count <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("target.sm_count = ", target.sm_count, ": must be > 0"));
  }
  Plan plan;
  plan.set_format_version(kPlanFormatVersion);
  *plan.mutable_spec() = spec;
  plan.set_arch(target.arch);
  plan.set_sm_count(target.sm_count);
  plan.set_routing_table_version(table.version());
  plan.set_fingerprint(Fingerprint(spec, target, table.version()));
  if (RowShapeOf(spec).rows() == 0) {
    plan.add_notes("layout.tokens = 0: nothing to run");
    return plan;
  }
  PlanBuilder b(&plan, target);
  int last = -1;
  for (int p : spec.phases()) {
    const Phase phase = static_cast<Phase>(p);
    if (phase == BACKWARD) {
      CAKE_ASSIGN_OR_RETURN(last, AddBackward(b, table, spec, last, &plan));
      continue;
    }
    CAKE_ASSIGN_OR_RETURN(
        Route route,
        RouteLaunch(table, spec, phase == RECOMPUTE ? PHASE_KIND_RECOMPUTE : PHASE_KIND_FORWARD));
    if (route.default_rule) {
      plan.add_notes(absl::StrCat(Phase_Name(phase), ": ", route.reason));
    }
    // Forward and recompute write the same outputs, so they stay ordered.
    last = b.AddKernel(*route.program, phase, {last}, route.reason);
  }
  CAKE_RETURN_IF_ERROR(CheckSharedMemory(plan, target));
  return plan;
}

Planner::Planner(PlannerOptions options) : cache_(options.cache_capacity) {}

absl::StatusOr<std::shared_ptr<const Plan>> Planner::GetPlan(const StepSpec& spec,
                                                             const TargetDevice& target) {
  CAKE_ASSIGN_OR_RETURN(StepSpec canonical, Canonicalize(spec));
  CAKE_ASSIGN_OR_RETURN(const RoutingTable* table, RoutingTableFor(target.arch));
  const std::string key = Fingerprint(canonical, target, table->version());
  if (std::shared_ptr<const Plan> hit = cache_.Find(key)) {
    // The key leaves the shared-memory limit out: the plan does not depend
    // on it, only whether it fits.
    CAKE_RETURN_IF_ERROR(CheckSharedMemory(*hit, target));
    return hit;
  }
  CAKE_ASSIGN_OR_RETURN(Plan plan, MakePlan(canonical, target));
  return cache_.Insert(key, std::make_shared<const Plan>(std::move(plan)));
}

}  // namespace cake
