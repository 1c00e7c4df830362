// Decode matmul of one activation row against MLX affine 4/8-bit weights on tensor cores
// (gemv_tc.cu); cuda::matmul uses it for T = 1 where the shape allows.
#pragma once

#include <span>

#include "backend/weight.h"

namespace strata::backend::cuda {

// Whether gemv_tc serves w: 4 or 8 bits, groups of 32/64/128, rows a whole number of 128-byte
// tiles (K a multiple of 256 at 4 bits, 128 at 8), F32/BF16/F16 scales, and K small enough that a
// block holds all its activations in shared memory (4 bytes each and a little more: K up to about 50K on an H100).
bool gemv_tc_supported(const Weight& w);

// outs[i][n] = Σ_k x[k] · ws[i][n, k] for up to 4 weights of equal K, bits, group size and scale
// dtype, in one launch (x: K floats on the device). With a gate (K floats), the activations are
// SiLU(gate[k]) · x[k] instead, as silu_mul computes them.
void gemv_tc(const float* x, const float* gate, std::span<const Weight* const> ws, std::span<float* const> outs);

}  // namespace strata::backend::cuda
