// Launches built from a plan without running them (no device needed).
#include "ops/launch.h"

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ops/row_kernels.h"
#include "ops/target.h"
#include "planner/planner.h"
#include "tests/testing/plans.h"
#include "tests/testing/specs.h"

namespace cake {
namespace {

using ::testing::HasSubstr;

// A MEMSET launch is the zero kernel over the start of its workspace region;
// bytes that are not whole words or run past the region, and a region the
// plan does not have, are refused naming the field, before anything runs.
TEST(LaunchTest, MemsetLaunchIsTheZeroKernelOverItsRegion) {
  absl::StatusOr<Plan> made = MakePlan(testing::RowsSpec(65536, 512, false),
                                       *TargetDevice::ForArch("sm_90a"));
  ASSERT_TRUE(made.ok()) << made.status();
  Plan plan = *made;
  ASSERT_EQ(plan.launches(2).kind(), MEMSET);
  const WorkspaceRegion& region = plan.workspace(0);
  ASSERT_EQ(region.name(), plan.launches(2).region());
  ASSERT_EQ(region.bytes(), 512 * 8);
  Bindings b;
  char* const workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  b.workspace = workspace;

  absl::StatusOr<KernelLaunch> k = MakeKernelLaunch(plan, plan.launches(2), b);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->function, ZeroWordsKernel());
  EXPECT_EQ(k->block.x, static_cast<unsigned>(kZeroBlock));
  EXPECT_GE(k->grid.x, 1u);
  ASSERT_EQ(k->params_bytes, sizeof(ZeroParams));
  ZeroParams p;
  std::memcpy(&p, k->params, sizeof p);
  EXPECT_EQ(reinterpret_cast<char*>(p.dst), workspace + region.offset());
  EXPECT_EQ(p.words, 512 * 8 / 4);

