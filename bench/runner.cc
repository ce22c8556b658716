#include "bench/runner.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suite.h"
#include "google/protobuf/util/json_util.h"
#include "graphs/step.h"
#include "ops/registry.h"
#include "ops/shape.h"
#include "ops/status.h"
#include "planner/planner.h"
#include "planner/text_proto.h"
#include "planner/routing.h"
#include "tests/testing/plans.h"
#include "tests/testing/step_buffers.h"

namespace cake::bench {
namespace {

// Spans of each device-to-device copy: the speed of light's and each row's
// same-bytes copy (BenchRow.same_bytes_copy_us).
constexpr int kCopyReps = 20;

// Driver version and clocks from NVML, loaded at run time; the CUDA
// driver's API version where NVML is missing.
void ReadMachine(BenchMachine* m) {
  int device = 0;
  cudaGetDevice(&device);
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    m->set_gpu(prop.name);
    m->set_sm_count(prop.multiProcessorCount);
    m->set_l2_bytes(prop.l2CacheSize);
    m->set_compute_capability(absl::StrCat(prop.major, ".", prop.minor));
  }
  m->set_cuda_runtime(absl::StrCat(CUDART_VERSION / 1000, ".", CUDART_VERSION % 1000 / 10));
  int driver_api = 0;
  cudaDriverGetVersion(&driver_api);
  m->set_driver(absl::StrCat("CUDA ", driver_api / 1000, ".", driver_api % 1000 / 10));
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return;
  using Device = void*;
  auto init = reinterpret_cast<int (*)()>(dlsym(nvml, "nvmlInit_v2"));
  auto version = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(nvml, "nvmlSystemGetDriverVersion"));
  auto by_bus = reinterpret_cast<int (*)(const char*, Device*)>(
      dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto clock = reinterpret_cast<int (*)(Device, int, unsigned*)>(dlsym(nvml, "nvmlDeviceGetClockInfo"));
  auto max_clock =
      reinterpret_cast<int (*)(Device, int, unsigned*)>(dlsym(nvml, "nvmlDeviceGetMaxClockInfo"));
  if (!init || !version || !by_bus || !clock || !max_clock || init() != 0) return;
  char text[96] = {};
  if (version(text, sizeof(text)) == 0) m->set_driver(text);
  char bus[32] = {};
  Device handle = nullptr;
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess || by_bus(bus, &handle) != 0) {
    return;
  }
  constexpr int kSm = 1, kMem = 2;  // nvmlClockType_t
  unsigned mhz = 0;
  if (clock(handle, kSm, &mhz) == 0) m->set_sm_clock_mhz(mhz);
  if (max_clock(handle, kSm, &mhz) == 0) m->set_sm_clock_max_mhz(mhz);
  if (clock(handle, kMem, &mhz) == 0) m->set_mem_clock_mhz(mhz);
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm;
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

double WorstOf(const testing::Worst& w) {
  return std::max({w.y, w.h, w.rstd, w.dx, w.dz, w.dw});
}

// One implementation under test: a Step on its own buffers, and its spans.
struct Timed {
  std::unique_ptr<testing::StepBuffers> buffers;
  std::unique_ptr<Step> step;
  std::vector<GpuSpan> spans;
  std::vector<std::vector<double>> rounds;
};

void FillImpl(const std::string& name, const Timed& t, bool cupti, BenchImpl* out) {
  out->set_name(name);
  std::vector<double> all;
  for (const std::vector<double>& round : t.rounds) {
    out->add_round_median_us(Median(round));
    for (double us : round) all.push_back(us);
  }
  for (double us : all) out->add_samples_us(us);
  out->set_median_us(Median(all));
  bool stable = true;
  for (const GpuSpan& s : t.spans) {
    stable = stable && s.set_hash == t.spans[0].set_hash && s.kernels == t.spans[0].kernels &&
             s.memops == t.spans[0].memops;
  }
  out->set_kernel_set_stable(stable);
  out->set_kernels_per_replay(cupti && !t.spans.empty() ? t.spans[0].kernels : -1);
  out->set_memops_per_replay(cupti && !t.spans.empty() ? t.spans[0].memops : -1);
  const GpuSpan* nearest = nullptr;
  for (const GpuSpan& s : t.spans) {
    if (nearest == nullptr ||
        std::abs(s.us - out->median_us()) < std::abs(nearest->us - out->median_us())) {
      nearest = &s;
    }
  }
  if (nearest != nullptr) {
    for (const SpanPart& part : nearest->parts) {
      BenchPart* p = out->add_median_parts();
      p->set_name(part.name);
      p->set_start_us(part.start_us);
      p->set_us(part.us);
    }
  }
  if (!stable) out->set_note("the kernel set changed between replays: the figure is void");
}

absl::StatusOr<BenchRow> TimeCase(const BenchCase& c, const TargetDevice& device, SpanTimer& timer,
                                  ColdL2& l2, cudaStream_t stream, const BenchOptions& o) {
  CAKE_ASSIGN_OR_RETURN(const Plan plan, PlanCase(c, device));
  Timed impls[2];
  for (int i = 0; i < 2; ++i) {
    CAKE_ASSIGN_OR_RETURN(impls[i].buffers, testing::StepBuffers::Create(plan));
    impls[i].buffers->Fill(o.seed + i);
    CAKE_RETURN_IF_ERROR(PrepareBackwardInputs(plan.spec(), device, impls[i].buffers->b));
    CAKE_ASSIGN_OR_RETURN(impls[i].step, Step::Build(plan, impls[i].buffers->b));
  }
  // The fills ran on the legacy stream; the replays run on `stream`.
  CAKE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  BenchRow row;
  row.set_shape(c.shape);
  row.set_op(RowOp(c));
  *row.mutable_spec() = plan.spec();
  row.set_bytes(BytesMoved(plan.spec()));
  // Accuracy of what is timed: one replay of each copy, checked against FP64.
  double worst[2];
  for (int i = 0; i < 2; ++i) {
    CAKE_RETURN_IF_ERROR(impls[i].step->Replay(stream));
    CAKE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    worst[i] = WorstOf(testing::CheckOutputs(plan.spec(), *impls[i].buffers));
  }
  auto replay = [&](int i) {
    return timer.Time([&](cudaStream_t s) { return impls[i].step->Replay(s); }, l2, stream);
  };
  for (int w = 0; w < o.warmup; ++w) {
    for (int i = 0; i < 2; ++i) CAKE_RETURN_IF_ERROR(replay(i).status());
  }
  for (int r = 0; r < o.rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      const int i = (k + r) % 2;  // the order rotates from round to round
      std::vector<double> round;
      for (int n = 0; n < o.replays_per_round; ++n) {
        CAKE_ASSIGN_OR_RETURN(GpuSpan span, replay(i));
        impls[i].spans.push_back(span);
        round.push_back(span.us);
      }
      impls[i].rounds.push_back(std::move(round));
    }
  }
  for (int i = 0; i < 2; ++i) {
    BenchImpl* out = row.add_impls();
    FillImpl(i == 0 ? "cake" : "cake A/A", impls[i], timer.cupti(), out);
    out->set_worst_budget(worst[i]);
    out->set_within_budget(worst[i] <= 1);
  }
  return row;
}

}  // namespace

