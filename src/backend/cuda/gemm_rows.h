// The matmul of up to 64 activation rows on 4-bit weights (gemm_rows.cu): the codes dequantized
// in registers into bf16 tensor-core products, the prefill GEMM's numerics without its bf16 copy of
// the weights. For CUDA sources only (gemm.cu picks it).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <span>

#include "backend/weight.h"
#include "core/tensor.h"

namespace strata::backend::cuda {

constexpr int64_t kGemmRowsMax = 64;

// Whether gemm_rows takes w for `rows` activation rows.
bool gemm_rows_supported(const Weight& w, int64_t rows);

// Whether gemm_rows reads x for w in the paired order (bf16 scales: gemm_rows_activations' order)
// rather than as it is (activations rounded to bf16 in place).
bool gemm_rows_paired(const Weight& w);

// x's n floats (a whole number of 8) rounded to bf16 in the paired order, in a workspace.
const __nv_bfloat16* gemm_rows_activations(const Tensor& x, int64_t n);

// Whether gemm_rows takes ws in one launch: at most 4 weights of equal K, group size and scale
// dtype (each of them gemm_rows_supported).
bool gemm_rows_fusable(std::span<const Weight* const> ws);

// outs[i] [T, N_i] = xb [T, K] (bf16, in the order gemm_rows_paired says) · ws[i]ᵀ, in one launch
// (plus one that adds split sums).
void gemm_rows(const __nv_bfloat16* xb, int64_t T, std::span<const Weight* const> ws, std::span<const Tensor> outs);

}  // namespace strata::backend::cuda
