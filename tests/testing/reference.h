// FP64 references and device helpers for the GPU tests. The references
// follow the formulas of DESIGN.md directly, one row per CTA, everything in
// double; they share no code with the programs under test.
#ifndef CAKE_TESTS_TESTING_REFERENCE_H_
#define CAKE_TESTS_TESTING_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "ops/row_kernels.h"

namespace cake::testing {

bool HasCudaDevice();

// Fills n BF16 values at p (n elements, contiguous) with offset + scale * u,
// u uniform in [-1, 1) from a counter hash of (seed, index).
void FillBf16(void* p, int64_t n, uint64_t seed, float scale, float offset = 0.f);
void FillF32(float* p, int64_t n, uint64_t seed, float scale, float offset = 0.f);
// Sets element `index` of a BF16 buffer.
void SetBf16(void* p, int64_t index, float value);
// The value of a BF16 bit pattern (exact in FP32 and FP64).
double HostBf16(uint16_t bits);

struct RefInputs {
  RowLayout layout;
  const void* x;         // BF16 (layout)
  const void* residual;  // BF16 or null: then h = bf16(x + residual)
  const void* z;         // BF16 or null (gate)
  const void* w;         // BF16 or FP32
  int w_fp32;
  const void* dy;        // BF16 or null (no backward check)
  const void* dh_in;     // BF16 or null
  double eps;
};

struct RefOutputs {  // what the program under test produced
  const void* h;  // BF16 or null
  const void* y;  // BF16 or null
  const float* rstd;
  const void* dx;  // BF16 or null
  const void* dz;  // BF16 or null
};

// Worst |out - ref| / (atol + rtol * |ref|) per output (NaN or Inf where
// the reference is finite counts as infinity). <= 1 is within budget.
struct Violations {
  double h = 0, y = 0, rstd = 0, dx = 0, dz = 0;
};

// Checks every row against the FP64 reference (atol = rtol = 1e-2, rstd:
// rtol 1e-5) and returns the FP64 dw (sum over rows of dy * xhat [* silu(z)]).
Violations CheckRows(const RefInputs& in, const RefOutputs& out, std::vector<double>* dw_ref);

// The same reference computed on the CPU from host copies, for small shapes:
// it checks the GPU reference. Returns y, dx, dw and rstd in FP64, dense.
struct HostRef {
  std::vector<double> y, dx, dz, dw, rstd;
};
HostRef CpuReference(const RefInputs& in);
// The GPU reference's dense FP64 y and dx of the same inputs.
HostRef GpuReference(const RefInputs& in);

// |dw - ref| / (1e-4 + 1e-4 * |ref|) over dw, worst element. A BF16 dw is
// allowed one BF16 rounding on top (half an ulp, at most 2^-8 of the value):
// 1e-4 + (1e-4 + 2^-8) * |ref|.
double DwViolation(const std::vector<float>& dw, const std::vector<double>& ref, bool bf16 = false);

// A trainer's own kernel for graph tests: p[i] = bf16(p[i] * scale) over n
// BF16 elements, in place.
struct ScaleParams {
  void* p;
  int64_t n;
  float scale;
};
const void* ScaleBf16Kernel();
inline constexpr int kScaleBlock = 256;
inline int ScaleGrid(int64_t n) { return static_cast<int>(n / kScaleBlock / 8 + 1); }
// The same, launched on a stream.
void ScaleBf16(void* p, int64_t n, float scale, void* stream = nullptr);

// Number of differing bytes between two device buffers.
int64_t CountDiff(const void* a, const void* b, int64_t bytes);

}  // namespace cake::testing

#endif  // CAKE_TESTS_TESTING_REFERENCE_H_
