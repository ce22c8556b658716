#include "tests/testing/reference.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cake::testing {
namespace {

#define REF_CHECK(call)                                                             \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,             \
                   cudaGetErrorString(e_));                                         \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

constexpr int kThreads = 256;

__host__ __device__ inline uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__device__ inline float Uniform(uint64_t seed, int64_t i) {
  const uint64_t r = Mix(seed * 0x2545f4914f6cdd1dULL ^ Mix(static_cast<uint64_t>(i)));
  return static_cast<float>(r >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void FillBf16Kernel(__nv_bfloat16* p, int64_t n, uint64_t seed, float scale, float offset) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = __float2bfloat16_rn(offset + scale * Uniform(seed, i));
  }
}

__global__ void FillF32Kernel(float* p, int64_t n, uint64_t seed, float scale, float offset) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = offset + scale * Uniform(seed, i);
  }
}

__device__ inline int64_t Offset(const RowLayout& l, int64_t r) {
  const int64_t t = r / l.heads;
  return t * l.token_stride + (r - t * l.heads) * l.head_stride;
}

__device__ inline double Bf(const void* p, int64_t i) {
  return static_cast<double>(__bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]));
}

__device__ double BlockSum(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const double out = sh[0];
  __syncthreads();
  return out;
}

__device__ inline double Ratio(double out, double ref, double atol, double rtol) {
  const double err = fabs(out - ref);
  if (isnan(err) || isinf(err)) return isfinite(ref) ? INFINITY : 0.0;
  return err / (atol + rtol * fabs(ref));
}

__device__ void AtomicMaxPos(double* target, double v) {
  if (!(v > 0)) return;
  atomicMax(reinterpret_cast<unsigned long long*>(target), __double_as_longlong(v));
}

struct DenseOut {
  double* y;
  double* dx;
  double* dz;
  double* rstd;
};

// Violations: [0] h, [1] y, [2] rstd, [3] dx, [4] dz. dw_part: [gridDim.x][dim].
__global__ void CheckRowsKernel(RefInputs in, RefOutputs out, DenseOut dense, double* viol,
                                double* dw_part) {
  __shared__ double sh[kThreads];
  const RowLayout& l = in.layout;
  double vmax[5] = {0, 0, 0, 0, 0};
  for (int64_t r = blockIdx.x; r < l.rows; r += gridDim.x) {
    const int64_t off = Offset(l, r);
    auto h_at = [&](int64_t c) {
      if (in.residual == nullptr) return Bf(in.x, off + c);
      const float s = __bfloat162float(static_cast<const __nv_bfloat16*>(in.x)[off + c]) +
                      __bfloat162float(static_cast<const __nv_bfloat16*>(in.residual)[off + c]);
      return static_cast<double>(__bfloat162float(__float2bfloat16_rn(s)));
    };
    auto w_at = [&](int64_t c) {
      return in.w_fp32 ? static_cast<double>(static_cast<const float*>(in.w)[c]) : Bf(in.w, c);
    };
    double ss = 0;
    for (int64_t c = threadIdx.x; c < l.dim; c += kThreads) ss += h_at(c) * h_at(c);
    ss = BlockSum(ss, sh);
    const double rstd = 1.0 / sqrt(ss / l.dim + in.eps);
    if (threadIdx.x == 0) {
      if (out.rstd) vmax[2] = fmax(vmax[2], Ratio(out.rstd[r], rstd, 0.0, 1e-5));
      if (dense.rstd) dense.rstd[r] = rstd;
    }
    double dot = 0;
    for (int64_t c = threadIdx.x; c < l.dim; c += kThreads) {
      const double h = h_at(c);
      double y = h * rstd * w_at(c);
      double s = 1;
      if (in.z) {
        const double z = Bf(in.z, off + c);
        s = z / (1 + exp(-z));
        y *= s;
      }
      if (out.h) vmax[0] = fmax(vmax[0], Ratio(Bf(out.h, off + c), h, 1e-2, 1e-2));
      if (out.y) vmax[1] = fmax(vmax[1], Ratio(Bf(out.y, off + c), y, 1e-2, 1e-2));
      if (dense.y) dense.y[r * l.dim + c] = y;
      if (in.dy) dot += Bf(in.dy, off + c) * w_at(c) * s * (h * rstd);
    }
    if (in.dy == nullptr) continue;
    dot = BlockSum(dot, sh);
    for (int64_t c = threadIdx.x; c < l.dim; c += kThreads) {
      const double xhat = h_at(c) * rstd;
      const double dy = Bf(in.dy, off + c);
      const double w = w_at(c);
      double s = 1, dz = 0;
      if (in.z) {
        const double z = Bf(in.z, off + c);
        const double sig = 1 / (1 + exp(-z));
        s = z * sig;
        dz = dy * xhat * w * sig * (1 + z * (1 - sig));
      }
      double dx = rstd * (dy * w * s - xhat * dot / l.dim);
      if (in.dh_in) dx += Bf(in.dh_in, off + c);
      if (out.dx) vmax[3] = fmax(vmax[3], Ratio(Bf(out.dx, off + c), dx, 1e-2, 1e-2));
      if (out.dz) vmax[4] = fmax(vmax[4], Ratio(Bf(out.dz, off + c), dz, 1e-2, 1e-2));
      if (dense.dx) dense.dx[r * l.dim + c] = dx;
      if (dense.dz) dense.dz[r * l.dim + c] = dz;
      dw_part[blockIdx.x * l.dim + c] += dy * xhat * s;  // this CTA owns the row
    }
  }
  for (int i = 0; i < 5; ++i) AtomicMaxPos(&viol[i], vmax[i]);
}

