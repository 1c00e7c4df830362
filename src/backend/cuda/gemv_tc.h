// Decode matmul of one activation row against MLX affine 4/8-bit weights on tensor cores
// (gemv_tc.cu); cuda::matmul uses it for T = 1 where the shape allows.
#pragma once

#include <span>

#include "backend/cuda/feed.h"
#include "backend/weight.h"

namespace strata::backend::cuda {

// Whether gemv_tc serves w: 4 or 8 bits, groups of 32/64/128, rows a whole number of 128-byte
// tiles (K a multiple of 256 at 4 bits, 128 at 8), F32/BF16/F16 scales, and K small enough that a
// block holds all its activations in shared memory (4 bytes each and a little more: K up to about 50K on an H100).
bool gemv_tc_supported(const Weight& w);

// outs[i][n] = Σ_k x[k] · ws[i][n, k] for up to 4 weights of equal K, bits, group size and scale
// dtype, in one launch (x: K floats on the device). With a gate (K floats), the activations are
// SiLU(gate[k]) · x[k] instead, as silu_mul computes them.
// `form`: the activations' form from a feed (feed.h; gate is then ignored, the form has the product
// in it), or null. `glu_form`: for gate and up, where gemv_tc_glu_feed_ok, the form of
// SiLU(outs[0]) ⊙ outs[1] to write for the down projection (empty: none).
void gemv_tc(const float* x, const float* gate, std::span<const Weight* const> ws,
             std::span<float* const> outs, const uint4* form = nullptr,
             const FeedForm& glu_form = {});

// gemv_tc for T activation rows (x: [T, K]; outs[i]: [T, rows of ws[i]]; with a gate, [T, K] too),
// every row's outputs bit for bit those gemv_tc gives it alone: the multi-row kernel
// (gemv_tc_rows.cu) takes the one-row launch's k slices and folds each run as it does, so a
// sequence's decode gives the same logits whatever else its step carries. `forms`: the T rows'
// forms back to back in the multi-row layout (gemv_math::b_vec; a norm's feed of T rows), or null
// to convert them here.
void gemv_tc_rows(const float* x, const float* gate, int64_t T, std::span<const Weight* const> ws,
                  std::span<float* const> outs, const uint4* forms = nullptr);

// The multi-row kernel's launch (gemv_tc_rows.cu) over the T rows' forms, with the one-row
// launch's k slices.
void launch_gemv_rows(const uint4* forms, int64_t T, std::span<const Weight* const> ws,
                      std::span<float* const> outs, int k_warps);

// The same from shared memory (gemv_tc_staged.cu): a block stages each k-tile's codes and every
// row's forms once for all its warps. Faster from about 17 rows (Tuning::gemv_staged_rows).
void launch_gemv_staged(const uint4* forms, int64_t T, std::span<const Weight* const> ws,
                        std::span<float* const> outs, int k_warps);

// Whether gemv_tc over gate and up (ws) can write the input form of `down`: two weights of equal
// rows, down's input that wide, of their bits and group size.
bool gemv_tc_glu_feed_ok(std::span<const Weight* const> ws, const Weight& down);

}  // namespace strata::backend::cuda
