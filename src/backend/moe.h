// Ops of the mixture-of-experts FFN: the router (softmax, top-k), moving token rows to and from an
// expert's batch, and the sigmoid-gated shared expert. Same contract as backend/ops.h.
#pragma once

#include <span>

#include "core/tensor.h"

namespace strata::backend {

// Per row of logits ([T, E]): p = softmax(logits) in fp32, the k largest (ties: lower index first),
// divided by their sum when renormalize. ids: I32 [T, k]; weights: F32 [T, k].
void topk_softmax(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids, const Tensor& weights);

// out[i, :] = src[rows[i], :] (out: [rows.size(), C]).
void gather_rows(const Tensor& src, std::span<const int32_t> rows, const Tensor& out);

// dst[rows[i], :] += scale[i] · src[i, :].
void scatter_add_rows(const Tensor& src, std::span<const int32_t> rows, std::span<const float> scale,
                      const Tensor& dst);

// x[r, :] += sigmoid(gate[r]) · y[r, :] (gate: [rows, 1]).
void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate);

}  // namespace strata::backend
