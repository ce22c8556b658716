// The `cake` command-line tool: validate specs, make, save and explain plans,
// list programs and routing tables.
//
// Exit codes: 0 success; 2 bad input (the Status message goes to stderr);
// 1 internal error.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ops/registry.h"
#include "ops/target.h"
#include "planner/explain.h"
#include "planner/plan_io.h"
#include "planner/planner.h"
#include "planner/routing.h"
#include "planner/text_proto.h"
#include "planner/validate.h"
#include "graphs/step.h"
#include "tools/bench_command.h"
#include "tools/flags.h"
#include "tools/run_command.h"

namespace cake {
namespace {

constexpr char kDefaultArch[] = "sm_90a";

struct Command {
  const char* usage;
  const char* help;
  int (*run)(const std::vector<std::string>& positional, const std::map<std::string, std::string>& flags);
  std::vector<std::string> flags;  // the --flags it takes (each with a value)
  int positional;                  // how many positional arguments (-1: any)
};

int ExitCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk: return 0;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange: return 2;
    default: return 1;
  }
}

int Fail(const absl::Status& s) {
  std::cerr << "cake: " << s.message() << "\n";
  return ExitCode(s);
}

// A file holding a Plan (binary, or text with a format_version) or a StepSpec.
// A plan is checked against `arch_flag` (default: its own arch); a spec is
// planned for `spec_target`, else for the nominal device of `arch_flag`
// (default sm_90a).
absl::StatusOr<Plan> PlanOrSpecFile(const std::string& path, const std::string& arch_flag,
                                    const TargetDevice* spec_target = nullptr) {
  absl::StatusOr<Encoding> encoding = EncodingOfPath(path);
  if (!encoding.ok()) return encoding.status();
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  // The file is parsed once: as a Plan when binary or when its text has a
  // format_version, otherwise as a StepSpec.
  Plan plan;
  const bool is_plan = *encoding == Encoding::kBinary
                           ? plan.ParseFromString(*bytes)
                           : ParseTextProto(*bytes, path, &plan).ok() && plan.format_version() != 0;
  if (*encoding == Encoding::kBinary && !is_plan) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a binary Plan proto"));
  }
  if (is_plan) {
    absl::StatusOr<TargetDevice> target =
        TargetDevice::ForArch(arch_flag.empty() ? plan.arch() : arch_flag);
    if (!target.ok()) return target.status();
    if (absl::Status s = CheckPlan(plan, *target); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
    }
    return plan;
  }
  absl::StatusOr<StepSpec> spec = ParseSpecText(*bytes, path);
  if (!spec.ok()) return spec.status();
  if (spec_target != nullptr) return MakePlan(*spec, *spec_target);
  absl::StatusOr<TargetDevice> target =
      TargetDevice::ForArch(arch_flag.empty() ? kDefaultArch : arch_flag);
  if (!target.ok()) return target.status();
  return MakePlan(*spec, *target);
}

// A spec is planned for the current device (its SM count sizes the grids); a
// saved plan must be for its arch. Without a device: the nominal sm_90a.
absl::StatusOr<Plan> PlanForRun(const std::string& path) {
  absl::StatusOr<TargetDevice> device = TargetDevice::Current();
  if (!device.ok()) return PlanOrSpecFile(path, "");
  return PlanOrSpecFile(path, device->arch, &*device);
}

int RunValidate(const std::vector<std::string>& args, const std::map<std::string, std::string>&) {
  absl::StatusOr<StepSpec> spec = LoadSpecFile(args[0]);
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<StepSpec> canonical = Canonicalize(*spec);
  if (!canonical.ok()) return Fail(absl::Status(canonical.status().code(),
                                                absl::StrCat(args[0], ": ", canonical.status().message())));
  std::cout << args[0] << ": valid: " << DescribeSpec(*canonical) << "\n";
  return 0;
}