  plan.mutable_launches(2)->set_memset_bytes(512 * 8 + 4);
  absl::Status s = MakeKernelLaunch(plan, plan.launches(2), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[2].memset_bytes = 4100"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("4096 bytes"));

  plan.mutable_launches(2)->set_memset_bytes(6);
  s = MakeKernelLaunch(plan, plan.launches(2), b).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[2].memset_bytes = 6"));

  plan.mutable_launches(2)->set_memset_bytes(8);
  plan.mutable_launches(2)->set_region("nope");
  s = MakeKernelLaunch(plan, plan.launches(2), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[2].region = \"nope\""));
}

// A backward launch's row partition and dw sums as an edited plan might state
// them: blocks of no rows (the kernel would never finish), a count of
// partial rows the rows do not make, partial rows or an accumulator past
// the region. Each is refused naming the field and the value, before
// anything runs.
TEST(LaunchTest, BackwardPartitionOfAnEditedPlanIsRefused) {
  absl::StatusOr<Plan> made = MakePlan(testing::RowsSpec(65536, 6144, true, {BACKWARD}),
                                       *TargetDevice::ForArch("sm_90a"));
  ASSERT_TRUE(made.ok()) << made.status();
  const Plan good = *made;
  ASSERT_EQ(good.launches(0).program(), "rmsnorm.bwd.det.partials");
  ASSERT_EQ(good.launches(1).program(), "dw.reduce");
  const int64_t per_block = good.launches(0).rows_per_block();
  const int64_t partials = good.launches(0).partials();
  ASSERT_EQ(partials, (65536 + per_block - 1) / per_block);
  Bindings b;
  b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  auto message = [&](const Plan& plan, int launch) {
    absl::Status s = MakeKernelLaunch(plan, plan.launches(launch), b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };

  Plan plan = good;
  plan.mutable_launches(0)->set_rows_per_block(0);
  EXPECT_THAT(message(plan, 0), HasSubstr("launches[0].rows_per_block = 0"));

  plan = good;
  plan.mutable_launches(0)->set_partials(partials - 1);
  EXPECT_THAT(message(plan, 0),
              HasSubstr(absl::StrCat("launches[0].partials = ", partials - 1, ": 65536 rows in "
                                     "blocks of ", per_block, " make ", partials)));

  // FP32 partial rows at H = 6144 (DwPartialBytes).
  plan = good;
  plan.mutable_workspace(0)->set_bytes(partials * 6144 * 4 - 4);
  EXPECT_THAT(message(plan, 0), HasSubstr("launches[0].region = \"dw_partials\""));
  EXPECT_THAT(message(plan, 0), HasSubstr(absl::StrCat("the launch writes ", partials * 6144 * 4)));
  EXPECT_THAT(message(plan, 1), HasSubstr(absl::StrCat("the launch reads ", partials * 6144 * 4)));

  plan = good;
  plan.mutable_launches(1)->set_partials(partials + 1);
  EXPECT_THAT(message(plan, 1), HasSubstr("launches[1].region = \"dw_partials\""));

  // The non-deterministic backward adds into an FP64 accumulator of dim words.
  made = MakePlan(testing::RowsSpec(65536, 512, false, {BACKWARD}),
                  *TargetDevice::ForArch("sm_90a"));
  ASSERT_TRUE(made.ok()) << made.status();
  plan = *made;
  ASSERT_EQ(plan.launches(1).program(), "rmsnorm.bwd.kb");
  plan.mutable_workspace(0)->set_bytes(512 * 8 - 8);
  EXPECT_THAT(message(plan, 1), HasSubstr("the launch adds into 4096"));
  ASSERT_EQ(plan.launches(2).program(), "dw.finish");
  EXPECT_THAT(message(plan, 2), HasSubstr("the launch reads 4096"));
  plan.mutable_launches(1)->set_rows_per_block(-3);
  EXPECT_THAT(message(plan, 1), HasSubstr("launches[1].rows_per_block = -3"));
}

// The split backward's dx CTAs prefetch the rows 1 MB of a tensor ahead into
// L2 where the rows are packed, a CTA-wide row holds them and there are at
// least 4096 (SplitL2AheadRows), else not.
TEST(LaunchTest, SplitBackwardPrefetchesAheadOnlyWhereItPays) {
  // The backward launch's program and the rows ahead its parameters carry.
  struct Backward {
    std::string program;
    int64_t ahead = -1;
  };
  auto backward = [](const StepSpec& spec) {
    Backward out;
    absl::StatusOr<Plan> plan = MakePlan(spec, *TargetDevice::ForArch("sm_90a"));
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return out;
    out.program = plan->launches(0).program();
    Bindings b;
    b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
    absl::StatusOr<KernelLaunch> k = MakeKernelLaunch(*plan, plan->launches(0), b);
    EXPECT_TRUE(k.ok()) << k.status();
    if (!k.ok()) return out;
    RowBackwardParams p;
    EXPECT_EQ(k->params_bytes, sizeof p);
    std::memcpy(&p, k->params, sizeof p);
    out.ahead = p.l2_ahead_rows;
    return out;
  };
  auto backward_only = [](StepSpec spec) {
    spec.set_deterministic(true);
    spec.clear_phases();
    spec.add_phases(BACKWARD);
    return spec;
  };
  const Backward rows_2048 = backward(testing::RowsSpec(4096, 2048, true, {BACKWARD}));
  ASSERT_EQ(rows_2048.program, "rmsnorm.bwd.split");
  EXPECT_EQ(rows_2048.ahead, (int64_t{1} << 20) / (2048 * 2));
  const Backward rows_3072 = backward(testing::RowsSpec(4096, 3072, true, {BACKWARD}));
  ASSERT_EQ(rows_3072.program, "rmsnorm.bwd.split");
  EXPECT_EQ(rows_3072.ahead, ((int64_t{1} << 20) + 3072 * 2 - 1) / (3072 * 2));
  const Backward few = backward(testing::RowsSpec(4095, 2048, true, {BACKWARD}));
  ASSERT_EQ(few.program, "rmsnorm.bwd.split");
  EXPECT_EQ(few.ahead, 0);
  // Heads of a strided view are not packed rows; nor are D = 256 rows
  // CTA-wide (12288 rows: at 16384 det.partials has them since table .31).
  const Backward strided =
      backward(backward_only(testing::HeadsSpec(2048, 2, 1024, 4 * 1024, 1024)));
  ASSERT_EQ(strided.program, "rmsnorm.bwd.split");
  EXPECT_EQ(strided.ahead, 0);
  const Backward contiguous = backward(backward_only(testing::HeadsSpec(3072, 4, 256)));
  ASSERT_EQ(contiguous.program, "rmsnorm.bwd.split");
  EXPECT_EQ(contiguous.ahead, 0);
}

// A backward kernel loads its first rows before it waits for the kernels
// before it where its launch follows another of the step and no kernel of
// the step writes them (InputsBeforeWait): not as the first kernel, nor
// where its x is the fused residual's h. Checked on the split program,
// whose launch needs no dynamic shared memory (raising a kernel's limit
// needs a device); every backward program takes the flag from the launch.
TEST(LaunchTest, BackwardLoadsItsRowsBeforeTheWaitAfterTheRecompute) {
  // inputs_before_wait of the spec's backward launch, or -1.
  auto before_wait = [](const StepSpec& spec) {
    absl::StatusOr<Plan> plan = MakePlan(spec, *TargetDevice::ForArch("sm_90a"));
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return -1;
    for (const Launch& l : plan->launches()) {
      if (l.program() != "rmsnorm.bwd.split") continue;
      Bindings b;
      b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
      absl::StatusOr<KernelLaunch> k = MakeKernelLaunch(*plan, l, b);
      EXPECT_TRUE(k.ok()) << k.status();
      if (!k.ok()) return -1;
      RowBackwardParams p;
      EXPECT_EQ(k->params_bytes, sizeof p);
      std::memcpy(&p, k->params, sizeof p);
      return p.inputs_before_wait;
    }
    ADD_FAILURE() << spec.ShortDebugString() << " has no split backward";
    return -1;
  };
  const StepSpec ckpt = testing::RowsSpec(4096, 2048, true);
  EXPECT_EQ(before_wait(ckpt), 1);
  StepSpec residual = ckpt;
  residual.set_residual(true);
  EXPECT_EQ(before_wait(residual), 0);
  EXPECT_EQ(before_wait(testing::RowsSpec(4096, 2048, true, {BACKWARD})), 0);
}

// The recompute walks its rows from the last (so that it starts on the rows
// the forward left in L2, and the backward after it on the rows it leaves):
// its launch runs the program's reverse instance on the layout ReverseRows
// makes; the forward's runs the plain one on the tensors as bound. Checked
// on checkpointed steps whose forwards need no dynamic shared memory
// (raising a kernel's limit needs a device); tests/ops/rmsnorm_gpu_test.cc
// runs every forward program both ways.
TEST(LaunchTest, RecomputeWalksTheRowsFromTheLast) {
  std::set<std::string> programs;
  for (const StepSpec& spec : {testing::RowsSpec(65536, 8192, true),
                               testing::RowsSpec(65536, 4096, true),
                               testing::RowsSpec(16384, 4608, true)}) {
    absl::StatusOr<Plan> plan = MakePlan(spec, *TargetDevice::ForArch("sm_90a"));
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->launches(0).phase(), FORWARD);
    ASSERT_EQ(plan->launches(1).phase(), RECOMPUTE);
    const int64_t rows = spec.layout().tokens(), dim = spec.layout().dim();
    Bindings b;
    b.x = reinterpret_cast<const void*>(uintptr_t{1} << 40);  // never dereferenced
    b.y = reinterpret_cast<void*>(uintptr_t{2} << 40);
    b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);
    absl::StatusOr<KernelLaunch> fwd = MakeKernelLaunch(*plan, plan->launches(0), b);
    absl::StatusOr<KernelLaunch> re = MakeKernelLaunch(*plan, plan->launches(1), b);
    ASSERT_TRUE(fwd.ok()) << fwd.status();
    ASSERT_TRUE(re.ok()) << re.status();
    RowForwardParams pf, pr;
    ASSERT_EQ(fwd->params_bytes, sizeof pf);
    std::memcpy(&pf, fwd->params, sizeof pf);
    std::memcpy(&pr, re->params, sizeof pr);
    EXPECT_EQ(pf.layout.row_stride, dim);
    EXPECT_EQ(pf.x, b.x);
    EXPECT_EQ(pf.y, b.y);
    EXPECT_EQ(pr.layout.row_stride, -dim);
    const int64_t last = (rows - 1) * dim * 2;
    EXPECT_EQ(pr.x, static_cast<const char*>(b.x) + last);
    EXPECT_EQ(pr.y, static_cast<char*>(b.y) + last);
    EXPECT_NE(re->function, fwd->function);
    EXPECT_EQ(plan->launches(0).program(), plan->launches(1).program());
    programs.insert(plan->launches(0).program());
  }
  EXPECT_EQ(programs.size(), 3u);  // fwd.flat.wide, fwd.loop and fwd.flat.dense
}