__global__ void SumPartsKernel(const double* parts, int64_t blocks, int64_t dim, double* dw) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= dim) return;
  double s = 0;
  for (int64_t b = 0; b < blocks; ++b) s += parts[b * dim + c];
  dw[c] = s;
}

__global__ void CountDiffKernel(const unsigned char* a, const unsigned char* b, int64_t n,
                                unsigned long long* count) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    local += a[i] != b[i];
  }
  if (local) atomicAdd(count, local);
}

__global__ void ScaleKernel(ScaleParams p) {
  auto* q = static_cast<__nv_bfloat16*>(p.p);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < p.n; i += int64_t{gridDim.x} * blockDim.x) {
    q[i] = __float2bfloat16_rn(__bfloat162float(q[i]) * p.scale);
  }
}

int Blocks(int64_t n) { return static_cast<int>(std::min<int64_t>((n + 255) / 256, 65536)); }

// Runs the reference; fills dw and, if dense is set, the dense outputs.
Violations RunReference(const RefInputs& in, const RefOutputs& out, std::vector<double>* dw,
                        HostRef* dense_host) {
  const int64_t dim = in.layout.dim;
  const int grid = static_cast<int>(std::min<int64_t>(std::max<int64_t>(in.layout.rows, 1), 1024));
  double *viol, *parts, *dw_dev;
  REF_CHECK(cudaMalloc(&viol, 5 * sizeof(double)));
  REF_CHECK(cudaMemset(viol, 0, 5 * sizeof(double)));
  REF_CHECK(cudaMalloc(&parts, grid * dim * sizeof(double)));
  REF_CHECK(cudaMemset(parts, 0, grid * dim * sizeof(double)));
  REF_CHECK(cudaMalloc(&dw_dev, dim * sizeof(double)));
  DenseOut dense{};
  const int64_t n = in.layout.rows * dim;
  if (dense_host) {
    REF_CHECK(cudaMalloc(&dense.y, n * sizeof(double)));
    REF_CHECK(cudaMalloc(&dense.dx, n * sizeof(double)));
    REF_CHECK(cudaMalloc(&dense.dz, n * sizeof(double)));
    REF_CHECK(cudaMalloc(&dense.rstd, in.layout.rows * sizeof(double)));
  }
  if (in.layout.rows > 0) CheckRowsKernel<<<grid, kThreads>>>(in, out, dense, viol, parts);
  SumPartsKernel<<<(dim + 255) / 256, 256>>>(parts, grid, dim, dw_dev);
  REF_CHECK(cudaGetLastError());
  REF_CHECK(cudaDeviceSynchronize());
  double v[5];
  REF_CHECK(cudaMemcpy(v, viol, sizeof(v), cudaMemcpyDeviceToHost));
  if (dw) {
    dw->resize(dim);
    REF_CHECK(cudaMemcpy(dw->data(), dw_dev, dim * sizeof(double), cudaMemcpyDeviceToHost));
  }
  if (dense_host) {
    dense_host->y.resize(n);
    dense_host->dx.resize(n);
    dense_host->dz.resize(n);
    dense_host->rstd.resize(in.layout.rows);
    REF_CHECK(cudaMemcpy(dense_host->y.data(), dense.y, n * 8, cudaMemcpyDeviceToHost));
    REF_CHECK(cudaMemcpy(dense_host->dx.data(), dense.dx, n * 8, cudaMemcpyDeviceToHost));
    REF_CHECK(cudaMemcpy(dense_host->dz.data(), dense.dz, n * 8, cudaMemcpyDeviceToHost));
    REF_CHECK(cudaMemcpy(dense_host->rstd.data(), dense.rstd, in.layout.rows * 8, cudaMemcpyDeviceToHost));
    for (double* p : {dense.y, dense.dx, dense.dz, dense.rstd}) REF_CHECK(cudaFree(p));
  }
  REF_CHECK(cudaFree(viol));
  REF_CHECK(cudaFree(parts));
  REF_CHECK(cudaFree(dw_dev));
  return Violations{v[0], v[1], v[2], v[3], v[4]};
}

