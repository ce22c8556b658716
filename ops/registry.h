// The program registry: every program Cake can launch, by stable id, with
// what the planner needs to choose it and size its launch.
//
// A program is one kernel with its launch rule. Ids read op.phase.kind[.variant]
// and are what plans and routing tables name, so they never change meaning.
#ifndef CAKE_OPS_REGISTRY_H_
#define CAKE_OPS_REGISTRY_H_

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cake/plan.pb.h"
#include "cake/step.pb.h"
#include "ops/row_config.h"
#include "ops/target.h"

namespace cake {

enum class Stage {
  kForward,   // forward and recompute phases
  kBackward,  // dx (dz) and the dw sums
  kReduce,    // ordered reduce of dw partial rows into dw
  kFinish,    // FP64 dw accumulator into dw (store, cast or add)
};

// Where a backward program puts its dw sums.
enum class DwOutput {
  kNone,      // forward, reduce, cast
  kPartials,  // one FP64 partial row per fixed row block; a reduce follows
  kAtomic,    // FP64 atomics into a zeroed accumulator; a finish follows
};

struct Geometry {
  Dim3 grid;
  Dim3 block;
  int32_t dynamic_smem_bytes = 0;
  int64_t rows_per_block = 0;
  int64_t partials = 0;
};

// The kernel families of the row programs.
enum class RowKernel {
  // A persistent grid walking row groups (RowForward, RowBackward).
  kPersistent,
  // One row group per CTA, no persistent loop: the flat forward, or the
  // split backward (dx and dw CTAs in one launch).
  kFlat,
  // The flat forward at 32 registers a thread: 2048 threads per SM with two
  // vectors per thread too (1536 in kFlat).
  kFlatDense,
  // The looped forward: one row per CTA, the row read twice in a loop
  // (sum of squares, then y), the second time from cache.
  kLoop,
};

struct ProgramInfo {
  absl::string_view id;
  Op op;  // OP_UNSPECIFIED: serves every op (reduce, cast)
  Stage stage;
  // Bitwise reproducible run to run and across grid sizes. A deterministic
  // program may serve either mode; a non-deterministic one only
  // deterministic = false.
  bool deterministic;
  int64_t dim_min;
  int64_t dim_max;
  bool heads;     // per-head views (contiguous and strided)
  bool residual;  // fused residual add
  // Forward only: prefetches the row group after next into L2, which needs
  // packed rows (row r at r * dim).
  bool l2_prefetch;
  DwOutput dw_output;
  // The program that turns the sums into dw: the ordered reduce of the
  // partials (kPartials) or the finish of the accumulator (kAtomic).
  absl::string_view reduce_program;
  // Launch rule: geometry for a canonical spec on a device.
  Geometry (*geometry)(const StepSpec& spec, const TargetDevice& device);
  // Bytes of workspace the program itself needs for that geometry, in the
  // region named `workspace_region`; nullptr when it needs none.
  int64_t (*workspace_bytes)(const StepSpec& spec, const Geometry& geometry);
  absl::string_view workspace_region;
  // Row programs: how a row of `dim` maps onto threads (the kernel template
  // instance and the block size). nullptr for reduce and finish.
  RowConfig (*row_config)(int64_t dim);
  absl::string_view summary;
  // Which kernel family runs the program's rows.
  RowKernel kernel = RowKernel::kPersistent;
};

// Whether the spec's dw partial rows are FP32 (DwPartialBytes: above H = 4096
// without the gate), else FP64.
bool DwPartialsFp32(const StepSpec& spec);
// Bytes of `count` dw partial rows of the spec's width.
int64_t DwPartialRowsBytes(const StepSpec& spec, int64_t count);

// Every registered program, in a stable order.
absl::Span<const ProgramInfo> Programs();

// nullptr when no program has that id.
const ProgramInfo* FindProgram(absl::string_view id);

// OK when `program` can run the canonical `spec`; otherwise
// InvalidArgumentError saying which property it lacks.
absl::Status CheckSupports(const ProgramInfo& program, const StepSpec& spec);

absl::string_view StageName(Stage stage);

// A persistent backward's shared memory for the canonical `spec`: the bytes
// its CTA uses (the weight, the ring and the fold) and the CTAs per SM its
// grid counts on. Its launch asks for more where one CTA more would fit an
// SM (BwdCappedSmemBytes). nullopt for the other programs.
struct BackwardSmem {
  int64_t used = 0;
  int ctas_per_sm = 0;
};
std::optional<BackwardSmem> PersistentBackwardSmem(const ProgramInfo& program,
                                                   const StepSpec& spec);

}  // namespace cake

#endif  // CAKE_OPS_REGISTRY_H_