// Only the recompute walks its rows from the last, and only where its x
// holds more than kRecomputeFromLastMinBytes (16 MiB: [4096, 2048] does
// not, one row more does; a view counts its heads' rows).
TEST(LaunchTest, RecomputeFromTheLastPastItsSize) {
  Launch recompute, forward;
  recompute.set_phase(RECOMPUTE);
  forward.set_phase(FORWARD);
  EXPECT_FALSE(WalksRowsFromTheLast(testing::RowsSpec(4096, 2048), recompute));
  EXPECT_TRUE(WalksRowsFromTheLast(testing::RowsSpec(4097, 2048), recompute));
  EXPECT_FALSE(WalksRowsFromTheLast(testing::RowsSpec(65536, 8192), forward));
  EXPECT_FALSE(WalksRowsFromTheLast(testing::HeadsSpec(4096, 4, 256), recompute));
  EXPECT_TRUE(WalksRowsFromTheLast(testing::HeadsSpec(4096, 24, 256, 32 * 256, 256), recompute));
  Launch backward;
  backward.set_phase(BACKWARD);
  EXPECT_FALSE(WalksRowsFromTheLast(testing::RowsSpec(65536, 8192), backward));
}

// ReverseRows: row r of the reversed layout is row rows - 1 - r of the
// tensors, on packed rows, a contiguous view and a strided one (offsets as
// RowOffset computes them, with a plain division).
TEST(LaunchTest, ReversedLayoutMapsRowRToTheLastRowsFirst) {
  auto offset = [](const RowLayout& l, int64_t r) {
    if (l.row_stride != 0) return r * l.row_stride;
    const int64_t t = r / l.heads;
    return t * l.token_stride + (r - t * l.heads) * l.head_stride;
  };
  for (const RowLayout& l :
       {MakeRowLayout(37, 1, 64, 64, 64), MakeRowLayout(7 * 4, 4, 256, 4 * 256, 256),
        MakeRowLayout(5 * 24, 24, 256, 32 * 256, 256), MakeRowLayout(3 * 2, 2, 8, 40, 16)}) {
    RowForwardParams p{};
    p.layout = l;
    const char* base = reinterpret_cast<const char*>(uintptr_t{1} << 40);
    p.x = base;
    p.y = const_cast<char*>(base) + 4096;
    ReverseRows(p);
    std::set<int64_t> seen;
    for (int64_t r = 0; r < l.rows; ++r) {
      const int64_t at = (static_cast<const char*>(p.x) - base) / 2 + offset(p.layout, r);
      EXPECT_EQ(at, offset(l, l.rows - 1 - r)) << "row " << r << " of " << l.rows;
      seen.insert(at);
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), l.rows);
    EXPECT_EQ(static_cast<const char*>(p.y) - static_cast<const char*>(p.x), 4096);
  }
}

