// Status plumbing shared by every layer: early returns on error and the
// translation of CUDA errors into absl::Status.
#ifndef CAKE_OPS_STATUS_H_
#define CAKE_OPS_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define CAKE_STATUS_CONCAT_INNER_(a, b) a##b
#define CAKE_STATUS_CONCAT_(a, b) CAKE_STATUS_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define CAKE_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::absl::Status cake_status_ = (expr);           \
    if (!cake_status_.ok()) return cake_status_;    \
  } while (0)

// `lhs = *expr` when `expr` (a StatusOr) is OK; otherwise returns its Status.
#define CAKE_ASSIGN_OR_RETURN(lhs, expr) \
  CAKE_ASSIGN_OR_RETURN_IMPL_(CAKE_STATUS_CONCAT_(cake_statusor_, __LINE__), lhs, expr)
#define CAKE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

// Turns a failed CUDA runtime call into InternalError naming the call and the
// CUDA error string. Usable in any function that returns Status or StatusOr.
#define CAKE_CUDA_RETURN_IF_ERROR(call)                                        \
  do {                                                                         \
    const cudaError_t cake_cuda_err_ = (call);                                 \
    if (cake_cuda_err_ != cudaSuccess) {                                       \
      return ::absl::InternalError(::absl::StrCat(                             \
          #call, " failed: ", cudaGetErrorName(cake_cuda_err_), ": ",          \
          cudaGetErrorString(cake_cuda_err_)));                                \
    }                                                                          \
  } while (0)

#endif  // CAKE_OPS_STATUS_H_
