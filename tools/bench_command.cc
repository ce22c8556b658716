#include "tools/bench_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "bench/runner.h"
#include "bench/suite.h"
#include "ops/registry.h"
#include "ops/status.h"
#include "ops/target.h"
#include "planner/plan_io.h"
#include "planner/planner.h"
#include "planner/validate.h"
#include "tests/testing/reference.h"
#include "tools/flags.h"

namespace cake {

const char kBenchUsage[] =
    "cake bench [SPEC...] [--ops fwd,bwd,ckpt,ckpt.cast] [--filter TEXT] [--part K/N]\n"
    "           [--mode det|nondet] [--rounds R] [--replays N] [--warmup W]\n"
    "           [--timer cupti|events] [--flush memset|kernel] [--json FILE] [--cases-out FILE]\n"
    "           [--program ID[,ID...] | all]";
const char kBenchHelp[] =
    "Times Cake's graphs as BENCH.md says: for each shape and op, the plan's Step and an\n"
    "independent A/A copy on their own buffers, L2 flushed before every replay, CUPTI spans\n"
    "(CUDA events where CUPTI cannot be loaded; the output says so), R rounds (default 5) of N\n"
    "replays (default 10) each after W warm-up replays (default 3), the order rotating from round\n"
    "to round; the kernel set of every replay checked; outputs checked against FP64 once; the\n"
    "run's device-to-device copy bandwidth as the speed of light.\n"
    "Without SPEC files: the default suite of BENCH.md. A SPEC file is one shape (its layout,\n"
    "op, weight and residual; its phases are replaced by each op's). --ops picks the ops\n"
    "(default all four; ckpt.cast only where dw in the weight dtype differs from FP32),\n"
    "--filter keeps cases whose 'shape op' contains TEXT (A|B: either), --part K/N runs the\n"
    "K-th of N equal slices of the cases (to keep each run short). --mode: the backward mode\n"
    "(default det).\n"
    "Prints a table and, with --json, writes the report (bench.proto, JSON).\n"
    "--flush: how L2 is flushed before each replay, cudaMemsetAsync (default) or a fill\n"
    "kernel of plain 16-byte stores (as PyTorch's fill_, which bench/peers.py uses), after a\n"
    "scrub that evicts the lines a plain write leaves (those kept with the evict-last policy).\n"
    "--program ID (a forward or backward) runs that program in place of the routed one of\n"
    "its stage, with the launches its dw form needs (dw.reduce, or a zeroed accumulator and\n"
    "dw.finish), on the cases whose spec it takes (the others are left out): candidates for\n"
    "the routing table side by side. A list (ID,ID,...; `routed` for the routed programs)\n"
    "times each case once per entry, in the same rounds; `all` is `routed` and every forward\n"
    "and backward program. recompute:ID (a forward) runs ID in the recompute alone, the\n"
    "forward routed (checkpointed ops only): a candidate for a recompute window.\n"
    "Where a case ran routed and forced, a second table gives the\n"
    "routed time, the fastest entry and their ratio, marked above 1.02 and above both rows'\n"
    "A/A floors.\n"
    "--cases-out FILE writes the selected cases (shape, op, spec) as a report without timings\n"
    "and runs nothing: bench/peers.py takes its cases from there. Needs no GPU.";
const std::vector<std::string> kBenchFlags = {"ops",    "filter",  "part",   "mode",
                                              "rounds", "replays", "warmup", "timer",
                                              "json",   "cases-out", "program", "flush"};

namespace {

int Bad(const std::string& message) {
  std::fprintf(stderr, "cake bench: %s\n", message.c_str());
  return 2;
}

bool PositiveInt(const std::string& text, int* out) {
  return absl::SimpleAtoi(text, out) && *out >= 1;
}

// A bar on a terminal; one line per case otherwise (logs stay readable).
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {}
  void Update(int done, int total, const bench::BenchCase& c) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = done > 0 ? elapsed / done * (total - done) : 0;
    const std::string what = absl::StrCat(c.shape, " ", c.op);
    if (!tty_) {
      std::fprintf(stderr, "[%d/%d] %s (%.0f s, about %.0f s left)\n", done, total, what.c_str(),
                   elapsed, left);
      return;
    }
    constexpr int kWidth = 30;
    const int filled = total > 0 ? done * kWidth / total : kWidth;
    std::fprintf(stderr, "\r[%s%s] %d/%d %-40s %3.0f s left ", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), done, total, what.c_str(), left);
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

// The programs --program names, "" for the routed ones: one entry (the
// routed programs, or one forced; recompute:ID a forward in the recompute
// alone) or a list of them, `all` being the routed ones and every forward and
// backward program. InvalidArgument naming an entry that is no such program
// or no forward or backward (a forward after recompute:), or repeated.
absl::StatusOr<std::vector<std::string>> ProgramsToTime(const std::string& flag) {
  if (flag.empty()) return std::vector<std::string>{""};
  std::vector<std::string> ids;
  for (absl::string_view entry : absl::StrSplit(flag, ',')) {
    if (entry == "all") {
      ids.push_back("routed");
      for (const ProgramInfo& p : Programs()) {
        if (p.stage == Stage::kForward || p.stage == Stage::kBackward) ids.emplace_back(p.id);
      }
    } else {
      ids.emplace_back(entry);
    }
  }
  std::vector<std::string> out;
  for (const std::string& id : ids) {
    const std::string program = id == "routed" ? "" : id;
    if (!program.empty()) CAKE_RETURN_IF_ERROR(bench::ForcedProgram(program).status());
    if (std::find(out.begin(), out.end(), program) != out.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--program \"", flag, "\": \"", id, "\" named twice"));
    }
    out.push_back(program);
  }
  return out;
}

}  // namespace