// Between a row's op and the program forced on it (RowOp, FormatCandidates).
constexpr absl::string_view kForcedMark = " @";

std::string RowOp(const BenchCase& c) {
  return c.program.empty() ? c.op : absl::StrCat(c.op, kForcedMark, c.program);
}

constexpr absl::string_view kRecomputeOnly = "recompute:";

bool ForcesRecomputeOnly(absl::string_view id) { return absl::StartsWith(id, kRecomputeOnly); }

absl::StatusOr<const ProgramInfo*> ForcedProgram(const std::string& id) {
  const bool recompute_only = ForcesRecomputeOnly(id);
  const ProgramInfo* forced =
      FindProgram(recompute_only ? id.substr(kRecomputeOnly.size()) : id);
  if (forced == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--program \"", id, "\": no such program (cake programs)"));
  }
  if (forced->stage != Stage::kForward && (recompute_only || forced->stage != Stage::kBackward)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--program \"", id, "\": a ", StageName(forced->stage), " program; pick a forward",
        recompute_only ? " for the recompute" : " or a backward"));
  }
  return forced;
}

absl::StatusOr<Plan> PlanCase(const BenchCase& c, const TargetDevice& device) {
  if (c.program.empty()) return MakePlan(c.spec, device);
  CAKE_ASSIGN_OR_RETURN(const ProgramInfo* forced, ForcedProgram(c.program));
  CAKE_RETURN_IF_ERROR(CheckSupports(*forced, c.spec));
  if (!ForcesRecomputeOnly(c.program)) {
    return testing::PlanRoutedTo(c.spec, *forced, device, "--program");
  }
  if (!HasPhase(c.spec, RECOMPUTE)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--program \"", c.program, "\": the spec has no RECOMPUTE phase"));
  }
  return testing::PlanRoutedTo(c.spec, *forced, device, "--program", {PHASE_KIND_RECOMPUTE});
}

