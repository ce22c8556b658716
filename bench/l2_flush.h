// The kernels that make L2 cold between timed spans (ColdL2 in
// bench/timing.h, and bench/peers.py through libcake_spans.so). Plain CUDA,
// no Abseil, so that libcake_spans.so can carry them.
#ifndef CAKE_BENCH_L2_FLUSH_H_
#define CAKE_BENCH_L2_FLUSH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cake::bench {

// Plain 16-byte stores of `value` over `bytes` (a multiple of 16) at `buffer`:
// the way a framework's fill kernel writes it (PyTorch's `fill_`).
cudaError_t LaunchFillKernel(void* buffer, int64_t bytes, uint32_t value, cudaStream_t stream);

// Empties L2, for the plain write of the flush buffer that follows it. A
// plain write of twice the L2 does not evict the lines that kernels loaded or
// stored with the evict-last policy (`createpolicy ... L2::evict_last`, as
// torch.compile's Triton kernels load their inputs): lines of normal priority
// leave before them, and on the H200 most of a 12.6 MB input of such a kernel
// was still in L2 after it. The scrub writes the buffer (`bytes`, a multiple
// of 128 at a 128-byte aligned address, at least twice the L2) with the
// evict-last policy itself, so that in every set the oldest lines leave first
// whatever their priority, then discards the buffer's lines from L2 without
// writing them back (their contents become undefined). The plain write after
// it then leaves L2 as it would have left it, without the kept lines.
cudaError_t LaunchL2Scrub(void* buffer, int64_t bytes, uint32_t value, cudaStream_t stream);

// Copies `bytes` (a multiple of 16, both buffers 16-byte aligned) from `src`
// to `dst` with the SMs: one CTA of 256 threads per 16 KB, each thread's four
// 16-byte loads issued before its stores. The benchmark's same-bytes copy
// (BenchRow.same_bytes_copy_us): a kernel that moves a row's bytes and does
// nothing else, where cudaMemcpyAsync's copy engine takes several
// microseconds more at a few MB (the faster of the two counts).
cudaError_t LaunchCopyKernel(void* dst, const void* src, int64_t bytes, cudaStream_t stream);

}  // namespace cake::bench

#endif  // CAKE_BENCH_L2_FLUSH_H_
