// The C API of include/cake/c_api.h over the planner and the graph engine.
#include "cake/c_api.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "cake/step.pb.h"
#include "graphs/step.h"
#include "ops/launch.h"
#include "planner/planner.h"
#include "planner/text_proto.h"

struct cake_plan {
  cake::Plan plan;
};

struct cake_step {
  std::unique_ptr<cake::Step> step;
};

namespace {

thread_local std::string last_error;

cake_status Report(const absl::Status& status) {
  if (status.ok()) {
    last_error.clear();
    return CAKE_OK;
  }
  last_error = std::string(status.message());
  return static_cast<cake_status>(status.code());
}

absl::Status NullArgument(const char* name) {
  return absl::InvalidArgumentError(std::string(name) + " is NULL");
}

cake::Bindings ToBindings(const cake_bindings& c) {
  cake::Bindings b;
  b.x = c.x;
  b.residual = c.residual;
  b.h = c.h;
  b.w = c.w;
  b.y = c.y;
  b.rstd = c.rstd;
  b.z = c.z;
  b.dy = c.dy;
  b.dh_in = c.dh_in;
  b.dx = c.dx;
  b.dz = c.dz;
  b.dw = c.dw;
  b.workspace = c.workspace;
  b.workspace_bytes = c.workspace_bytes;
  return b;
}

}  // namespace

extern "C" {

int cake_api_version(void) { return CAKE_C_API_VERSION; }

const char* cake_last_error(void) { return last_error.c_str(); }

cake_status cake_plan_create(const char* spec_text, cake_plan** plan) {
  if (spec_text == nullptr) return Report(NullArgument("spec_text"));
  if (plan == nullptr) return Report(NullArgument("plan"));
  cake::StepSpec spec;
  if (absl::Status s = cake::ParseTextProto(spec_text, "spec_text", &spec); !s.ok()) {
    return Report(s);
  }
  absl::StatusOr<cake::TargetDevice> target = cake::TargetDevice::Current();
  if (!target.ok()) return Report(target.status());
  absl::StatusOr<cake::Plan> made = cake::MakePlan(spec, *target);
  if (!made.ok()) return Report(made.status());
  *plan = new cake_plan{*std::move(made)};
  return Report(absl::OkStatus());
}

void cake_plan_destroy(cake_plan* plan) { delete plan; }

int64_t cake_plan_workspace_bytes(const cake_plan* plan) {
  return plan == nullptr ? 0 : plan->plan.workspace_bytes();
}

const char* cake_plan_fingerprint(const cake_plan* plan) {
  return plan == nullptr ? "" : plan->plan.fingerprint().c_str();
}

cake_status cake_launch(const cake_plan* plan, const cake_bindings* bindings, void* stream) {
  if (plan == nullptr) return Report(NullArgument("plan"));
  if (bindings == nullptr) return Report(NullArgument("bindings"));
  return Report(cake::LaunchEager(plan->plan, ToBindings(*bindings),
                                  static_cast<cudaStream_t>(stream)));
}

cake_status cake_step_create(const cake_plan* plan, const cake_bindings* bindings,
                             cake_step** step) {
  if (plan == nullptr) return Report(NullArgument("plan"));
  if (bindings == nullptr) return Report(NullArgument("bindings"));
  if (step == nullptr) return Report(NullArgument("step"));
  absl::StatusOr<std::unique_ptr<cake::Step>> built =
      cake::Step::Build(plan->plan, ToBindings(*bindings));
  if (!built.ok()) return Report(built.status());
  *step = new cake_step{*std::move(built)};
  return Report(absl::OkStatus());
}

void cake_step_destroy(cake_step* step) { delete step; }

cake_status cake_step_replay(cake_step* step, void* stream) {
  if (step == nullptr) return Report(NullArgument("step"));
  return Report(step->step->Replay(static_cast<cudaStream_t>(stream)));
}

cake_status cake_step_rebind(cake_step* step, const cake_bindings* bindings) {
  if (step == nullptr) return Report(NullArgument("step"));
  if (bindings == nullptr) return Report(NullArgument("bindings"));
  return Report(step->step->Rebind(ToBindings(*bindings)));
}

}  // extern "C"