// The fused residual's dh_in instances take plain rows only: a plan whose
// spec was edited to per-head rows of the same count is refused, naming the
// field and the value, where the kernel would read every row at offset 0.
TEST(LaunchTest, ResidualBackwardOfPerHeadRowsIsRefused) {
  StepSpec spec = testing::RowsSpec(16384, 2048, true, {BACKWARD});
  spec.set_residual(true);
  spec.set_residual_grad_in(true);
  absl::StatusOr<Plan> made = MakePlan(spec, *TargetDevice::ForArch("sm_90a"));
  ASSERT_TRUE(made.ok()) << made.status();
  Plan plan = *made;
  Bindings b;
  b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  Layout* layout = plan.mutable_spec()->mutable_layout();
  layout->set_tokens(8192);
  layout->set_heads(2);
  layout->set_head_stride(2048);
  layout->set_token_stride(2 * 2048 + 8);
  const absl::Status s = MakeKernelLaunch(plan, plan.launches(0), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("spec.residual_grad_in = true with layout.heads = 2"));
}

// A backward launch whose block is not its program's CTA (a plan saved when
// the H = 2048 backward ran one 128-thread row group per CTA; it now holds
// six, BwdBlockOf) is refused naming the field and both sizes.
TEST(LaunchTest, BackwardLaunchOfAnotherBlockIsRefused) {
  absl::StatusOr<Plan> made = MakePlan(testing::RowsSpec(16384, 2048, true, {BACKWARD}),
                                       *TargetDevice::ForArch("sm_90a"));
  ASSERT_TRUE(made.ok()) << made.status();
  Plan plan = *made;
  ASSERT_EQ(plan.launches(0).program(), "rmsnorm.bwd.det.partials");
  ASSERT_EQ(plan.launches(0).block().x(), 768u);
  plan.mutable_launches(0)->mutable_block()->set_x(128);
  Bindings b;
  b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  const absl::Status s = MakeKernelLaunch(plan, plan.launches(0), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[0].block.x = 128"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("rmsnorm.bwd.det.partials runs blocks of 768"));
}

// dw.reduce runs CTAs of DwReduceColumns(dim) columns: 16 up to H = 256, 32
// past it. An edited plan's reduce launch of another column count runs if
// its grid covers dim in such CTAs (a plan of another version); a block past
// 32 columns or of other than 32 lanes, or a grid that leaves columns out,
// is refused naming the field, the value and what dw.reduce runs.
TEST(LaunchTest, DwReduceLaunchShape) {
  const TargetDevice h200 = *TargetDevice::ForArch("sm_90a");
  for (const int64_t dim : {128, 256, 264, 1536}) {
    absl::StatusOr<Plan> made = MakePlan(testing::RowsSpec(16384, dim, true, {BACKWARD}), h200);
    ASSERT_TRUE(made.ok()) << made.status();
    const Launch* reduce = testing::LaunchOf(*made, "dw.reduce");
    ASSERT_NE(reduce, nullptr) << dim;
    const uint32_t columns = dim <= 256 ? 16 : 32;
    EXPECT_EQ(reduce->block().x(), columns) << dim;
    EXPECT_EQ(reduce->block().y(), 32u) << dim;
    EXPECT_EQ(reduce->grid().x(), static_cast<uint32_t>((dim + columns - 1) / columns)) << dim;
  }
  absl::StatusOr<Plan> made = MakePlan(testing::RowsSpec(16384, 256, true, {BACKWARD}), h200);
  ASSERT_TRUE(made.ok()) << made.status();
  Bindings b;
  b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  const int i = testing::LaunchOf(*made, "dw.reduce")->index();
  auto edited = [&](uint32_t block_x, uint32_t block_y, uint32_t grid_x) {
    Plan plan = *made;
    plan.mutable_launches(i)->mutable_block()->set_x(block_x);
    plan.mutable_launches(i)->mutable_block()->set_y(block_y);
    plan.mutable_launches(i)->mutable_grid()->set_x(grid_x);
    return MakeKernelLaunch(plan, plan.launches(i), b).status();
  };
  EXPECT_TRUE(edited(32, 32, 8).ok()) << edited(32, 32, 8);
  EXPECT_TRUE(edited(8, 32, 32).ok()) << edited(8, 32, 32);
  absl::Status s = edited(64, 32, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("launches[", i, "].block = (64, 32, 1): dw.reduce runs "
                                     "blocks of 1 to 32 columns by 32 lanes")));
  s = edited(16, 16, 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("].block = (16, 16, 1)"));
  s = edited(16, 32, 15);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("launches[", i, "].grid = (15, 1, 1): dw.reduce runs 16 "
                                     "CTAs of 16 columns for dim 256")));
}

