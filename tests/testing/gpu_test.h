// Shared pieces of the GPU tests: the fixture that skips without a device,
// plans for the current device, buffers, eager runs and device snapshots.
#ifndef CAKE_TESTS_TESTING_GPU_TEST_H_
#define CAKE_TESTS_TESTING_GPU_TEST_H_

#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "ops/launch.h"
#include "planner/planner.h"
#include "tests/testing/reference.h"
#include "tests/testing/step_buffers.h"

namespace cake::testing {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasCudaDevice()) GTEST_SKIP() << "no CUDA device";
  }
};

// The buffers of a plan's spec (the test fails if they cannot be allocated).
inline std::unique_ptr<StepBuffers> MustBuffers(const Plan& plan) {
  absl::StatusOr<std::unique_ptr<StepBuffers>> made = StepBuffers::Create(plan);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

// A device copy of `bytes` at `src`, freed with the object.
class DeviceSnapshot {
 public:
  DeviceSnapshot(const void* src, int64_t bytes) {
    EXPECT_EQ(cudaMalloc(&copy_, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(copy_, src, bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  }
  ~DeviceSnapshot() { cudaFree(copy_); }
  const void* get() const { return copy_; }

 private:
  void* copy_ = nullptr;
};

inline Plan MustPlan(const StepSpec& spec) {
  absl::StatusOr<TargetDevice> target = TargetDevice::Current();
  EXPECT_TRUE(target.ok()) << target.status();
  absl::StatusOr<Plan> plan = MakePlan(spec, *target);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

inline void RunPlan(const Plan& plan, const Bindings& b);

// `plan` run on `buf` with inputs from seeds 1..`seeds`, z in [-z_scale,
// z_scale) for the gated op: the worst of its outputs' errors.
inline Worst WorstOfPlan(const Plan& plan, StepBuffers& buf, int seeds, float z_scale = 3.f) {
  Worst worst;
  for (int seed = 1; seed <= seeds; ++seed) {
    buf.Fill(seed, z_scale);
    RunPlan(plan, buf.b);
    worst.Merge(CheckOutputs(plan.spec(), buf));
  }
  return worst;
}

// Forward + backward of `spec` (its phases replaced by both), worst of
// `seeds` seeds.
inline Worst WorstOfSeeds(StepSpec spec, int seeds = 5, float z_scale = 3.f) {
  spec.clear_phases();
  spec.add_phases(FORWARD);
  spec.add_phases(BACKWARD);
  const Plan plan = MustPlan(spec);
  const auto buf = MustBuffers(plan);
  return buf == nullptr ? Worst{} : WorstOfPlan(plan, *buf, seeds, z_scale);
}

inline void RunPlan(const Plan& plan, const Bindings& b) {
  const absl::Status s = LaunchEager(plan, b, nullptr);
  if (!s.ok()) cudaGetLastError();  // keep the failure out of later checks
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Snapshots of every output a step writes.
struct Outputs {
  explicit Outputs(const StepBuffers& buf) {
    const int64_t act = buf.elems() * 2;
    for (const void* p : {static_cast<const void*>(buf.b.y), static_cast<const void*>(buf.b.dx),
                          static_cast<const void*>(buf.b.h), static_cast<const void*>(buf.b.dz)}) {
      if (p != nullptr) snaps.push_back(std::make_unique<DeviceSnapshot>(p, act));
    }
    rstd = std::make_unique<DeviceSnapshot>(buf.b.rstd, buf.Inputs().layout.rows * 4);
    dw = buf.Dw();
  }
  // Bytes that differ from `buf`'s current outputs (dw compared too).
  int64_t Diff(const StepBuffers& buf) const {
    const int64_t act = buf.elems() * 2;
    int64_t n = 0;
    size_t i = 0;
    for (const void* p : {static_cast<const void*>(buf.b.y), static_cast<const void*>(buf.b.dx),
                          static_cast<const void*>(buf.b.h), static_cast<const void*>(buf.b.dz)}) {
      if (p != nullptr) n += CountDiff(snaps[i++]->get(), p, act);
    }
    n += CountDiff(rstd->get(), buf.b.rstd, buf.Inputs().layout.rows * 4);
    const std::vector<float> now = buf.Dw();
    n += std::memcmp(now.data(), dw.data(), dw.size() * 4) != 0;
    return n;
  }
  std::vector<std::unique_ptr<DeviceSnapshot>> snaps;
  std::unique_ptr<DeviceSnapshot> rstd;
  std::vector<float> dw;
};

}  // namespace cake::testing

#endif  // CAKE_TESTS_TESTING_GPU_TEST_H_
