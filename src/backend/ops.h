// The op interface: plain functions over Tensor views. Each dispatches on the tensors' device to
// the CPU implementation (backend/cpu, the readable reference) or the CUDA one (backend/cuda).
// Activations are F32 [rows, features] unless stated; outputs are written into `out`, which the
// caller allocates. Model code only calls these.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/weight.h"
#include "core/tensor.h"

namespace strata::backend {

// out[t, :] = table[ids[t], :] (float or quantized table). out: [T, cols].
void embedding(const Weight& table, std::span<const int32_t> ids, const Tensor& out);

// out = x · wᵀ (x: [T, K], w: [N, K], out: [T, N]), float or quantized w.
void matmul(const Tensor& x, const Weight& w, const Tensor& out);

// x[t, :] += bias (bias: [N]).
void add_bias(const Tensor& x, const Tensor& bias);

// out = x / sqrt(mean(x²) + eps) · (w or 1 + w), per row of the last dimension (w: [D]).
// x and out are [rows, D]; in place is allowed.
void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out);

// Rotary position embedding, in place on x: [T, heads, head_dim]; the first rotary_dim dims of each
// head rotate. neox: pairs (i, i + rotary_dim/2) ("rotate half"); otherwise adjacent pairs
// (2i, 2i+1) (GPT-J / Meta interleaved). cos/sin are scaled by attention_factor (YaRN).
struct RopeParams {
  std::vector<float> inv_freq;  // rotary_dim / 2 frequencies
  int rotary_dim = 0;
  bool neox = true;
  float attention_factor = 1.0f;
};
void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params);

// Causal GQA attention of T new queries against a cache holding keys/values for positions
// [0, start_pos + T). q: [T, Hq, D]; k_cache, v_cache: [capacity, Hkv, D]; out: [T, Hq, D].
// Query t sits at position start_pos + t. window > 0 limits each query to the last `window` keys.
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t start_pos,
               float scale, int64_t window, const Tensor& out);

// out = SiLU(gate) ⊙ up, elementwise ([T, I] each).
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);

// a += b, elementwise.
void add(const Tensor& a, const Tensor& b);

// Copies rows of `src` into `dst` starting at row `dst_row` (same row width; used for caches).
void copy_rows(const Tensor& src, const Tensor& dst, int64_t dst_row);

// x = 0.
void zero(const Tensor& x);

// out = x ⊙ sigmoid(gate), elementwise (in place on x is allowed).
void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out);

// Splits each row of x ([rows, Σ widths]) into consecutive column blocks: outs[i] is [rows, width_i].
void split_columns(const Tensor& x, std::span<const Tensor> outs);

}  // namespace strata::backend