uint16_t HostToBf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

std::vector<uint16_t> HostCopyBf16(const void* p, int64_t n) {
  std::vector<uint16_t> h(n);
  if (n > 0 && p) REF_CHECK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

double HostBf16(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool HasCudaDevice() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

void FillBf16(void* p, int64_t n, uint64_t seed, float scale, float offset) {
  FillBf16Kernel<<<Blocks(n), 256>>>(static_cast<__nv_bfloat16*>(p), n, seed, scale, offset);
  REF_CHECK(cudaGetLastError());
}

void FillF32(float* p, int64_t n, uint64_t seed, float scale, float offset) {
  FillF32Kernel<<<Blocks(n), 256>>>(p, n, seed, scale, offset);
  REF_CHECK(cudaGetLastError());
}

void SetBf16(void* p, int64_t index, float value) {
  const uint16_t bits = HostToBf16(value);
  REF_CHECK(cudaMemcpy(static_cast<uint16_t*>(p) + index, &bits, 2, cudaMemcpyHostToDevice));
}

Violations CheckRows(const RefInputs& in, const RefOutputs& out, std::vector<double>* dw_ref) {
  return RunReference(in, out, dw_ref, nullptr);
}

HostRef GpuReference(const RefInputs& in) {
  HostRef ref;
  RunReference(in, RefOutputs{}, &ref.dw, &ref);
  return ref;
}

HostRef CpuReference(const RefInputs& in) {
  const RowLayout& l = in.layout;
  const int64_t extent = l.rows == 0 ? 0 : ((l.rows - 1) / l.heads) * l.token_stride + (l.heads - 1) * l.head_stride + l.dim;
  const std::vector<uint16_t> x = HostCopyBf16(in.x, extent);
  const std::vector<uint16_t> res = HostCopyBf16(in.residual, in.residual ? extent : 0);
  const std::vector<uint16_t> z = HostCopyBf16(in.z, in.z ? extent : 0);
  const std::vector<uint16_t> dy = HostCopyBf16(in.dy, in.dy ? extent : 0);
  const std::vector<uint16_t> dh = HostCopyBf16(in.dh_in, in.dh_in ? extent : 0);
  std::vector<double> w(l.dim);
  if (in.w_fp32) {
    std::vector<float> wf(l.dim);
    REF_CHECK(cudaMemcpy(wf.data(), in.w, l.dim * 4, cudaMemcpyDeviceToHost));
    for (int64_t c = 0; c < l.dim; ++c) w[c] = wf[c];
  } else {
    const std::vector<uint16_t> wb = HostCopyBf16(in.w, l.dim);
    for (int64_t c = 0; c < l.dim; ++c) w[c] = HostBf16(wb[c]);
  }
  HostRef ref;
  ref.y.assign(l.rows * l.dim, 0);
  ref.dx.assign(l.rows * l.dim, 0);
  ref.dz.assign(l.rows * l.dim, 0);
  ref.dw.assign(l.dim, 0);
  ref.rstd.assign(l.rows, 0);
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t off = (r / l.heads) * l.token_stride + (r % l.heads) * l.head_stride;
    std::vector<double> h(l.dim);
    double ss = 0;
    for (int64_t c = 0; c < l.dim; ++c) {
      h[c] = res.empty() ? HostBf16(x[off + c])
                         : HostBf16(HostToBf16(static_cast<float>(HostBf16(x[off + c])) +
                                               static_cast<float>(HostBf16(res[off + c]))));
      ss += h[c] * h[c];
    }
    const double rstd = 1.0 / std::sqrt(ss / l.dim + in.eps);
    ref.rstd[r] = rstd;
    double dot = 0;
    for (int64_t c = 0; c < l.dim; ++c) {
      const double s = z.empty() ? 1.0 : HostBf16(z[off + c]) / (1 + std::exp(-HostBf16(z[off + c])));
      ref.y[r * l.dim + c] = h[c] * rstd * w[c] * s;
      if (!dy.empty()) dot += HostBf16(dy[off + c]) * w[c] * s * h[c] * rstd;
    }
    if (dy.empty()) continue;
    for (int64_t c = 0; c < l.dim; ++c) {
      const double xhat = h[c] * rstd, d = HostBf16(dy[off + c]);
      double s = 1;
      if (!z.empty()) {
        const double zz = HostBf16(z[off + c]), sig = 1 / (1 + std::exp(-zz));
        s = zz * sig;
        ref.dz[r * l.dim + c] = d * xhat * w[c] * sig * (1 + zz * (1 - sig));
      }
      ref.dx[r * l.dim + c] = rstd * (d * w[c] * s - xhat * dot / l.dim) + (dh.empty() ? 0 : HostBf16(dh[off + c]));
      ref.dw[c] += d * xhat * s;
    }
  }
  return ref;
}

double DwViolation(const std::vector<float>& dw, const std::vector<double>& ref, bool bf16) {
  const double rtol = 1e-4 + (bf16 ? std::ldexp(1.0, -8) : 0.0);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(dw[i] - ref[i]);
    const double v = std::isfinite(err) ? err / (1e-4 + rtol * std::fabs(ref[i])) : INFINITY;
    worst = std::max(worst, v);
  }
  return worst;
}

const void* ScaleBf16Kernel() { return reinterpret_cast<const void*>(&ScaleKernel); }

void ScaleBf16(void* p, int64_t n, float scale, void* stream) {
  ScaleKernel<<<ScaleGrid(n), kScaleBlock, 0, static_cast<cudaStream_t>(stream)>>>(
      ScaleParams{p, n, scale});
  REF_CHECK(cudaGetLastError());
}

int64_t CountDiff(const void* a, const void* b, int64_t bytes) {
  unsigned long long* count;
  REF_CHECK(cudaMalloc(&count, sizeof(*count)));
  REF_CHECK(cudaMemset(count, 0, sizeof(*count)));
  CountDiffKernel<<<Blocks(bytes), 256>>>(static_cast<const unsigned char*>(a),
                                          static_cast<const unsigned char*>(b), bytes, count);
  REF_CHECK(cudaGetLastError());
  unsigned long long h = 0;
  REF_CHECK(cudaMemcpy(&h, count, sizeof(h), cudaMemcpyDeviceToHost));
  REF_CHECK(cudaFree(count));
  return static_cast<int64_t>(h);
}

}  // namespace cake::testing
