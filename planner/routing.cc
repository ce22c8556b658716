#include "planner/routing.h"

#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "ops/row_config.h"
#include "ops/shape.h"
#include "ops/status.h"
#include "planner/text_proto.h"

namespace cake {

// Generated from planner/routes/*.textproto (planner/CMakeLists.txt).
struct EmbeddedRoutes {
  const char* arch;
  const char* text;
};
extern const EmbeddedRoutes kEmbeddedRoutes[];
extern const int kNumEmbeddedRoutes;

namespace {

Stage StageOf(PhaseKind kind) {
  return kind == PHASE_KIND_BACKWARD ? Stage::kBackward : Stage::kForward;
}

std::string Range(int64_t lo, int64_t hi) {
  return hi == 0 ? absl::StrCat(lo, "..") : absl::StrCat(lo, "..", hi);
}

bool InRange(int64_t v, int64_t lo, int64_t hi) { return v >= lo && (hi == 0 || v <= hi); }

bool Matches(const Window& w, const StepSpec& spec, PhaseKind kind) {
  const RowShape s = RowShapeOf(spec);
  if (w.op() != spec.op() || w.phase_kind() != kind) return false;
  if (!InRange(s.dim, w.dim_min(), w.dim_max())) return false;
  if (w.heads_form() != HEADS_FORM_ANY && w.heads_form() != s.form()) return false;
  if (w.weight_dtype() != DTYPE_UNSPECIFIED && w.weight_dtype() != spec.weight_dtype()) return false;
  if (w.mode() == MODE_DETERMINISTIC && !spec.deterministic()) return false;
  if (w.mode() == MODE_NONDETERMINISTIC && spec.deterministic()) return false;
  if (w.residual() == RESIDUAL_WITH && !spec.residual()) return false;
  if (w.residual() == RESIDUAL_WITHOUT && spec.residual()) return false;
  if (w.residual() == RESIDUAL_WITH_GRAD_IN && !(spec.residual() && spec.residual_grad_in())) {
    return false;
  }
  return InRange(s.rows(), w.rows_min(), w.rows_max());
}

std::string OpPrefix(Op op) { return op == RMSNORM ? "rmsnorm" : "rmsnorm_silu_gate"; }

}  // namespace

std::string DescribeWindow(const Window& w) {
  return absl::StrCat(Op_Name(w.op()), " ", PhaseKind_Name(w.phase_kind()), " dim ",
                      Range(w.dim_min(), w.dim_max()), " form ", HeadsForm_Name(w.heads_form()),
                      " weight ", DType_Name(w.weight_dtype()), " ", Mode_Name(w.mode()),
                      w.residual() == RESIDUAL_ANY ? "" : absl::StrCat(" ", ResidualForm_Name(w.residual())),
                      " rows ", Range(w.rows_min(), w.rows_max()), " -> ", w.program());
}

absl::Status CheckRoutingTable(const RoutingTable& table) {
  if (table.arch().empty()) return absl::InvalidArgumentError("routing table: arch is empty");
  if (table.version().empty()) return absl::InvalidArgumentError("routing table: version is empty");
  for (int i = 0; i < table.windows_size(); ++i) {
    const Window& w = table.windows(i);
    const std::string where = absl::StrCat("routing table ", table.arch(), " windows[", i, "]");
    const ProgramInfo* p = FindProgram(w.program());
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".program = \"", w.program(), "\": no such program"));
    }
    if (w.phase_kind() != PHASE_KIND_FORWARD && w.phase_kind() != PHASE_KIND_BACKWARD &&
        w.phase_kind() != PHASE_KIND_RECOMPUTE) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".phase_kind: must be set"));
    }
    if (p->op != w.op() || p->stage != StageOf(w.phase_kind())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".program = \"", w.program(),
                                                     "\": is a ", StageName(p->stage),
                                                     " program of ", Op_Name(p->op)));
    }
    if (w.residual() == RESIDUAL_WITH_GRAD_IN && w.phase_kind() != PHASE_KIND_BACKWARD) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".residual = RESIDUAL_WITH_GRAD_IN: a backward form (the forward "
                              "does not read the incoming gradient)"));
    }
    if (w.dim_min() < 0 || (w.dim_max() != 0 && w.dim_max() < w.dim_min())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dim ", Range(w.dim_min(), w.dim_max()), " is empty"));
    }
    if (w.rows_min() < 0 || (w.rows_max() != 0 && w.rows_max() < w.rows_min())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": rows ", Range(w.rows_min(), w.rows_max()), " is empty"));
    }
    if (w.evidence().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".evidence: empty; say what measurement put the edges here, or "
                              "that none has yet"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RoutingTable> ParseRoutingTable(absl::string_view text, absl::string_view source) {
  RoutingTable table;
  CAKE_RETURN_IF_ERROR(ParseTextProto(text, source, &table));
  CAKE_RETURN_IF_ERROR(CheckRoutingTable(table));
  return table;
}

absl::StatusOr<const RoutingTable*> RoutingTableFor(absl::string_view arch) {
  // Parsed on first use and kept for the life of the process.
  static absl::Mutex* const mu = new absl::Mutex;
  static auto* const tables = new std::map<std::string, std::unique_ptr<RoutingTable>, std::less<>>;
  absl::MutexLock lock(mu);
  if (auto it = tables->find(arch); it != tables->end()) return it->second.get();
  for (int i = 0; i < kNumEmbeddedRoutes; ++i) {
    if (arch != kEmbeddedRoutes[i].arch) continue;
    CAKE_ASSIGN_OR_RETURN(
        RoutingTable table,
        ParseRoutingTable(kEmbeddedRoutes[i].text, absl::StrCat(arch, ".textproto")));
    if (table.arch() != arch) {
      return absl::InternalError(absl::StrCat("routing table ", arch, ".textproto says arch \"",
                                              table.arch(), "\""));
    }
    auto owned = std::make_unique<RoutingTable>(std::move(table));
    const RoutingTable* out = owned.get();
    tables->emplace(std::string(arch), std::move(owned));
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat("arch = \"", arch, "\": no routing table"));
}

absl::StatusOr<Route> RouteLaunch(const RoutingTable& table, const StepSpec& spec,
                                  PhaseKind kind) {
  // A recompute tries the recompute windows first, then the forward's.
  std::vector<PhaseKind> kinds = {kind};
  if (kind == PHASE_KIND_RECOMPUTE) kinds.push_back(PHASE_KIND_FORWARD);
  for (PhaseKind k : kinds) {
    for (int i = 0; i < table.windows_size(); ++i) {
      const Window& w = table.windows(i);
      if (!Matches(w, spec, k)) continue;
      const ProgramInfo* p = FindProgram(w.program());
      if (p == nullptr || !CheckSupports(*p, spec).ok()) continue;
      return Route{p, false,
                   absl::StrCat("window ", table.arch(), "/", table.version(), "[", i, "] ",
                                DescribeWindow(w), "; evidence: ", w.evidence())};
    }
  }
  const RowShape s = RowShapeOf(spec);
  std::string id;
  std::string rule;
  if (kind != PHASE_KIND_BACKWARD) {
    const bool warp = s.dim <= kMaxWarpRowDim;
    id = absl::StrCat(OpPrefix(spec.op()), warp ? ".fwd.warp" : ".fwd.cta");
    rule = absl::StrCat("default rule: forward with dim ", s.dim, warp ? " <= " : " > ",
                        kMaxWarpRowDim);
  } else {
    id = absl::StrCat(OpPrefix(spec.op()), spec.deterministic() ? ".bwd.det.partials" : ".bwd.kb");
    rule = absl::StrCat("default rule: ",
                        spec.deterministic() ? "deterministic" : "non-deterministic", " backward");
  }
  const ProgramInfo* p = FindProgram(id);
  if (p == nullptr) return absl::InternalError(absl::StrCat("default program ", id, " missing"));
  CAKE_RETURN_IF_ERROR(CheckSupports(*p, spec));
  return Route{p, true, absl::StrCat(rule, " (no window of ", table.arch(), "/", table.version(),
                                     " covers this shape)")};
}

}  // namespace cake
