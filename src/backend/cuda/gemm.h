// Prefill matmul on tensor cores (cuBLAS), used by cuda::matmul for more than 8 activation rows.
#pragma once

#include <cstdint>
#include <span>

#include "backend/weight.h"
#include "core/tensor.h"

namespace strata::backend::cuda {

// out = x · wᵀ. F32 weights: an fp32 GEMM (exact to rounding, as the CPU). MLX affine weights
// (4/8-bit, scales and biases F32, BF16 or F16): tiles of rows dequantized to bf16 (s·q + b
// rounded once) in a workspace, x rounded to bf16, fp32 accumulation.
void gemm(const Tensor& x, const Weight& w, const Tensor& out);
// The same for weights that share x (q/k/v, gate/up): x is rounded to bf16 once.
void gemm_group(const Tensor& x, std::span<const Weight* const> ws, std::span<const Tensor> outs);

// Rows of a quantized [N, K] weight dequantized per cuBLAS call: N, or a multiple of 128 (tests
// use it to reach several tiles and a ragged last one).
int64_t gemm_tile_rows(int64_t N, int64_t K);

}  // namespace strata::backend::cuda
