// The C API (libcake.so) against the C++ path, loaded with dlopen the way a
// Python trainer loads it with ctypes: its own protobuf, Abseil and CUDA
// runtime beside this test's static ones. Plan, build, replay and eager
// launch must give the C++ path's outputs bit for bit; errors must name
// what is wrong and leave buffers untouched.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cake/c_api.h"
#include "google/protobuf/text_format.h"
#include "graphs/step.h"
#include "tests/testing/gpu_test.h"
#include "tests/testing/specs.h"

namespace cake::testing {
namespace {

// libcake.so: $CAKE_LIB, else next to this binary, else ../lib from it.
std::vector<std::string> LibraryCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("CAKE_LIB")) out.push_back(env);
  char exe[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, n);
    dir = dir.substr(0, dir.rfind('/'));
    out.push_back(dir + "/libcake.so");
    out.push_back(dir + "/../lib/libcake.so");
  }
  return out;
}

struct CakeLib {
  void* handle = nullptr;
  std::string error;
  decltype(&cake_api_version) api_version = nullptr;
  decltype(&cake_last_error) last_error = nullptr;
  decltype(&cake_plan_create) plan_create = nullptr;
  decltype(&cake_plan_destroy) plan_destroy = nullptr;
  decltype(&cake_plan_workspace_bytes) plan_workspace_bytes = nullptr;
  decltype(&cake_plan_fingerprint) plan_fingerprint = nullptr;
  decltype(&cake_launch) launch = nullptr;
  decltype(&cake_step_create) step_create = nullptr;
  decltype(&cake_step_destroy) step_destroy = nullptr;
  decltype(&cake_step_replay) step_replay = nullptr;
  decltype(&cake_step_rebind) step_rebind = nullptr;

  static const CakeLib& Get() {
    static const CakeLib* lib = new CakeLib(Load());
    return *lib;
  }

 private:
  static CakeLib Load() {
    CakeLib lib;
    for (const std::string& path : LibraryCandidates()) {
      lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib.handle != nullptr) break;
      lib.error += path + ": " + dlerror() + "\n";
    }
    if (lib.handle == nullptr) return lib;
    lib.error.clear();  // the paths tried before the one that loaded
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib.handle, name));
      if (fn == nullptr) lib.error += std::string("missing symbol ") + name + "\n";
    };
    sym(lib.api_version, "cake_api_version");
    sym(lib.last_error, "cake_last_error");
    sym(lib.plan_create, "cake_plan_create");
    sym(lib.plan_destroy, "cake_plan_destroy");
    sym(lib.plan_workspace_bytes, "cake_plan_workspace_bytes");
    sym(lib.plan_fingerprint, "cake_plan_fingerprint");
    sym(lib.launch, "cake_launch");
    sym(lib.step_create, "cake_step_create");
    sym(lib.step_destroy, "cake_step_destroy");
    sym(lib.step_replay, "cake_step_replay");
    sym(lib.step_rebind, "cake_step_rebind");
    return lib;
  }
};

cake_bindings ToC(const Bindings& b) {
  cake_bindings c = {};
  c.x = b.x, c.residual = b.residual, c.h = b.h, c.w = b.w, c.y = b.y, c.rstd = b.rstd;
  c.z = b.z, c.dy = b.dy, c.dh_in = b.dh_in, c.dx = b.dx, c.dz = b.dz, c.dw = b.dw;
  return c;  // no workspace: the step owns one
}

std::string Text(const StepSpec& spec) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(spec, &text);
  return text;
}

void ExpectLoaded(const CakeLib& lib) {
  ASSERT_NE(lib.handle, nullptr) << "libcake.so not loaded:\n" << lib.error;
  ASSERT_TRUE(lib.error.empty()) << lib.error;
  ASSERT_EQ(lib.api_version(), CAKE_C_API_VERSION);
}

class CApiTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    lib_ = &CakeLib::Get();
    ExpectLoaded(*lib_);
  }
  const CakeLib* lib_ = nullptr;
};

// Without a device too: the library loads, and a spec that does not parse
// (or no spec) is an invalid argument with the place of the error.
TEST(CApiLoadTest, ParseErrorsNeedNoDevice) {
  const CakeLib& lib = CakeLib::Get();
  ExpectLoaded(lib);
  cake_plan* plan = nullptr;
  EXPECT_EQ(lib.plan_create("op: RMSNORM layout { tokens: 4 dim: ", &plan), 3);
  EXPECT_NE(std::string(lib.last_error()).find("spec_text:1:"), std::string::npos)
      << lib.last_error();
  EXPECT_EQ(plan, nullptr);
  EXPECT_EQ(lib.plan_create(nullptr, &plan), 3);
  EXPECT_STREQ(lib.last_error(), "spec_text is NULL");
  EXPECT_EQ(lib.plan_workspace_bytes(nullptr), 0);
  EXPECT_EQ(lib.step_replay(nullptr, nullptr), 3);
  EXPECT_STREQ(lib.last_error(), "step is NULL");
}

StepSpec GateSpec() {
  StepSpec s = HeadsSpec(1031, 48, 128);
  s.set_op(RMSNORM_SILU_GATE);
  s.set_deterministic(true);
  return s;
}

StepSpec ResidualSpec() {
  StepSpec s = RowsSpec(4096, 6144, /*deterministic=*/true);
  s.set_residual(true);
  s.set_residual_grad_in(true);
  s.set_dw_dtype(BF16);
  return s;
}

