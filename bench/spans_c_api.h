/* CUPTI spans for the peer harness (bench/peers.py, through ctypes): the
 * same recorder `cake bench` uses (bench/cupti_spans.h), and its L2 scrub,
 * as plain C, in libcake_spans.so, which needs nothing but libc, the CUDA
 * driver and, at run time, libcupti (the CUDA runtime is linked in).
 *
 *   cake_spans_open(why, n)   1 if CUPTI activity tracing is on, else 0 and
 *                             the reason in why[0..n)
 *   cake_spans_begin()        with the device idle: marks the start
 *   cake_spans_end(...)       after the work completed: its GPU span in us,
 *                             kernel and memset/memcpy record counts and a
 *                             hash of the kernel set; 1 ok, 0 and why.
 *   cake_spans_scrub_l2(...)  before the harness writes its flush buffer on
 *                             `stream` (a cudaStream_t): the L2 scrub of
 *                             `cake bench` (bench/l2_flush.h) with it, so that
 *                             lines kept with the evict-last policy leave L2
 *                             too; 1 ok, 0 and why. Needs no CUPTI. */
#ifndef CAKE_BENCH_SPANS_C_API_H_
#define CAKE_BENCH_SPANS_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int cake_spans_open(char* why, size_t why_bytes);
void cake_spans_begin(void);
int cake_spans_end(double* us, int* kernels, int* memops, uint64_t* set_hash, char* why,
                   size_t why_bytes);
int cake_spans_scrub_l2(void* buffer, uint64_t bytes, uint32_t value, void* stream, char* why,
                        size_t why_bytes);

#ifdef __cplusplus
}
#endif

#endif /* CAKE_BENCH_SPANS_C_API_H_ */