int RunPlan(const std::vector<std::string>& args, const std::map<std::string, std::string>& flags) {
  absl::StatusOr<StepSpec> spec = LoadSpecFile(args[0]);
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<TargetDevice> target = TargetDevice::ForArch(FlagOr(flags, "arch", kDefaultArch));
  if (!target.ok()) return Fail(target.status());
  absl::StatusOr<Plan> plan = MakePlan(*spec, *target);
  if (!plan.ok()) return Fail(plan.status());
  const std::string out = FlagOr(flags, "out", "");
  if (out.empty()) {
    absl::StatusOr<std::string> text = SerializePlan(*plan, Encoding::kText);
    if (!text.ok()) return Fail(text.status());
    std::cout << *text;
    return 0;
  }
  if (absl::Status s = SavePlanFile(*plan, out); !s.ok()) return Fail(s);
  std::cout << "wrote " << out << " (plan " << plan->fingerprint() << ", "
            << plan->launches_size() << " launches, workspace " << plan->workspace_bytes()
            << " bytes)\n";
  return 0;
}

int RunExplain(const std::vector<std::string>& args,
               const std::map<std::string, std::string>& flags) {
  absl::StatusOr<Plan> plan = PlanOrSpecFile(args[0], FlagOr(flags, "arch", ""));
  if (!plan.ok()) return Fail(plan.status());
  std::cout << Explain(*plan);
  return 0;
}

int RunRun(const std::vector<std::string>& args, const std::map<std::string, std::string>& flags) {
  const int replays = std::atoi(FlagOr(flags, "replays", "1").c_str());
  const long long seed = std::atoll(FlagOr(flags, "seed", "1").c_str());
  if (replays < 1) return Fail(absl::InvalidArgumentError("--replays: must be >= 1"));
  absl::StatusOr<Plan> plan = PlanForRun(args[0]);
  if (!plan.ok()) return Fail(plan.status());
  return RunOnDevice(*plan, replays, static_cast<uint64_t>(seed));
}

int RunGraph(const std::vector<std::string>& args, const std::map<std::string, std::string>& flags) {
  const std::string dot = FlagOr(flags, "dot", "");
  if (dot.empty()) return Fail(absl::InvalidArgumentError("--dot FILE: required"));
  absl::StatusOr<Plan> plan = PlanOrSpecFile(args[0], FlagOr(flags, "arch", ""));
  if (!plan.ok()) return Fail(plan.status());
  if (absl::Status s = WriteFile(dot, PlanDot(*plan)); !s.ok()) return Fail(s);
  std::cout << "wrote " << dot << " (" << plan->launches_size() << " launches, plan "
            << plan->fingerprint() << ")\n";
  return 0;
}

int RunPrograms(const std::vector<std::string>&, const std::map<std::string, std::string>&) {
  std::cout << absl::StrFormat("%-36s %-18s %-8s %-10s %-10s %-5s %-8s %s\n", "program", "op",
                               "stage", "modes", "dim", "heads", "residual", "what");
  for (const ProgramInfo& p : Programs()) {
    const char* modes = p.deterministic ? "both" : "nondet";
    std::cout << absl::StrFormat("%-36s %-18s %-8s %-10s %-10s %-5s %-8s %s\n", p.id,
                                 p.op == OP_UNSPECIFIED ? "any" : Op_Name(p.op), StageName(p.stage),
                                 modes, absl::StrCat(p.dim_min, "..", p.dim_max),
                                 p.heads ? "yes" : "no", p.residual ? "yes" : "no", p.summary);
  }
  return 0;
}

int RunRoutes(const std::vector<std::string>&, const std::map<std::string, std::string>& flags) {
  absl::StatusOr<const RoutingTable*> table = RoutingTableFor(FlagOr(flags, "arch", kDefaultArch));
  if (!table.ok()) return Fail(table.status());
  std::cout << "routing table " << (*table)->arch() << " version " << (*table)->version() << ", "
            << (*table)->windows_size() << " windows (first match wins)\n";
  for (int i = 0; i < (*table)->windows_size(); ++i) {
    const Window& w = (*table)->windows(i);
    std::cout << "  [" << i << "] " << DescribeWindow(w) << "\n      evidence: " << w.evidence()
              << "\n";
  }
  return 0;
}

