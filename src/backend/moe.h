// Ops of the mixture-of-experts FFN: the router (softmax, top-k), the routed experts with the
// routing left on the device, and the sigmoid-gated shared expert. Same contract as backend/ops.h.
#pragma once

#include <span>

#include "backend/memory.h"
#include "backend/weight.h"
#include "core/tensor.h"

namespace strata::backend {

// Per row of logits ([T, E]): p = softmax(logits) in fp32, the k largest (ties: lower index first),
// divided by their sum when renormalize. ids: I32 [T, k]; weights: F32 [T, k].
// With shared_last, the last column of logits ([T, E + 1]) is a shared expert's gate logit, not a
// routed expert's: the softmax and top-k take the first E columns, and ids and weights ([T, k + 1])
// get a last slot holding expert E with weight sigmoid(gate logit), computed as 1 / (1 + e^-g). So
// moe_experts, given the shared expert as expert E, adds it after the routed ones, as the
// add_sigmoid_gated of its output would.
void topk_softmax(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids, const Tensor& weights,
                  bool shared_last = false);

// The routed experts, read from the router's output where it lies (a GPU step needs no round trip
// to the host, so it can be replayed as a graph):
//   out[t, :] = Σ_i weights[t, i] · down_e(SiLU(gate_e · x[t]) ⊙ (up_e · x[t])),  e = ids[t, i],
// the terms added in ascending expert id; an id outside [0, E) (a NaN router row) adds nothing.
// x, out: [T, H]; ids (I32, distinct within a row) and weights: [T, k]; gate, up: E weights [I, H];
// down: E weights [H, I], all in one format; table: expert_table() of them. The CPU runs each
// expert once on the rows routed to it. CUDA, with k ≤ kMoeExpertsMaxPerToken, runs a few tokens'
// (token, expert) pairs each as a row of its own, and a prompt's pairs in chunks sorted by expert:
// quantized experts as a grouped GEMM on tensor cores (bf16 inputs), float ones pair by pair.
constexpr int64_t kMoeExpertsMaxPerToken = 64;
void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, std::span<const Weight> gate,
                 std::span<const Weight> up, std::span<const Weight> down, const Tensor& table, const Tensor& out);

// What moe_experts needs to find the experts' weights on `device`: on a GPU, a table of their
// addresses (built once, when the weights are loaded); on the CPU, nothing (an empty buffer).
Buffer expert_table(Device device, std::span<const Weight> gate, std::span<const Weight> up,
                    std::span<const Weight> down);

// x[r, :] += sigmoid(gate[r]) · y[r, :] (gate: [rows, 1]).
void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate);

}  // namespace strata::backend
