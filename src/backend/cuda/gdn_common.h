// Pieces shared by the Gated DeltaNet kernels (gdn.cu, gdn_decode.cu, gdn_chunked.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strata::backend::cuda {

constexpr int kMaxConvK = 8;  // widest causal conv the kernels take

// The delta rule's chunked form (gdn_chunked.cu): whether it takes these head dims, and the rule
// over T tokens with gated_delta_rule's contract (pointers 16-byte aligned).
bool delta_rule_chunked_supported(int64_t dk, int64_t dv);
void delta_rule_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                        float* state, float* out, int T, int Hk, int Hv, int dv);

// The three dots a state row needs per token, over the kG lanes that share the row (each holds kNc
// float4 of it): S·k, S·q and k·q (o = α(S·q) + u(k·q) uses the old row for both). One accumulator
// per dot, then a shuffle reduction within the lane group.
template <int kNc, int kG>
__device__ inline void row_dots(const float4 (&s)[kNc], const float4 (&kc)[kNc],
                                const float4 (&qc)[kNc], float& sk, float& sq, float& kq) {
  sk = 0.0f, sq = 0.0f, kq = 0.0f;
#pragma unroll
  for (int c = 0; c < kNc; ++c) {
    sk += s[c].x * kc[c].x + s[c].y * kc[c].y + s[c].z * kc[c].z + s[c].w * kc[c].w;
    sq += s[c].x * qc[c].x + s[c].y * qc[c].y + s[c].z * qc[c].z + s[c].w * qc[c].w;
    kq += kc[c].x * qc[c].x + kc[c].y * qc[c].y + kc[c].z * qc[c].z + kc[c].w * qc[c].w;
  }
#pragma unroll
  for (int offset = kG / 2; offset > 0; offset /= 2) {
    sk += __shfl_xor_sync(0xffffffffu, sk, offset);
    sq += __shfl_xor_sync(0xffffffffu, sq, offset);
    kq += __shfl_xor_sync(0xffffffffu, kq, offset);
  }
}

// One token of the delta rule on a state row held that way, from its decay's log g, β and v:
//   u = β (v − α (S·k)),  S ← α S + u k,  returning o = α (S_old·q) + u (k·q).
template <int kNc, int kG>
__device__ inline float delta_row_step(float4 (&s)[kNc], const float4 (&kc)[kNc], const float4 (&qc)[kNc], float g,
                                       float beta, float v) {
  float sk, sq, kq;
  row_dots<kNc, kG>(s, kc, qc, sk, sq, kq);
  const float alpha = expf(g);
  const float u = beta * (v - alpha * sk);
#pragma unroll
  for (int c = 0; c < kNc; ++c) {
    s[c].x = fmaf(u, kc[c].x, alpha * s[c].x);
    s[c].y = fmaf(u, kc[c].y, alpha * s[c].y);
    s[c].z = fmaf(u, kc[c].z, alpha * s[c].z);
    s[c].w = fmaf(u, kc[c].w, alpha * s[c].w);
  }
  return alpha * sq + u * kq;
}

}  // namespace strata::backend::cuda
