// The matmul of up to 64 activation rows on 4-bit weights (gemm_rows.cu): the codes dequantized
// in registers into bf16 tensor-core products, the prefill GEMM's numerics without its bf16 copy of
// the weights. For CUDA sources only (gemm.cu picks it).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/weight.h"
#include "core/tensor.h"

namespace strata::backend::cuda {

constexpr int64_t kGemmRowsMax = 64;

// Whether gemm_rows takes w for `rows` activation rows.
bool gemm_rows_supported(const Weight& w, int64_t rows);

// out [T, N] = xb [T, K] (bf16) · wᵀ.
void gemm_rows(const __nv_bfloat16* xb, int64_t T, const Weight& w, const Tensor& out);

}  // namespace strata::backend::cuda