const std::map<std::string, Command>& Commands() {
  static const auto* commands = new std::map<std::string, Command>{
      {"validate",
       {"cake validate SPEC", "Checks a text-format StepSpec and prints it with its defaults.",
        RunValidate, {}, 1}},
      {"plan",
       {"cake plan SPEC [--arch sm_90a] [--out FILE]",
        "Plans a StepSpec for an arch (default sm_90a). Prints the plan as text, or writes it to\n"
        "FILE: binary for .binpb/.pb, text for .textproto/.txtpb/.pbtxt.",
        RunPlan, {"arch", "out"}, 1}},
      {"explain",
       {"cake explain PLAN_OR_SPEC [--arch ARCH]",
        "Explains a saved plan (checked against ARCH, default: the plan's own) or plans a spec\n"
        "(for ARCH, default sm_90a) and explains that: launches, reasons, workspace.",
        RunExplain, {"arch"}, 1}},
      {"programs", {"cake programs", "Lists every registered program.", RunPrograms, {}, 0}},
      {"run",
       {"cake run SPEC_OR_PLAN [--replays N] [--seed S]",
        "Plans the spec for this GPU (or loads the plan), fills the inputs from seed S\n"
        "(default 1), builds the step's CUDA graph, replays it N times (default 1) and prints\n"
        "each output's worst error against the FP64 reference as a multiple of its budget.\n"
        "Exit 0: within budget; 1: outside it or a CUDA error; 3: no CUDA device (the plan is\n"
        "printed instead).",
        RunRun, {"replays", "seed"}, 1}},
      {"graph",
       {"cake graph SPEC_OR_PLAN --dot FILE [--arch ARCH]",
        "Writes the step's graph as DOT: a node per launch (program id, phase, plan\n"
        "fingerprint), edges from the plan's dependencies. Needs no GPU.",
        RunGraph, {"dot", "arch"}, 1}},
      {"bench", {kBenchUsage, kBenchHelp, RunBenchCommand, kBenchFlags, -1}},
      {"routes",
       {"cake routes [--arch sm_90a]", "Prints an arch's routing table with its evidence.",
        RunRoutes, {"arch"}, 0}},
  };
  return *commands;
}

int Usage(std::FILE* to) {
  std::fprintf(to, "usage: cake COMMAND [ARGS] (cake COMMAND --help for more)\ncommands:\n");
  for (const auto& [name, c] : Commands()) std::fprintf(to, "  %s\n", c.usage);
  std::fprintf(to, "exit codes: 0 success, 2 bad input, 1 internal error\n");
  return to == stdout ? 0 : 2;
}

int Main(int argc, char** argv) {
  if (argc < 2) return Usage(stderr);
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") return Usage(stdout);
  auto it = Commands().find(name);
  if (it == Commands().end()) {
    std::fprintf(stderr, "cake: unknown command \"%s\"\n", name.c_str());
    return Usage(stderr);
  }
  const Command& c = it->second;
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s\n%s\n", c.usage, c.help);
      return 0;
    }
    if (a.rfind("--", 0) == 0) {
      std::string key = a.substr(2), value;
      if (const size_t eq = key.find('='); eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        std::fprintf(stderr, "cake %s: --%s needs a value\nusage: %s\n", name.c_str(), key.c_str(), c.usage);
        return 2;
      }
      if (std::find(c.flags.begin(), c.flags.end(), key) == c.flags.end()) {
        std::fprintf(stderr, "cake %s: unknown flag --%s\nusage: %s\n", name.c_str(), key.c_str(), c.usage);
        return 2;
      }
      flags[key] = value;
      continue;
    }
    positional.push_back(a);
  }
  if (c.positional >= 0 && static_cast<int>(positional.size()) != c.positional) {
    std::fprintf(stderr, "cake %s: expected %d argument(s), got %zu\nusage: %s\n", name.c_str(),
                 c.positional, positional.size(), c.usage);
    return 2;
  }
  return c.run(positional, flags);
}

}  // namespace
}  // namespace cake

int main(int argc, char** argv) { return cake::Main(argc, argv); }
