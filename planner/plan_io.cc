#include "planner/plan_io.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "ops/registry.h"
#include "ops/status.h"
#include "planner/planner.h"
#include "planner/text_proto.h"
#include "planner/validate.h"

namespace cake {

absl::StatusOr<Encoding> EncodingOfPath(absl::string_view path) {
  for (const char* ext : {".binpb", ".pb"}) {
    if (absl::EndsWith(path, ext)) return Encoding::kBinary;
  }
  for (const char* ext : {".textproto", ".txtpb", ".pbtxt"}) {
    if (absl::EndsWith(path, ext)) return Encoding::kText;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "path \"", path, "\": expected a .binpb/.pb (binary) or .textproto/.txtpb/.pbtxt (text) file"));
}

absl::StatusOr<std::string> SerializePlan(const Plan& plan, Encoding encoding) {
  std::string out;
  const bool ok = encoding == Encoding::kBinary
                      ? plan.SerializeToString(&out)
                      : google::protobuf::TextFormat::PrintToString(plan, &out);
  if (!ok) return absl::InternalError("plan serialization failed");
  return out;
}

absl::Status CheckPlan(const Plan& plan, const TargetDevice& target) {
  if (plan.format_version() != kPlanFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("plan format_version = ", plan.format_version(), ": this build reads ",
                     kPlanFormatVersion, "; plan the spec again"));
  }
  if (plan.arch() != target.arch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plan arch = \"", plan.arch(), "\": the target device is ", target.arch));
  }
  for (const Launch& l : plan.launches()) {
    if (l.kind() == KERNEL && FindProgram(l.program()) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("plan launches[", l.index(), "].program = \"",
                                                     l.program(), "\": no such program"));
    }
    if (l.kind() != KERNEL && l.kind() != MEMSET) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan launches[", l.index(), "].kind = ", l.kind(), ": unknown"));
    }
    for (int d : l.depends_on()) {
      if (d < 0 || d >= l.index()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan launches[", l.index(), "].depends_on = ", d, ": must name an earlier launch"));
      }
    }
  }
  for (int i = 0; i < plan.launches_size(); ++i) {
    if (plan.launches(i).index() != i) {
      return absl::InvalidArgumentError(absl::StrCat("plan launches[", i, "].index = ",
                                                     plan.launches(i).index(), ": expected ", i));
    }
  }
  CAKE_RETURN_IF_ERROR(Validate(plan.spec()));
  const std::string expected =
      Fingerprint(plan.spec(), TargetDevice{plan.arch(), plan.sm_count(), 0},
                  plan.routing_table_version());
  if (plan.fingerprint() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan fingerprint = \"", plan.fingerprint(),
                     "\": does not match its spec, arch and table version (", expected, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> LoadPlan(absl::string_view bytes, Encoding encoding,
                              const TargetDevice& target) {
  Plan plan;
  if (encoding == Encoding::kBinary) {
    if (!plan.ParseFromString(std::string(bytes))) {
      return absl::InvalidArgumentError("plan: not a binary Plan proto");
    }
  } else {
    CAKE_RETURN_IF_ERROR(ParseTextProto(bytes, "plan", &plan));
  }
  CAKE_RETURN_IF_ERROR(CheckPlan(plan, target));
  return plan;
}

absl::StatusOr<Plan> LoadPlanFile(const std::string& path, const TargetDevice& target) {
  CAKE_ASSIGN_OR_RETURN(Encoding encoding, EncodingOfPath(path));
  CAKE_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  absl::StatusOr<Plan> plan = LoadPlan(bytes, encoding, target);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(), absl::StrCat(path, ": ", plan.status().message()));
  }
  return plan;
}

absl::Status SavePlanFile(const Plan& plan, const std::string& path) {
  CAKE_ASSIGN_OR_RETURN(Encoding encoding, EncodingOfPath(path));
  CAKE_ASSIGN_OR_RETURN(std::string bytes, SerializePlan(plan, encoding));
  return WriteFile(path, bytes);
}

absl::StatusOr<StepSpec> ParseSpecText(absl::string_view text, absl::string_view source) {
  StepSpec spec;
  CAKE_RETURN_IF_ERROR(ParseTextProto(text, source, &spec));
  return spec;
}

absl::StatusOr<StepSpec> LoadSpecFile(const std::string& path) {
  CAKE_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseSpecText(text, path);
}

}  // namespace cake