// A row kernel's launch shape as an edited plan might state it: dynamic
// shared memory below the fused backward's ring and fold, or negative; a
// grid other than the rule's where CTAs hold fixed rows; a second grid
// dimension. Each is refused naming the field, the value and what the
// program runs; the flat forward with no shared memory runs its instance
// that reads the weight through L1.
TEST(LaunchTest, LaunchShapeOfAnEditedPlan) {
  const TargetDevice h200 = *TargetDevice::ForArch("sm_90a");
  absl::StatusOr<Plan> made = MakePlan(testing::RowsSpec(65536, 6144, true, {BACKWARD}), h200);
  ASSERT_TRUE(made.ok()) << made.status();
  Plan plan = *made;
  ASSERT_EQ(plan.launches(0).program(), "rmsnorm.bwd.det.partials");
  const int32_t needs = plan.launches(0).dynamic_smem_bytes();
  ASSERT_GT(needs, 6144 * 4) << "the FP32 weight and the ring";
  Bindings b;
  b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  plan.mutable_launches(0)->set_dynamic_smem_bytes(needs - 16);
  absl::Status s = MakeKernelLaunch(plan, plan.launches(0), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("launches[0].dynamic_smem_bytes = ", needs - 16, ": "
                                     "rmsnorm.bwd.det.partials needs ", needs)));

  // A persistent grid may be any size, but not two-dimensional.
  plan = *made;
  plan.mutable_launches(0)->mutable_grid()->set_x(7);
  EXPECT_NE(MakeKernelLaunch(plan, plan.launches(0), b).status().code(),
            absl::StatusCode::kInvalidArgument);
  plan.mutable_launches(0)->mutable_grid()->set_y(2);
  s = MakeKernelLaunch(plan, plan.launches(0), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[0].grid = (7, 2, 1): rmsnorm.bwd.det.partials runs a one-dimensional grid"));

  made = MakePlan(testing::RowsSpec(16385, 1536, true, {FORWARD}), h200);
  ASSERT_TRUE(made.ok()) << made.status();
  plan = *made;
  ASSERT_EQ(plan.launches(0).program(), "rmsnorm.fwd.flat");
  ASSERT_EQ(plan.launches(0).grid().x(), 16385u);  // one 96-thread row a CTA
  plan.mutable_launches(0)->mutable_grid()->set_x(16384);
  s = MakeKernelLaunch(plan, plan.launches(0), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("launches[0].grid.x = 16384: rmsnorm.fwd.flat runs 16385 CTAs"));
  plan.mutable_launches(0)->mutable_grid()->set_x(16385);
  ASSERT_EQ(plan.launches(0).dynamic_smem_bytes(), 96 * 2 * 16);
  plan.mutable_launches(0)->set_dynamic_smem_bytes(-4);
  s = MakeKernelLaunch(plan, plan.launches(0), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[0].dynamic_smem_bytes = -4"));
  plan.mutable_launches(0)->set_dynamic_smem_bytes(0);
  // A program that does not take the spec (the warp forward holds rows of
  // up to 1024 columns).
  Plan other = plan;
  other.mutable_launches(0)->set_program("rmsnorm.fwd.warp");
  s = MakeKernelLaunch(other, other.launches(0), b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("launches[0].program = \"rmsnorm.fwd.warp\": "));

  absl::StatusOr<KernelLaunch> k = MakeKernelLaunch(plan, plan.launches(0), b);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->function, RowForwardFlatKernel(FlatRowConfig(1536), false, false, /*slots=*/false));
}

