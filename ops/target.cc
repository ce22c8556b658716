#include "ops/target.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/status.h"

namespace cake {
namespace {

struct KnownArch {
  const char* arch;
  int major, minor;
  int nominal_sm_count;  // the part the routing table was measured on
  int nominal_smem_optin;
};

// sm_90a: NVIDIA H200 SXM. sm_100a: B200. sm_103a: GB300 (152 SMs, as in the
// measurements its routing windows come from).
constexpr KnownArch kKnownArches[] = {
    {"sm_90a", 9, 0, 132, 232448},
    {"sm_100a", 10, 0, 148, 232448},
    {"sm_103a", 10, 3, 152, 232448},
};

}  // namespace

std::vector<std::string> KnownArches() {
  std::vector<std::string> out;
  for (const KnownArch& a : kKnownArches) out.push_back(a.arch);
  return out;
}

absl::StatusOr<TargetDevice> TargetDevice::ForArch(absl::string_view arch) {
  for (const KnownArch& a : kKnownArches) {
    if (arch == a.arch) return TargetDevice{a.arch, a.nominal_sm_count, a.nominal_smem_optin};
  }
  return absl::InvalidArgumentError(absl::StrCat("arch = \"", arch, "\": unknown; expected one of ",
                                                 absl::StrJoin(KnownArches(), ", ")));
}

absl::StatusOr<TargetDevice> TargetDevice::Current() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return absl::FailedPreconditionError("no CUDA device");
  }
  int device = 0;
  CAKE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp prop;
  CAKE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  for (const KnownArch& a : kKnownArches) {
    if (prop.major == a.major && prop.minor == a.minor) {
      return TargetDevice{a.arch, prop.multiProcessorCount,
                          static_cast<int>(prop.sharedMemPerBlockOptin)};
    }
  }
  return absl::FailedPreconditionError(absl::StrCat("device ", prop.name, " has compute capability ",
                                                    prop.major, ".", prop.minor,
                                                    "; Cake builds for ",
                                                    absl::StrJoin(KnownArches(), ", ")));
}

}  // namespace cake
