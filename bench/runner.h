// `cake bench`'s engine (BENCH.md): each case's Step and an independent A/A
// copy, graph replays with cold L2 timed by CUPTI activity spans (CUDA
// events where CUPTI is unavailable), interleaved rounds with rotating
// order, the kernel-set check, the accuracy check against FP64 and the same
// run's copy bandwidth; the report as a table and as JSON (bench.proto).
#ifndef CAKE_BENCH_RUNNER_H_
#define CAKE_BENCH_RUNNER_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/cupti_spans.h"
#include "bench/timing.h"
#include "cake/bench.pb.h"
#include "cake/step.pb.h"
#include "ops/launch.h"
#include "ops/registry.h"
#include "ops/target.h"

namespace cake::bench {

struct BenchCase {
  std::string shape;  // as in the table
  std::string op;     // fwd, bwd, ckpt, ckpt.cast
  StepSpec spec;
  // When set: this program runs in place of the routed one of its stage
  // (to compare candidates for the routing table); "recompute:ID", the
  // forward program ID in the recompute alone.
  std::string program;
};

// A case's op as its report row names it: "bwd", or "bwd @rmsnorm.bwd.split"
// with a program forced.
std::string RowOp(const BenchCase& c);

struct BenchOptions {
  int warmup = 3;
  int rounds = 5;
  int replays_per_round = 10;
  bool force_events = false;             // time with CUDA events even where CUPTI works
  FlushMethod flush = FlushMethod::kMemset;
  int64_t copy_bytes = int64_t{4} << 30;  // the speed-of-light copy
  uint64_t seed = 1;
};

// The program `id` names, if `--program` may force it: a forward or a
// backward, or with the prefix "recompute:" a forward (InvalidArgument naming
// the id otherwise).
absl::StatusOr<const ProgramInfo*> ForcedProgram(const std::string& id);

// Whether `id` forces the recompute alone ("recompute:ID").
bool ForcesRecomputeOnly(absl::string_view id);

// The plan a case times: the routed one, or with BenchCase::program planned
// through the arch's routing table with a window for it ahead of the rest (a
// forward program in forward and recompute, or in the recompute alone),
// so that the planner adds what it needs (dw.reduce after partials; the
// zeroed accumulator and dw.finish after kb). InvalidArgument when there is
// no such program, it is no forward or backward, or it does not take the
// spec (op, dims, layout, a non-deterministic program for a det spec), or
// the recompute alone is forced on a spec without a recompute.
absl::StatusOr<Plan> PlanCase(const BenchCase& c, const TargetDevice& device);

// Runs before a backward-only spec: the forward on the same buffers, so the
// backward reads a real rstd (and h).
absl::Status PrepareBackwardInputs(const StepSpec& spec, const TargetDevice& device,
                                   const Bindings& bindings);

// Called after each case: cases done, total, the case just done.
using ProgressFn = std::function<void(int done, int total, const BenchCase& c)>;

// Runs every case; a case that fails to plan or run ends the run with its
// error, naming the case.
absl::StatusOr<BenchReport> RunBench(const std::vector<BenchCase>& cases,
                                     const BenchOptions& options, const ProgressFn& progress);

// Fills a row's summary (cake_us, aa_floor, copy_fraction, best peer,
// speedup) from its impls and the copy bandwidth.
void Summarize(BenchRow& row, double copy_gbps);

// The table of BENCH.md, one line per row.
std::string FormatTable(const BenchReport& report);

// Where a report holds a shape and op timed with the routed programs (op
// "bwd") and with others forced (op "bwd @rmsnorm.bwd.split", `--program`):
// per shape and op, the routed time, the fastest of all and routed / fastest,
// marked where the routed programs are slower by more than kCandidateMargin
// and more than either row's A/A floor (its noise).
// Empty where no shape and op has both.
inline constexpr double kCandidateMargin = 0.02;
std::string FormatCandidates(const BenchReport& report);

// JSON with the proto field names, written atomically.
absl::Status WriteReportJson(const BenchReport& report, const std::string& path);

}  // namespace cake::bench

#endif  // CAKE_BENCH_RUNNER_H_