// The whole checkpointed step through the C API (graph replay and eager
// launch) gives the C++ Step's outputs bit for bit.
TEST_F(CApiTest, ReplayAndLaunchEqualTheCppPathBitwise) {
  for (const StepSpec& spec :
       {RowsSpec(16384, 4096, true), RowsSpec(4096, 2048, false), HeadsSpec(4096, 24, 256, 8192),
        GateSpec(), ResidualSpec()}) {
    SCOPED_TRACE(Text(spec));
    const Plan plan = MustPlan(spec);
    auto cpp = MustBuffers(plan);
    auto c = MustBuffers(plan);
    ASSERT_TRUE(cpp && c);
    cpp->Fill(7);
    c->Fill(7);
    absl::StatusOr<std::unique_ptr<Step>> step = Step::Build(plan, cpp->b);
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_TRUE((*step)->Replay(nullptr).ok());
    CUDA_OK(cudaDeviceSynchronize());
    ASSERT_TRUE(CheckOutputs(plan.spec(), *cpp).Within());
    const Outputs expected(*cpp);

    cake_plan* cplan = nullptr;
    ASSERT_EQ(lib_->plan_create(Text(spec).c_str(), &cplan), CAKE_OK) << lib_->last_error();
    EXPECT_STREQ(lib_->last_error(), "");
    EXPECT_EQ(lib_->plan_fingerprint(cplan), plan.fingerprint());
    EXPECT_EQ(lib_->plan_workspace_bytes(cplan), plan.workspace_bytes());
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));
    const cake_bindings bindings = ToC(c->b);
    cake_step* cstep = nullptr;
    ASSERT_EQ(lib_->step_create(cplan, &bindings, &cstep), CAKE_OK) << lib_->last_error();
    ASSERT_EQ(lib_->step_replay(cstep, stream), CAKE_OK) << lib_->last_error();
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(expected.Diff(*c), 0) << "graph replay through the C API";

    c->Poison();
    cake_bindings eager = bindings;
    eager.workspace = c->b.workspace;
    eager.workspace_bytes = c->b.workspace_bytes;
    ASSERT_EQ(lib_->launch(cplan, &eager, stream), CAKE_OK) << lib_->last_error();
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(expected.Diff(*c), 0) << "eager launch through the C API";

    lib_->step_destroy(cstep);
    lib_->plan_destroy(cplan);
    CUDA_OK(cudaStreamDestroy(stream));
  }
}

// Rebinding moves the step to other buffers; the first ones stay as they were.
TEST_F(CApiTest, RebindWritesOnlyTheNewBuffers) {
  const StepSpec spec = RowsSpec(8192, 4096, true);
  const Plan plan = MustPlan(spec);
  auto first = MustBuffers(plan);
  auto second = MustBuffers(plan);
  ASSERT_TRUE(first && second);
  first->Fill(3);
  second->Fill(4);
  cake_plan* cplan = nullptr;
  ASSERT_EQ(lib_->plan_create(Text(spec).c_str(), &cplan), CAKE_OK) << lib_->last_error();
  const cake_bindings b1 = ToC(first->b), b2 = ToC(second->b);
  cake_step* step = nullptr;
  ASSERT_EQ(lib_->step_create(cplan, &b1, &step), CAKE_OK) << lib_->last_error();
  const Outputs untouched(*first);
  ASSERT_EQ(lib_->step_rebind(step, &b2), CAKE_OK) << lib_->last_error();
  ASSERT_EQ(lib_->step_replay(step, nullptr), CAKE_OK) << lib_->last_error();
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(untouched.Diff(*first), 0);
  EXPECT_TRUE(CheckOutputs(plan.spec(), *second).Within());
  lib_->step_destroy(step);
  lib_->plan_destroy(cplan);
}

// Bad input: a status code, a message naming the field or role and the
// value, no object, and no buffer written.
TEST_F(CApiTest, ErrorsNameTheProblemAndChangeNothing) {
  cake_plan* cplan = nullptr;
  StepSpec bad = RowsSpec(64, 100);
  EXPECT_EQ(lib_->plan_create(Text(bad).c_str(), &cplan), 3);
  EXPECT_NE(std::string(lib_->last_error()).find("layout.dim"), std::string::npos)
      << lib_->last_error();
  EXPECT_NE(std::string(lib_->last_error()).find("100"), std::string::npos) << lib_->last_error();
  EXPECT_EQ(cplan, nullptr);

  const StepSpec spec = RowsSpec(1024, 2048, true);
  const Plan plan = MustPlan(spec);
  auto buf = MustBuffers(plan);
  ASSERT_TRUE(buf);
  buf->Fill(5);
  ASSERT_EQ(lib_->plan_create(Text(spec).c_str(), &cplan), CAKE_OK) << lib_->last_error();
  const Outputs before(*buf);
  cake_bindings missing = ToC(buf->b);
  missing.dy = nullptr;
  cake_step* step = nullptr;
  EXPECT_EQ(lib_->step_create(cplan, &missing, &step), 3);
  EXPECT_NE(std::string(lib_->last_error()).find("dy"), std::string::npos) << lib_->last_error();
  EXPECT_EQ(step, nullptr);
  cake_bindings misaligned = ToC(buf->b);
  misaligned.y = static_cast<char*>(buf->b.y) + 2;
  EXPECT_EQ(lib_->launch(cplan, &misaligned, nullptr), 3);
  EXPECT_NE(std::string(lib_->last_error()).find("y"), std::string::npos) << lib_->last_error();
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(before.Diff(*buf), 0);
  lib_->plan_destroy(cplan);
}

}  // namespace
}  // namespace cake::testing
