/* Cake's C API: plan a training step, bind device buffers, run it.
 *
 * The whole of it is what a Python trainer (through ctypes) or a framework's
 * custom op needs: plan a StepSpec given as text proto for the current
 * device, read the workspace size, build a Step (the plan's CUDA graph) on
 * raw device pointers, replay it or launch its kernels eagerly on a stream
 * (also inside the caller's own stream capture), rebind it, and read the
 * last error.
 *
 * Every call that can fail returns a cake_status: CAKE_OK (0) or the
 * absl::StatusCode of the failure (3: invalid argument, 9: failed
 * precondition, 13: internal, ...). cake_last_error() then holds the
 * message, which names the field or binding and the value. A failed call
 * changes nothing: no object is created, nothing is launched, no caller
 * buffer is written.
 *
 * Streams are cudaStream_t passed as void* (NULL is the legacy default
 * stream), so that this header needs no CUDA header. Objects are not
 * thread-safe: use one from one thread at a time.
 *
 * Link: -lcake (libcake.so). It needs the CUDA driver, and protobuf and
 * Abseil as shared libraries. */
#ifndef CAKE_C_API_H_
#define CAKE_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CAKE_C_API_VERSION 1

typedef int cake_status;
#define CAKE_OK 0

typedef struct cake_plan cake_plan;
typedef struct cake_step cake_step;

/* Device pointers by role, as in the spec's layout: activations BF16
 * (x, residual, h, y, dy, dh_in, dx, z, dz), w and dw [dim] in the weight
 * and dw dtypes, rstd FP32 [tokens * heads]. Roles a plan does not use may
 * stay NULL. Zero the struct before filling it. workspace may be NULL: the
 * step then owns one of cake_plan_workspace_bytes(). */
typedef struct cake_bindings {
  const void* x;
  const void* residual;
  void* h;
  const void* w;
  void* y;
  float* rstd;
  const void* z;
  const void* dy;
  const void* dh_in;
  void* dx;
  void* dz;
  void* dw;
  void* workspace;         /* 256-byte aligned */
  int64_t workspace_bytes; /* the size of workspace */
} cake_bindings;

/* The API version the library was built with (CAKE_C_API_VERSION). */
int cake_api_version(void);

/* The message of the last failed call on this thread; "" after a success.
 * Valid until the next call on this thread. */
const char* cake_last_error(void);

/* Plans the StepSpec in `spec_text` (text proto, see proto/cake/step.proto)
 * for the current CUDA device. */
cake_status cake_plan_create(const char* spec_text, cake_plan** plan);
void cake_plan_destroy(cake_plan* plan);
/* Bytes of workspace the plan's launches need (0: none). */
int64_t cake_plan_workspace_bytes(const cake_plan* plan);
/* The plan's fingerprint (hex), valid while the plan lives. */
const char* cake_plan_fingerprint(const cake_plan* plan);

/* Runs the plan's launches in order on `stream`, without a graph. Checks
 * every binding first. Safe inside a capture of `stream`. */
cake_status cake_launch(const cake_plan* plan, const cake_bindings* bindings, void* stream);

/* Builds and instantiates the plan's CUDA graph on `bindings`. The step
 * keeps its own copy of the plan. */
cake_status cake_step_create(const cake_plan* plan, const cake_bindings* bindings,
                             cake_step** step);
void cake_step_destroy(cake_step* step);
/* One launch of the step's graph on `stream`. */
cake_status cake_step_replay(cake_step* step, void* stream);
/* Points the step at other buffers (no re-instantiation). */
cake_status cake_step_rebind(cake_step* step, const cake_bindings* bindings);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* CAKE_C_API_H_ */
