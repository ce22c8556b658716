// Plans and specs to and from bytes and files.
#ifndef CAKE_PLANNER_PLAN_IO_H_
#define CAKE_PLANNER_PLAN_IO_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cake/plan.pb.h"
#include "cake/step.pb.h"
#include "ops/target.h"

namespace cake {

enum class Encoding { kBinary, kText };

// ".binpb" and ".pb" are binary, ".textproto", ".txtpb" and ".pbtxt" text;
// anything else is an InvalidArgumentError naming the path.
absl::StatusOr<Encoding> EncodingOfPath(absl::string_view path);

absl::StatusOr<std::string> SerializePlan(const Plan& plan, Encoding encoding);

// Parses a plan and checks that it can run on `target`:
//   format_version other than kPlanFormatVersion -> FailedPreconditionError;
//   arch other than target.arch                  -> FailedPreconditionError;
//   a program id the registry does not have      -> InvalidArgumentError;
//   a spec that does not validate, dependencies that do not point back, or a
//   fingerprint that does not match the plan's inputs -> InvalidArgumentError.
absl::StatusOr<Plan> LoadPlan(absl::string_view bytes, Encoding encoding,
                              const TargetDevice& target);
absl::Status CheckPlan(const Plan& plan, const TargetDevice& target);

absl::StatusOr<Plan> LoadPlanFile(const std::string& path, const TargetDevice& target);
absl::Status SavePlanFile(const Plan& plan, const std::string& path);

absl::StatusOr<StepSpec> ParseSpecText(absl::string_view text, absl::string_view source);
absl::StatusOr<StepSpec> LoadSpecFile(const std::string& path);

}  // namespace cake

#endif  // CAKE_PLANNER_PLAN_IO_H_