int RunBenchCommand(const std::vector<std::string>& spec_files,
                    const std::map<std::string, std::string>& flags) {
  bench::BenchOptions options;
  if (!PositiveInt(FlagOr(flags, "rounds", "5"), &options.rounds)) {
    return Bad("--rounds: expected an integer >= 1");
  }
  if (!PositiveInt(FlagOr(flags, "replays", "10"), &options.replays_per_round)) {
    return Bad("--replays: expected an integer >= 1");
  }
  if (!absl::SimpleAtoi(FlagOr(flags, "warmup", "3"), &options.warmup) || options.warmup < 0) {
    return Bad("--warmup: expected an integer >= 0");
  }
  const std::string timer = FlagOr(flags, "timer", "cupti");
  if (timer != "cupti" && timer != "events") {
    return Bad(absl::StrCat("--timer \"", timer, "\": expected cupti or events"));
  }
  options.force_events = timer == "events";
  const std::string flush = FlagOr(flags, "flush", "memset");
  if (flush != "memset" && flush != "kernel") {
    return Bad(absl::StrCat("--flush \"", flush, "\": expected memset or kernel"));
  }
  options.flush = flush == "kernel" ? bench::FlushMethod::kKernel : bench::FlushMethod::kMemset;
  const std::string mode = FlagOr(flags, "mode", "det");
  if (mode != "det" && mode != "nondet") {
    return Bad(absl::StrCat("--mode \"", mode, "\": expected det or nondet"));
  }
  int part = 1, parts = 1;
  if (flags.count("part")) {
    std::vector<std::string> kn = absl::StrSplit(flags.at("part"), '/');
    if (kn.size() != 2 || !PositiveInt(kn[0], &part) || !PositiveInt(kn[1], &parts) ||
        part > parts) {
      return Bad(absl::StrCat("--part \"", flags.at("part"), "\": expected K/N with 1 <= K <= N"));
    }
  }
  // Output paths are checked before minutes of timing, not after.
  for (const char* flag : {"json", "cases-out"}) {
    if (!flags.count(flag)) continue;
    const std::filesystem::path dir = std::filesystem::path(flags.at(flag)).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir)) {
      return Bad(absl::StrCat("--", flag, " ", flags.at(flag), ": no directory ", dir.string()));
    }
  }
  std::vector<std::string> wanted_ops;
  if (flags.count("ops")) wanted_ops = absl::StrSplit(flags.at("ops"), ',');

  std::vector<bench::SuiteShape> shapes;
  if (spec_files.empty()) {
    shapes = bench::DefaultSuite();
  } else {
    for (const std::string& path : spec_files) {
      absl::StatusOr<StepSpec> spec = LoadSpecFile(path);
      if (!spec.ok()) return Bad(std::string(spec.status().message()));
      if (absl::Status s = Canonicalize(*spec).status(); !s.ok()) {
        return Bad(absl::StrCat(path, ": ", s.message()));
      }
      shapes.push_back({spec->name().empty() ? path : spec->name(), *spec});
    }
  }
  // The device whose routing --program is checked against (the arch's
  // nominal device: routing does not depend on the SM count).
  const absl::StatusOr<TargetDevice> nominal = TargetDevice::ForArch(KnownArches().front());
  if (!nominal.ok()) return Bad(std::string(nominal.status().message()));
  const absl::StatusOr<std::vector<std::string>> programs =
      ProgramsToTime(FlagOr(flags, "program", ""));
  if (!programs.ok()) return Bad(std::string(programs.status().message()));
  std::vector<bench::BenchCase> cases;
  for (const bench::SuiteShape& shape : shapes) {
    std::vector<std::string> ops = bench::OpsOf(shape);
    if (!wanted_ops.empty()) {
      std::vector<std::string> kept;
      for (const std::string& op : wanted_ops) {
        if (op != "fwd" && op != "bwd" && op != "ckpt" && op != "ckpt.cast") {
          return Bad(absl::StrCat("--ops: \"", op, "\": expected fwd, bwd, ckpt or ckpt.cast"));
        }
        if (std::find(ops.begin(), ops.end(), op) != ops.end()) kept.push_back(op);
      }
      ops = kept;
    }
    for (const std::string& op : ops) {
      absl::StatusOr<StepSpec> spec = bench::SpecFor(shape, op, mode == "det");
      if (!spec.ok()) return Bad(std::string(spec.status().message()));
      if (flags.count("filter")) {
        const std::string name = absl::StrCat(shape.shape, " ", op);
        bool keep = false;
        for (absl::string_view any : absl::StrSplit(flags.at("filter"), '|')) {
          keep = keep || absl::StrContains(name, any);
        }
        if (!keep) continue;
      }
      for (const std::string& program : *programs) {
        const bench::BenchCase c{shape.shape, op, *spec, program};
        if (!c.program.empty()) {
          const ProgramInfo* forced = *bench::ForcedProgram(c.program);
          // Left out: the cases where it cannot run (a phase of another
          // stage only; PlanCase refuses a spec it does not take, and a
          // recompute-only program on a spec without a recompute).
          const bool stage_runs = forced->stage == Stage::kForward ? op != "bwd" : op != "fwd";
          if (!stage_runs || !bench::PlanCase(c, *nominal).ok()) continue;
        }
        cases.push_back(c);
      }
    }
  }
  // Part K of N: a contiguous slice, so the parts together are the whole list.
  const size_t begin = cases.size() * (part - 1) / parts, end = cases.size() * part / parts;
  cases = std::vector<bench::BenchCase>(cases.begin() + begin, cases.begin() + end);
  if (cases.empty()) return Bad("no case to run (check --ops, --filter and --part)");
  if (flags.count("cases-out")) {
    BenchReport listing;
    listing.set_tool("cake bench --cases-out");
    listing.set_deterministic(mode == "det");
    for (const bench::BenchCase& c : cases) {
      BenchRow* row = listing.add_rows();
      row->set_shape(c.shape);
      row->set_op(bench::RowOp(c));
      *row->mutable_spec() = c.spec;
      row->set_bytes(bench::BytesMoved(c.spec));
    }
    if (absl::Status s = bench::WriteReportJson(listing, flags.at("cases-out")); !s.ok()) {
      return Bad(std::string(s.message()));
    }
    std::printf("wrote %zu case(s) to %s\n", cases.size(), flags.at("cases-out").c_str());
    return 0;
  }
  if (!testing::HasCudaDevice()) {
    std::fprintf(stderr, "cake bench: no CUDA device; %zu case(s) not run\n", cases.size());
    return 3;
  }
  std::fprintf(stderr, "cake bench: %zu case(s)%s\n", cases.size(),
               parts > 1 ? absl::StrFormat(" (part %d of %d)", part, parts).c_str() : "");
  ProgressBar bar;
  absl::StatusOr<BenchReport> report = bench::RunBench(
      cases, options, [&](int done, int total, const bench::BenchCase& c) { bar.Update(done, total, c); });
  if (!report.ok()) {
    std::fprintf(stderr, "cake bench: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  if (parts > 1) report->add_deviations(absl::StrFormat("part %d of %d of the cases", part, parts));
  std::printf("%s", bench::FormatTable(*report).c_str());
  if (const std::string candidates = bench::FormatCandidates(*report); !candidates.empty()) {
    std::printf("\n%s", candidates.c_str());
  }
  if (flags.count("json")) {
    if (absl::Status s = bench::WriteReportJson(*report, flags.at("json")); !s.ok()) {
      std::fprintf(stderr, "cake bench: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("wrote %s\n", flags.at("json").c_str());
  }
  return 0;
}

}  // namespace cake