// Every forward, backward, reduce and finish launch the planner makes passes those checks
// (without a device, MakeKernelLaunch may still fail later, at the kernel's
// shared-memory attribute, but not with InvalidArgument).
TEST(LaunchTest, PlannedLaunchesPassTheirChecks) {
  std::vector<StepSpec> specs;
  for (int64_t tokens : {1, 7, 1024, 4096, 16384, 46593, 65536, 131072}) {
    for (int64_t dim : {64, 256, 1536, 2048, 6144, 8192, 16384}) {
      for (bool det : {false, true}) {
        specs.push_back(testing::RowsSpec(tokens, dim, det));
        StepSpec gate = specs.back();
        gate.set_op(RMSNORM_SILU_GATE);
        specs.push_back(gate);
      }
    }
  }
  for (int64_t tokens : {5, 4096, 65536}) {
    specs.push_back(testing::HeadsSpec(tokens, 24, 256, 8192));
    specs.push_back(testing::HeadsSpec(tokens, 4, 256));
  }
  Bindings b;
  b.workspace = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  std::set<std::string> programs;
  for (const StepSpec& spec : specs) {
    absl::StatusOr<Plan> plan = MakePlan(spec, *TargetDevice::ForArch("sm_90a"));
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (const Launch& l : plan->launches()) {
      if (l.kind() != KERNEL) continue;
      programs.insert(l.program());
      absl::Status s = MakeKernelLaunch(*plan, l, b).status();
      EXPECT_NE(s.code(), absl::StatusCode::kInvalidArgument)
          << l.program() << " of " << spec.ShortDebugString() << ": " << s;
    }
  }
  // The sweep reaches every routed forward and backward form and the reduce.
  for (const char* id : {"rmsnorm.fwd.flat", "rmsnorm.fwd.flat.dense", "rmsnorm.fwd.loop",
                         "rmsnorm_silu_gate.fwd.flat",
                         "rmsnorm.bwd.det.partials", "rmsnorm.bwd.split", "rmsnorm.bwd.kb",
                         "rmsnorm_silu_gate.bwd.det.partials", "rmsnorm_silu_gate.bwd.kb",
                         "dw.reduce", "dw.finish"}) {
    EXPECT_EQ(programs.count(id), 1u) << id;
  }
}

}  // namespace
}  // namespace cake