absl::Status PrepareBackwardInputs(const StepSpec& spec, const TargetDevice& device,
                                   const Bindings& bindings) {
  if (HasPhase(spec, FORWARD) || HasPhase(spec, RECOMPUTE) || spec.layout().tokens() == 0) {
    return absl::OkStatus();
  }
  StepSpec fwd = spec;
  fwd.clear_phases();
  fwd.add_phases(FORWARD);
  fwd.set_accumulate_dw(false);
  fwd.set_residual_grad_in(false);
  CAKE_ASSIGN_OR_RETURN(Plan plan, MakePlan(fwd, device));
  CAKE_RETURN_IF_ERROR(LaunchEager(plan, bindings, nullptr));
  CAKE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return absl::OkStatus();
}

absl::StatusOr<BenchReport> RunBench(const std::vector<BenchCase>& cases,
                                     const BenchOptions& options, const ProgressFn& progress) {
  CAKE_ASSIGN_OR_RETURN(TargetDevice device, TargetDevice::Current());
  BenchReport report;
  report.set_tool("cake bench");
  report.set_date(UtcNow());
  std::string why;
  CAKE_ASSIGN_OR_RETURN(std::unique_ptr<SpanTimer> timer,
                        SpanTimer::Create(options.force_events, &why));
  report.set_timer(timer->cupti() ? "cupti" : "cuda-events");
  if (!timer->cupti()) {
    report.add_deviations(absl::StrCat("spans from CUDA events around each replay (they include "
                                       "the graph launch latency), not CUPTI: ", why));
  }
  cudaStream_t stream;
  CAKE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  absl::StatusOr<BenchReport> result = [&]() -> absl::StatusOr<BenchReport> {
    CAKE_ASSIGN_OR_RETURN(ColdL2 l2, ColdL2::Create(options.flush));
    report.set_l2_flush_bytes(l2.bytes());
    report.set_l2_flush(options.flush == FlushMethod::kKernel ? "evict-last scrub + kernel"
                                                                : "evict-last scrub + memset");
    report.set_warmup(options.warmup);
    report.set_rounds(options.rounds);
    report.set_replays_per_round(options.replays_per_round);
    report.set_deterministic(cases.empty() || cases[0].spec.deterministic());
    // The speed of light: a device-to-device copy, timed like the cases.
    CAKE_ASSIGN_OR_RETURN(const double copy, CopyBandwidth(options.copy_bytes, l2, stream,
                                                           kCopyReps, timer.get(), options.warmup));
    report.set_copy_bytes(options.copy_bytes);
    report.set_copy_gbps(copy / 1e9);
    ReadMachine(report.mutable_machine());  // clocks just after the copies
    // A plain copy of a row's bytes (half read, half written, in whole
    // 16-byte vectors), timed once per size: the faster of the copy kernel
    // and the copy engine, whose start costs microseconds at a few MB while
    // the kernel runs below its rate at GBs.
    std::map<int64_t, double> copy_us_of;
    auto same_bytes_copy_us = [&](double bytes) -> absl::StatusOr<double> {
      const int64_t half = std::max<int64_t>((std::llround(bytes / 2) + 15) / 16 * 16, 16);
      if (auto it = copy_us_of.find(half); it != copy_us_of.end()) return it->second;
      double best = 0;
      for (const CopyBy by : {CopyBy::kKernel, CopyBy::kMemcpy}) {
        CAKE_ASSIGN_OR_RETURN(const double us, CopyMedianUs(half, by, l2, stream, kCopyReps,
                                                            timer.get(), options.warmup));
        if (best == 0 || us < best) best = us;
      }
      return copy_us_of[half] = best;
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      absl::StatusOr<BenchRow> row = TimeCase(cases[i], device, *timer, l2, stream, options);
      if (row.ok()) {
        absl::StatusOr<double> copy_us = same_bytes_copy_us(row->bytes());
        if (copy_us.ok()) {
          row->set_same_bytes_copy_us(*copy_us);
        } else {
          row = copy_us.status();
        }
      }
      if (!row.ok()) {
        return absl::Status(row.status().code(), absl::StrCat(cases[i].shape, " ", cases[i].op,
                                                              ": ", row.status().message()));
      }
      Summarize(*row, report.copy_gbps());
      *report.add_rows() = *std::move(row);
      if (progress) progress(static_cast<int>(i + 1), static_cast<int>(cases.size()), cases[i]);
    }
    return report;
  }();
  cudaStreamDestroy(stream);
  return result;
}

