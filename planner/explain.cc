#include "planner/explain.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ops/launch.h"
#include "ops/registry.h"
#include "ops/shape.h"

namespace cake {
namespace {

std::string Dims(const Dim3& d) {
  if (d.y() <= 1 && d.z() <= 1) return absl::StrCat(d.x());
  return absl::StrCat(d.x(), "x", d.y(), d.z() > 1 ? absl::StrCat("x", d.z()) : "");
}

std::string Bytes(int64_t b) {
  if (b >= (int64_t{1} << 20)) return absl::StrFormat("%d bytes (%.2f MiB)", b, b / 1048576.0);
  if (b >= 1024) return absl::StrFormat("%d bytes (%.1f KiB)", b, b / 1024.0);
  return absl::StrCat(b, " bytes");
}

}  // namespace

std::string DescribeSpec(const StepSpec& spec) {
  const RowShape s = RowShapeOf(spec);
  std::string layout;
  switch (s.form()) {
    case HEADS_FORM_ROWS:
      layout = absl::StrCat("rows [", s.tokens, ", ", s.dim, "]",
                            s.token_stride != s.dim ? absl::StrCat(" row stride ", s.token_stride)
                                                    : "");
      break;
    case HEADS_FORM_CONTIGUOUS:
      layout = absl::StrCat("heads [", s.tokens, ", ", s.heads, ", ", s.dim, "] contiguous");
      break;
    default:
      layout = absl::StrCat("heads [", s.tokens, ", ", s.heads, ", ", s.dim,
                            "] strided (token stride ", s.token_stride, ", head stride ",
                            s.head_stride, ")");
  }
  std::vector<std::string> phases;
  for (int p : spec.phases()) phases.push_back(Phase_Name(static_cast<Phase>(p)));
  return absl::StrCat(
      Op_Name(spec.op()), " ", layout, " = ", s.rows(), " rows of ", s.dim, "; weight ",
      DType_Name(spec.weight_dtype()), ", dw ", DType_Name(spec.dw_dtype()),
      spec.accumulate_dw() ? " (accumulated)" : "", spec.residual() ? ", fused residual" : "",
      spec.residual_grad_in() ? " with dh_in" : "", "; ",
      spec.deterministic() ? "deterministic" : "non-deterministic", "; eps ", spec.eps(),
      "; phases ", absl::StrJoin(phases, ", "));
}

std::string Explain(const Plan& plan) {
  std::string out = absl::StrCat(
      "plan ", plan.fingerprint(), plan.spec().name().empty() ? "" : " \"",
      plan.spec().name(), plan.spec().name().empty() ? "" : "\"", "\n  target ", plan.arch(), " (",
      plan.sm_count(), " SMs), routing table ", plan.routing_table_version(), ", format ",
      plan.format_version(), "\n  step ", DescribeSpec(plan.spec()), "\n");
  absl::StrAppend(&out, "launches (", plan.launches_size(), "):\n");
  for (const Launch& l : plan.launches()) {
    std::vector<std::string> deps;
    for (int d : l.depends_on()) deps.push_back(absl::StrCat(d));
    const std::string after = deps.empty() ? "" : absl::StrCat(" after [", absl::StrJoin(deps, ","), "]");
    if (l.kind() == MEMSET) {
      absl::StrAppend(&out, "  [", l.index(), "] ", Phase_Name(l.phase()), "  memset workspace ",
                      l.region(), ", ", Bytes(l.memset_bytes()), after, "\n");
    } else {
      absl::StrAppend(&out, "  [", l.index(), "] ", Phase_Name(l.phase()), "  ", l.program(),
                      "  grid ", Dims(l.grid()), " block ", Dims(l.block()), " smem ",
                      l.dynamic_smem_bytes());
      // A persistent backward's shared memory padded so that no more of its
      // CTAs fit an SM than its grid counts on (BwdCappedSmemBytes).
      if (const ProgramInfo* program = FindProgram(l.program()); program != nullptr) {
        const std::optional<BackwardSmem> smem = PersistentBackwardSmem(*program, plan.spec());
        if (smem && l.dynamic_smem_bytes() > smem->used) {
          absl::StrAppend(&out, " (padded from ", smem->used, ": at most ", smem->ctas_per_sm,
                          " CTAs a SM)");
        }
      }
      if (l.rows_per_block() > 0) absl::StrAppend(&out, " rows/block ", l.rows_per_block());
      if (l.partials() > 0) absl::StrAppend(&out, " partials ", l.partials());
      if (!l.region().empty()) absl::StrAppend(&out, " workspace ", l.region());
      if (WalksRowsFromTheLast(plan.spec(), l)) absl::StrAppend(&out, " rows from the last");
      absl::StrAppend(&out, after, "\n");
    }
    absl::StrAppend(&out, "      why: ", l.reason(), "\n");
  }
  absl::StrAppend(&out, "workspace: ", Bytes(plan.workspace_bytes()), " in ",
                  plan.workspace_size(), plan.workspace_size() == 1 ? " region" : " regions",
                  "\n");
  for (const WorkspaceRegion& r : plan.workspace()) {
    absl::StrAppend(&out, "  ", r.name(), "  offset ", r.offset(), "  ", Bytes(r.bytes()),
                    r.zero_init() ? "  zeroed by a memset launch" : "", "\n");
  }
  for (const std::string& n : plan.notes()) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

}  // namespace cake
