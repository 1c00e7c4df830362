// CPU implementations of the ops in backend/ops.h (same signatures, namespace cpu). They are the
// readable reference the CUDA ops are tested against; OpenMP spreads rows over cores.
#pragma once

#include <cmath>

#include "backend/gdn.h"
#include "backend/moe.h"
#include "backend/ops.h"

namespace strata::backend::cpu {

// 1 / (1 + e^-x): the GDN's β and the shared expert's gate (topk_softmax, add_sigmoid_gated).
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void embedding(const Weight& table, std::span<const int32_t> ids, const Tensor& out);
// Up to this many rows of x, a float weight's matmul computes each row exactly as it computes a
// row alone (larger inputs, prompt chunks, take sgemm).
constexpr int64_t kFloatRowsMax = 64;
void matmul(const Tensor& x, const Weight& w, const Tensor& out);
void add_bias(const Tensor& x, const Tensor& bias);
void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out);
void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& w, float eps, bool one_plus_w,
                  const Tensor& out);
void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params);
// rows[t]: the cache row of token t's key and value (positions[t] itself unless the cache is paged).
void qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                        const RopeParams& rope_params, std::span<const int32_t> positions,
                        std::span<const int32_t> rows, const Tensor& q_out, const Tensor& gate_out,
                        const Tensor& k_cache, const Tensor& v_cache);
// rows[i]: the cache row of the sequence's token i, for every token a query reads; capacity: the
// tokens the sequence may have (per-thread scratch is sized to it once).
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
               std::span<const int32_t> rows, int64_t capacity, float scale, int64_t window,
               const Tensor& out);
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void add(const Tensor& a, const Tensor& b);
void store_rows(const Tensor& src, std::span<const int32_t> positions, const Tensor& dst);
void argmax(const Tensor& x, const Tensor& out);
void sample_row(const Tensor& x, const RowDraw& draw, const Tensor& out);
void mask_logits(const Tensor& x, const Tensor& mask);
void edit_logits(const Tensor& x, const Tensor& ids, const Tensor& counts, const Tensor& biases,
                 const LogitPenalties& penalties);

void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out);
void split_columns(const Tensor& x, std::span<const Tensor> outs);

void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& window, const Tensor& out);
void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
               const Tensor& beta);
void l2_norm(const Tensor& x, float eps, float scale, const Tensor& out);
void gdn_prepare(const Tensor& qkv, const Tensor& conv_weight, const Tensor& window, const Tensor& a,
                 const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, float l2_eps, float q_scale,
                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta);
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const Tensor& out, DeltaRuleForm form);
void rms_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, float eps, const Tensor& out);

void topk_softmax(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids, const Tensor& weights,
                  bool shared_last);
void gather_rows(const Tensor& src, std::span<const int32_t> rows, const Tensor& out);
void scatter_add_rows(const Tensor& src, std::span<const int32_t> rows, std::span<const float> scale,
                      const Tensor& dst);
void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, std::span<const Weight> gate,
                 std::span<const Weight> up, std::span<const Weight> down, const Tensor& out);
void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate);

// Dequantizes rows [row0, row0 + n) of a quantized weight into dst ([n, cols] F32).
void dequantize_rows(const Weight& w, int64_t row0, int64_t n, float* dst);

}  // namespace strata::backend::cpu
