// Prefill matmul on tensor cores (cuBLAS), used by cuda::matmul for more than 8 activation rows.
#pragma once

#include "backend/weight.h"
#include "core/tensor.h"

namespace strata::backend::cuda {

// out = x · wᵀ. F32 weights: an fp32 GEMM (exact to rounding, as the CPU). MLX affine weights:
// tiles of rows dequantized to bf16 in a workspace, x rounded to bf16, fp32 accumulation.
void gemm(const Tensor& x, const Weight& w, const Tensor& out);

}  // namespace strata::backend::cuda