void Summarize(BenchRow& row, double copy_gbps) {
  if (row.impls_size() < 2) return;
  const double cake = row.impls(0).median_us(), aa = row.impls(1).median_us();
  row.set_cake_us(cake);
  row.set_aa_floor(aa > 0 ? std::fabs(1 - cake / aa) : 0);
  row.set_copy_fraction(cake > 0 && copy_gbps > 0 ? row.bytes() / (cake * 1e-6) / (copy_gbps * 1e9)
                                                  : 0);
  row.clear_best_peer();
  row.clear_best_peer_us();
  row.clear_speedup();
  for (int i = 2; i < row.impls_size(); ++i) {
    const BenchImpl& p = row.impls(i);
    if (!p.within_budget() || !p.kernel_set_stable() || p.median_us() <= 0) continue;
    if (row.best_peer().empty() || p.median_us() < row.best_peer_us()) {
      row.set_best_peer(p.name());
      row.set_best_peer_us(p.median_us());
    }
  }
  if (!row.best_peer().empty() && cake > 0) row.set_speedup(row.best_peer_us() / cake);
}

std::string FormatTable(const BenchReport& r) {
  std::string out = absl::StrFormat(
      "%s, %s, driver %s, CUDA %s; %s spans, L2 flushed (%d MB written by %s) before each "
      "replay;\n"
      "median of %d rounds x %d replays after %d warm-up; copy %.0f GB/s (read + write);\n"
      "copy us: a plain copy of the row's bytes alone (the faster of cudaMemcpyAsync and a "
      "copy kernel), timed the same way\n",
      r.tool(), r.machine().gpu(), r.machine().driver(), r.machine().cuda_runtime(), r.timer(),
      r.l2_flush_bytes() >> 20, r.l2_flush(), r.rounds(), r.replays_per_round(), r.warmup(), r.copy_gbps());
  for (const std::string& d : r.deviations()) absl::StrAppend(&out, "deviation: ", d, "\n");
  // The op column: "ckpt.cast", or wider where a program was forced ("bwd
  // @rmsnorm.bwd.split").
  int op_width = 9;
  for (const BenchRow& row : r.rows()) op_width = std::max(op_width, static_cast<int>(row.op().size()));
  absl::StrAppendFormat(&out, "%-30s %-*s %10s %10s  %-40s %8s %7s %7s %8s  %s\n", "shape",
                        op_width, "op", "cake us", "peer us", "best peer", "speedup", "A/A",
                        "of copy", "copy us", "notes");
  for (const BenchRow& row : r.rows()) {
    std::string notes;
    for (const BenchImpl& p : row.impls()) {
      if (!p.within_budget()) {
        absl::StrAppendFormat(&notes, "%s%s over budget (%.2fx)", notes.empty() ? "" : "; ",
                              p.name(), p.worst_budget());
      } else if (!p.kernel_set_stable()) {
        absl::StrAppendFormat(&notes, "%s%s kernel set changed", notes.empty() ? "" : "; ",
                              p.name());
      }
    }
    const bool peer = !row.best_peer().empty();
    const bool copied = row.same_bytes_copy_us() > 0;
    absl::StrAppendFormat(&out, "%-30s %-*s %10.1f %10s  %-40s %8s %7.3f %7.3f %8s  %s\n",
                          row.shape(), op_width, row.op(), row.cake_us(),
                          peer ? absl::StrFormat("%.1f", row.best_peer_us()) : "-",
                          peer ? row.best_peer() : "-",
                          peer ? absl::StrFormat("%.2fx", row.speedup()) : "-", row.aa_floor(),
                          row.copy_fraction(),
                          copied ? absl::StrFormat("%.1f", row.same_bytes_copy_us()) : "-", notes);
  }
  return out;
}

