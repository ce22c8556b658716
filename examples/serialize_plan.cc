// serialize_plan: plan once, save, load in a fresh process state, replay.
//
// Saves the plan as binary and text, loads both back (the loader checks the
// format version, the arch against this GPU and every program id), checks
// that the fingerprints match, then builds and replays the loaded plan.
//
//   build/bin/serialize_plan [SPEC] [DIR]   (DIR default: /tmp)
#include <cstdio>
#include <string>

#include "examples/example_util.h"
#include "graphs/step.h"

int main(int argc, char** argv) {
  using namespace cake;
  const char* kName = "serialize_plan";
  if (int rc = examples::NeedDevice(kName)) return rc;
  absl::StatusOr<Plan> plan = examples::PlanFromArgs(argc, argv);
  if (!plan.ok()) return examples::Fail(kName, plan.status());
  const std::string dir = argc > 2 ? argv[2] : "/tmp";
  absl::StatusOr<TargetDevice> device = TargetDevice::Current();
  if (!device.ok()) return examples::Fail(kName, device.status());

  Plan loaded;
  for (const char* name : {"cake_plan.binpb", "cake_plan.textproto"}) {
    const std::string path = dir + "/" + name;
    if (absl::Status s = SavePlanFile(*plan, path); !s.ok()) return examples::Fail(kName, s);
    absl::StatusOr<Plan> back = LoadPlanFile(path, *device);
    if (!back.ok()) return examples::Fail(kName, back.status());
    std::printf("%s: saved and loaded, fingerprint %s %s\n", path.c_str(),
                back->fingerprint().c_str(),
                back->fingerprint() == plan->fingerprint() ? "(same)" : "(DIFFERENT)");
    if (back->fingerprint() != plan->fingerprint()) return 1;
    loaded = *back;
  }

  absl::StatusOr<std::unique_ptr<testing::StepBuffers>> buf = testing::StepBuffers::Create(loaded);
  if (!buf.ok()) return examples::Fail(kName, buf.status());
  (*buf)->Fill(/*seed=*/3);
  absl::StatusOr<std::unique_ptr<Step>> step = Step::Build(loaded, (*buf)->b);
  if (!step.ok()) return examples::Fail(kName, step.status());
  if (absl::Status s = (*step)->Replay(nullptr); !s.ok()) return examples::Fail(kName, s);
  cudaDeviceSynchronize();
  return examples::Report(kName, loaded.spec(), **buf);
}
