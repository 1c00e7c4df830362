// CPU implementations of the ops in backend/ops.h (same signatures, namespace cpu). They are the
// readable reference the CUDA ops are tested against; OpenMP spreads rows over cores.
#pragma once

#include "backend/ops.h"

namespace strata::backend::cpu {

void embedding(const Weight& table, std::span<const int32_t> ids, const Tensor& out);
void matmul(const Tensor& x, const Weight& w, const Tensor& out);
void add_bias(const Tensor& x, const Tensor& bias);
void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out);
void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params);
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t start_pos,
               float scale, int64_t window, const Tensor& out);
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void add(const Tensor& a, const Tensor& b);
void copy_rows(const Tensor& src, const Tensor& dst, int64_t dst_row);

// Dequantizes rows [row0, row0 + n) of a quantized weight into dst ([n, cols] F32).
void dequantize_rows(const Weight& w, int64_t row0, int64_t n, float* dst);

}  // namespace strata::backend::cpu
