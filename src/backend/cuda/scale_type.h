// The dtypes a quantized weight's scales and biases may have on the GPU: F32 (converted on load, as
// on the CPU), or the checkpoint's own BF16/F16 (what the loader keeps on CUDA: half the bytes a
// decode step reads for them). Kernels take the type as a template parameter; with_scale_type
// picks the instance for a weight.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/weight.h"

namespace strata::backend::cuda {

__device__ __forceinline__ float scale_to_float(float v) { return v; }
__device__ __forceinline__ float scale_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float scale_to_float(__half v) { return __half2float(v); }

// Calls f(T{}) with T the C++ type of `dtype`: F32, BF16, or (where kHalf) F16; throws `what` for
// any other dtype.
template <bool kHalf = true, typename F>
void with_float_type(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kF32:
      f(float{});
      return;
    case DType::kBF16:
      f(__nv_bfloat16{});
      return;
    case DType::kF16:
      if constexpr (kHalf) {
        f(__half{});
        return;
      }
      break;
    default:
      break;
  }
  throw_internal_error(what);
}

// Calls f(S{}) with S the C++ type of w's scales (its biases share the dtype).
template <typename F>
void with_scale_type(const Weight& w, F&& f) {
  if (w.scales.dtype != w.biases.dtype)
    throw_internal_error("quantized weight: scales and biases differ in dtype");
  with_float_type(w.scales.dtype, "quantized weight scales: not F32, BF16 or F16",
                  std::forward<F>(f));
}

}  // namespace strata::backend::cuda