std::string FormatCandidates(const BenchReport& report) {
  struct Group {
    std::string shape, op;
    double routed_us = 0;        // 0: no routed row
    double routed_aa = 0;        // the routed row's A/A floor
    std::string fastest;         // "routed" or a program id
    double fastest_us = 0;
    double fastest_aa = 0;
    int rows = 0;
  };
  std::vector<Group> groups;
  for (const BenchRow& row : report.rows()) {
    const absl::string_view full = row.op();
    const size_t at = full.find(kForcedMark);
    const std::string op(full.substr(0, at));
    const std::string program(at == absl::string_view::npos ? "routed"
                                                            : full.substr(at + kForcedMark.size()));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.shape == row.shape() && g.op == op;
    });
    if (it == groups.end()) {
      Group g;
      g.shape = row.shape();
      g.op = op;
      it = groups.insert(groups.end(), g);
    }
    ++it->rows;
    if (at == absl::string_view::npos) {
      it->routed_us = row.cake_us();
      it->routed_aa = row.aa_floor();
    }
    if (it->fastest.empty() || row.cake_us() < it->fastest_us) {
      it->fastest = program;
      it->fastest_us = row.cake_us();
      it->fastest_aa = row.aa_floor();
    }
  }
  std::string out;
  for (const Group& g : groups) {
    if (g.rows < 2 || g.routed_us <= 0) continue;
    if (out.empty()) {
      out = absl::StrFormat(
          "routed against the forced programs (<-- where the routed ones are more than %.0f%% "
          "slower, and more than either row's A/A floor):\n%-30s %-9s %10s  %-36s %10s %14s\n",
          kCandidateMargin * 100, "shape", "op", "routed us", "fastest", "us", "routed/fastest");
    }
    const double ratio = g.routed_us / g.fastest_us;
    const double floor = std::max({kCandidateMargin, g.routed_aa, g.fastest_aa});
    absl::StrAppendFormat(&out, "%-30s %-9s %10.2f  %-36s %10.2f %14.3f%s\n", g.shape, g.op,
                          g.routed_us, g.fastest, g.fastest_us, ratio,
                          ratio > 1 + floor ? "  <--" : "");
  }
  return out;
}

absl::Status WriteReportJson(const BenchReport& report, const std::string& path) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(report, &json, options);
  if (!status.ok()) return absl::InternalError(absl::StrCat("JSON: ", status.ToString()));
  return WriteFile(path, json);
}

}  // namespace cake::bench
