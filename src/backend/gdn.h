// Ops of the Gated DeltaNet ("linear attention") mixer of Qwen3.5 / Qwen3-Next: the causal conv
// window, the gates, the L2 norm, the gated delta rule (recurrent and chunked forms) and the gated
// RMSNorm. Same contract as backend/ops.h: F32 views, outputs allocated by the caller.
#pragma once

#include <span>

#include "core/tensor.h"

namespace strata::backend {

struct MatmulFeed;  // ops.h

// Causal depthwise conv1d over T new rows, then SiLU. x: [T, C]; weight: [C, K], where tap K-1
// multiplies the current row; window: [K-1, C], the K-1 rows of x before these (oldest first,
// zeros at the start of a sequence), advanced in place to the last K-1 rows; out: [T, C], not x.
void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& window, const Tensor& out);

// Per row t and value head j (a, b: [T, Hv]; a_log, dt_bias: [Hv]), in fp32:
// beta = sigmoid(b), g = −exp(a_log) · softplus(a + dt_bias) (the log of the decay α = exp(g)).
void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
               const Tensor& beta);

// out = x / sqrt(Σx² + eps) · scale, per row of the last dimension; in place is allowed.
void l2_norm(const Tensor& x, float eps, float scale, const Tensor& out);

// The whole input side of the mixer after its projections, as one op:
//   u = causal_conv1d_silu(qkv) (advancing window);  [q | k | v] = the columns of u;
//   q = l2_norm(q) · q_scale, k = l2_norm(k) per key head;  g, beta = gdn_gates(a, b).
// qkv: [T, 2·Hk·dk + Hv·dv]; conv_weight: [C, K]; window: [K-1, C] (as for causal_conv1d_silu);
// a, b, g, beta: [T, Hv]; a_log, dt_bias: [Hv]; q, k: [T, Hk, dk]; v: [T, Hv, dv].
void gdn_prepare(const Tensor& qkv, const Tensor& conv_weight, const Tensor& window, const Tensor& a,
                 const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, float l2_eps, float q_scale,
                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta);

// The gated delta rule over T tokens, per value head j with key head κ = j / (Hv / Hk):
//   S ← α S;  S ← S + k (β (v − Sᵀk))ᵀ;  o = Sᵀ q
// q, k: [T, Hk, dk] (L2-normalised; q also scaled by dk^-0.5); v: [T, Hv, dv]; g, beta: [T, Hv];
// state: [Hv, dv, dk] fp32, read and updated in place; out: [T, Hv, dv].
// kRecurrent applies the rule token by token (decode); kChunked uses the WY/UT chunked form with
// chunks of 64 tokens (prefill). Both compute the same function.
enum class DeltaRuleForm { kRecurrent, kChunked };
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const Tensor& out, DeltaRuleForm form);

// out = x / sqrt(mean(x²) + eps) · w ⊙ SiLU(z), per row of the last dimension (x, z, out: [rows, D];
// w: [D], a plain weight, never 1-centred).
void rms_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, float eps, const Tensor& out);

// The mixer's core between its projections, as one op with the contracts above:
//   gdn_prepare(qkv, conv_weight, window, a, b, a_log, dt_bias, l2_eps, q_scale) → q, k, v, g, beta;
//   gated_delta_rule(q, k, v, g, beta, state, form) → o;  rms_norm_gated(o, norm, z, norm_eps) → y.
// z: [T, Hv·dv]; o: [T, Hv, dv]; y: [T, Hv·dv]. q, k, v, g, beta and o are scratch: a backend that
// fuses the steps (CUDA, one token) does not write them.
struct GdnCore {
  Tensor qkv, z, a, b;                       // the step's input projections
  Tensor conv_weight, a_log, dt_bias, norm;  // the layer's weights
  Tensor window, state;                      // its recurrent state, advanced in place
  Tensor q, k, v, g, beta, o;                // scratch
  float l2_eps = 1e-6f, q_scale = 1.0f, norm_eps = 1e-6f;
  DeltaRuleForm form = DeltaRuleForm::kRecurrent;
};
// `feed`: y's form for the out projection (see MatmulFeed in ops.h).
void gdn_core(const GdnCore& core, const Tensor& y, MatmulFeed* feed = nullptr);

// gdn_core for T sequences of one token each (a batched decode step): row t of the core's qkv, z,
// a, b, scratch and y is sequence t's, whose window and state are windows[t] and states[t]
// (core.window and core.state are not used). Each row's results are bit for bit those of gdn_core
// on that row alone; on CUDA the rows run as one launch where the one-token kernel takes the shape.
void gdn_core_rows(const GdnCore& core, std::span<const Tensor> windows, std::span<const Tensor> states,
                   const Tensor& y);

// gdn_core for the T positions of one sequence's verify step, one token at a time: position t runs
// as a one-token gdn_core on row t, and the window and state after it are also left in
// after_windows[t] and after_states[t] (t < T - 1; core.window and core.state end as after the
// last), so keeping any prefix of the drafts is one copy. Each position's results are bit for bit
// those of a one-token gdn_core; on CUDA the positions run as one launch where the one-token kernel
// takes the shape (the state stays with its threads from one position to the next).
void gdn_core_positions(const GdnCore& core, std::span<const Tensor> after_windows,
                        std::span<const Tensor> after_states, const Tensor& y);

}  // namespace strata::backend
