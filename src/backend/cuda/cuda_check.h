// STRATA_CUDA_CHECK: the one macro that checks CUDA calls and turns failures into strata::Error.
// .cu files must not include core/error.h (fmt's consteval format checks do not pass nvcc), so the
// throw happens in cuda_error.cpp, compiled by the host compiler.
#pragma once

#include <cuda_runtime.h>

namespace strata::backend::cuda {
[[noreturn]] void throw_cuda_error(int status, const char* message, const char* file, int line);
// An internal error (a broken invariant of the backend), as strata::Error.
[[noreturn]] void throw_internal_error(const char* message);
}  // namespace strata::backend::cuda

#define STRATA_CUDA_CHECK(call)                                                                  \
  do {                                                                                           \
    const cudaError_t strata_cuda_status = (call);                                               \
    if (strata_cuda_status != cudaSuccess)                                                       \
      ::strata::backend::cuda::throw_cuda_error(static_cast<int>(strata_cuda_status),            \
                                                cudaGetErrorString(strata_cuda_status), __FILE__, \
                                                __LINE__);                                       \
  } while (0)
