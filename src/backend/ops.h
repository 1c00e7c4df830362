// The op interface: plain functions over Tensor views. Each dispatches on the tensors' device to
// the CPU implementation (backend/cpu, the readable reference) or the CUDA one (backend/cuda).
// Activations are F32 [rows, features] unless stated; outputs are written into `out`, which the
// caller allocates. Model code only calls these.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/row_draw.h"
#include "backend/weight.h"
#include "core/tensor.h"

namespace strata::backend {

// Rows of a decode step that the device computes each exactly as alone, for a model whose decode
// matmuls are `weights` (the quantized ones it runs on every row: not a MoE router, see
// kFloatInvariantRows): up to this many rows of every op, each row's result is the same bits
// whatever the other rows hold or how many there are, so a model may run several sequences'
// decode tokens as one step. The CPU: 64 for float weights (each output summed in one order whatever
// the rows), 8 where any is quantized (the fused kernel's sums). CUDA: 64 where every
// weight takes the tensor-core decode matmul (one row and 2 to 64 rows fold their sums alike, and
// the norms feeding them write every row's form as one row's; the MoE token kernels take each
// token's experts alone for up to 64 tokens), else 8 (the CUDA-core kernels keep a row's sums for
// up to 8 rows). With the batch_invariant tuning off, CUDA gives 64: batches of more than 24 rows
// then take the prefill GEMM, and their rows are no longer exactly as alone.
int64_t batch_invariant_rows(Device device, std::span<const Weight* const> weights);

// The rows a float (unquantized) weight's matmul keeps each exactly as alone, on every device: a
// model runs a float matrix on a wider decode batch (a MoE router) this many rows at a time.
constexpr int64_t kFloatInvariantRows = 8;

// out[t, :] = table[ids[t], :] (float or quantized table). ids: I32 [T] on the table's device
// (callers check the ids against the vocabulary first: device code cannot report a bad one);
// out: [T, cols].
void embedding(const Weight& table, const Tensor& ids, const Tensor& out);

// A decode matmul's input, handed over in the form the device's matmul consumes. The CUDA decode
// matmul (one activation row, MLX 4/8-bit weights) turns its F32 input into integer limbs and
// per-run scales in every block before it multiplies. An op given a feed writes that form once,
// beside its F32 output, and a matmul given the same feed copies it instead of converting.
// Nothing else changes: the F32 output is written as before, and the matmul's result is the same
// bit for bit. A feed serves one producer and the matmuls after it that read its output:
//   MatmulFeed feed{&w};  add_rms_norm(x, delta, norm, eps, false, h, &feed);  matmul(h, w, out,
//   &feed);
// `weight` is the matmul the output feeds; its bits, group size and input width fix the form.
// The producer records in `source` the output it wrote the form for, or null where it wrote none
// (the CPU, more than one row, a weight the decode matmul does not take), and a matmul uses the
// form only when `source` is its own input. Two feeds alive at once (an op that consumes one
// and produces another) take different slots (0 or 1).
struct MatmulFeed {
  const Weight* weight = nullptr;
  int slot = 0;
  const void* source = nullptr;  // set by the producer
  void* form = nullptr;          // device memory of the form, set by the producer

  // What a producer that writes no form records (null is allowed: no feed).
  static void none(MatmulFeed* feed) {
    if (feed != nullptr) feed->source = nullptr, feed->form = nullptr;
  }
};

// out = x · wᵀ (x: [T, K], w: [N, K], out: [T, N]), float or quantized w. `feed`: x's form, where
// the op that wrote x prepared it (see MatmulFeed).
void matmul(const Tensor& x, const Weight& w, const Tensor& out, const MatmulFeed* feed = nullptr);

// outs[i] = x · ws[i]ᵀ for weights that share the input (q/k/v, gate/up, the GDN input
// projections): one launch where the device can fuse them (decode on CUDA), else one each.
// `feed`: x's form, as for matmul. `glu_feed`: for gate and up (two weights of equal rows), a feed
// of SiLU(outs[0]) ⊙ outs[1] for the down projection (silu_mul_matmul); its source is outs[1].
void matmul_group(const Tensor& x, std::span<const Weight* const> ws, std::span<const Tensor> outs,
                  const MatmulFeed* feed = nullptr, MatmulFeed* glu_feed = nullptr);

// x[t, :] += bias (bias: [N]).
void add_bias(const Tensor& x, const Tensor& bias);

// out = x / sqrt(mean(x²) + eps) · (w or 1 + w), per row of the last dimension (w: [D]).
// x and out are [rows, D]; in place is allowed.
// `feed`: out's form for the matmul it feeds (see MatmulFeed).
void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out,
              MatmulFeed* feed = nullptr);

// x += delta (every row), then out = rms_norm(x) of the last out.dim(0) rows of x: all of them
// (the residual add before a layer's norm), or only the last (the final norm when only the last
// token's logits are wanted). x, delta: [rows, D]; out: [R, D], R ≤ rows, not x.
// `feed`: out's form for the matmul it feeds (see MatmulFeed).
void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& w, float eps, bool one_plus_w,
                  const Tensor& out, MatmulFeed* feed = nullptr);

// Rotary position embedding, in place on x: [T, heads, head_dim]; the first rotary_dim dims of each
// head rotate. neox: pairs (i, i + rotary_dim/2) ("rotate half"); otherwise adjacent pairs
// (2i, 2i+1) (GPT-J / Meta interleaved). cos/sin are scaled by attention_factor (YaRN).
struct RopeParams {
  std::vector<float> inv_freq;  // rotary_dim / 2 frequencies
  int rotary_dim = 0;
  bool neox = true;
  float attention_factor = 1.0f;
};
// positions: I32 [T] on x's device.
void rope(const Tensor& x, const Tensor& positions, const RopeParams& params);

// Where a sequence's tokens lie in a KV cache ([rows, Hkv, D]). Plain (table empty): the cache is
// the sequence's own and token i lies in row i. Paged: the cache is a pool of blocks of
// block_tokens rows (a power of two) that many sequences share, and token i lies in row
// table[i / block_tokens] * block_tokens + i % block_tokens. table: I32 [blocks] on the cache's
// device, one entry for every block the sequence may hold; the entries its positions reach name
// blocks of the pool.
struct KvBlocks {
  Tensor table;
  int64_t block_tokens = 0;
  bool paged() const { return !table.empty(); }
  // The tokens a sequence can have in `cache`.
  int64_t capacity(const Tensor& cache) const {
    return paged() ? table.numel() * block_tokens : cache.dim(0);
  }
};

// Causal GQA attention of T new queries against a KV cache. q: [T, Hq, D]; k_cache, v_cache:
// [capacity, Hkv, D], F32 or BF16 (both alike; BF16 values are widened to fp32 as they are read);
// positions: I32 [T] on q's device, increasing; out: [T, Hq, D]. Query t sits at position
// positions[t] and attends to cache rows [0, positions[t]]; window > 0 limits it to the
// last `window` of them. kv_bound (host) is an upper bound on positions[T-1] + 1, at most the
// capacity: it sizes the work where positions are only known on the device (a captured graph
// serves every step whose positions stay below its bound). `blocks`: where the tokens lie.
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
               int64_t kv_bound, float scale, int64_t window, const Tensor& out,
               const KvBlocks& blocks = {});

// attention() for a decode step of several sequences whose caches are one shared pool of blocks:
// query t ([T, Hq, D], T sequences, one new token each, at positions[t]) attends to its own
// sequence's tokens, found through row_blocks[t] (paged, one block size) under kv_bounds[t]. Each
// row's output is exactly what attention() gives that row alone (on CUDA, one launch for the rows
// where the decode kernel takes their shape; row by row otherwise).
void attention_rows(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                    std::span<const KvBlocks> row_blocks, std::span<const int64_t> kv_bounds, float scale,
                    int64_t window, const Tensor& out);

// What stands between the q/k/v projections and attention(), per token and head:
//   q_out = rope(norm_q(q)),  k = rope(norm_k(k)) (in place),  k_cache[p] = k,  v_cache[p] = v,
// with p = positions[t] (I32 [T] on the tensors' device). q: [T, Hq, D], or [T, Hq, 2D] where each
// head's D query values are followed by D output-gate values (Qwen3.5), copied to gate_out
// ([T, Hq, D]; unused otherwise). q_out: [T, Hq, D] (may be q when q is [T, Hq, D]); k, v:
// [T, Hkv, D]; caches: [capacity, Hkv, D], F32 or BF16 (k and v stored rounded to nearest even; the
// k tensor itself keeps fp32). The norms are per-head RMSNorms (Qwen3, Qwen3.5), or none when
// norm.q_w is empty.
struct QkNorm {
  Tensor q_w, k_w;  // [D] each
  float eps = 1e-6f;
  bool one_plus_w = false;
};
void qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                        const RopeParams& rope_params, const Tensor& positions, const Tensor& q_out,
                        const Tensor& gate_out, const Tensor& k_cache, const Tensor& v_cache,
                        const KvBlocks& blocks = {});

// qk_norm_rope_store for a decode step of several sequences sharing one pool of KV blocks: token
// t is sequence t's new token, stored through row_blocks[t] (paged, one block size and capacity).
// Each row's results are exactly what qk_norm_rope_store gives that row alone.
void qk_norm_rope_store_rows(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                             const RopeParams& rope_params, const Tensor& positions, const Tensor& q_out,
                             const Tensor& gate_out, const Tensor& k_cache, const Tensor& v_cache,
                             std::span<const KvBlocks> row_blocks);

// out = SiLU(gate) ⊙ up, elementwise ([T, I] each).
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);

// out = (SiLU(gate) ⊙ up) · wᵀ: the MLP's down projection with its activation, one launch where the
// device can form the product as it reads it (CUDA decode). gate, up, act: [T, K]; act is scratch
// that holds the product where it is formed separately; out: [T, N]. `feed`: the product's form,
// from the gate/up matmul_group's glu_feed.
void silu_mul_matmul(const Tensor& gate, const Tensor& up, const Weight& w, const Tensor& act,
                     const Tensor& out, const MatmulFeed* feed = nullptr);

// a += b, elementwise.
void add(const Tensor& a, const Tensor& b);

// dst[positions[t], ...] = src[t, ...] (same row width; writes new keys and values into a cache).
// positions: I32 [T] on the tensors' device.
void store_rows(const Tensor& src, const Tensor& positions, const Tensor& dst);

// out[r] = the index of the largest value of row r of x ([rows, V]; ties: the lowest index).
// out: I32 [rows] (greedy sampling without moving logits off the device).
void argmax(const Tensor& x, const Tensor& out);
// argmax of rows that lie apart (each sequence's logits of a decode step): outs[i] (I32 [1]) = the
// argmax of xs[i] (F32, V values each, all of one V); on CUDA one launch (and a merge) for up to
// 64 rows.
void argmax_rows(std::span<const Tensor> xs, std::span<const Tensor> outs);

// out (I32 [1]) = the token drawn from one row of logits x (F32 [V], V < 2^24) by temperature,
// top-k, top-p and min-p as backend/row_draw.h defines the draw, or -1 when no logit is a
// candidate (all NaN or -inf). CPU and CUDA pick the same token (integer sums), so sampling on a
// GPU reads back one token id instead of the row.
void sample_row(const Tensor& x, const RowDraw& draw, const Tensor& out);

// A sampler's logit edits on one row x (F32 [V]) where it lies: for each i, the logit of token
// ids[i] becomes edited_logit(x, biases[i], counts[i], penalties) (backend/row_draw.h). ids (I32 [n],
// distinct, below V), counts (I32 [n]) and biases (F32 [n]) are on x's device.
void edit_logits(const Tensor& x, const Tensor& ids, const Tensor& counts, const Tensor& biases,
                 const LogitPenalties& penalties);

// Structured output's token mask on one row x (F32 [V]) where it lies: the logit of every token
// whose bit is clear in mask (I32 [ceil(V / 32)], bit i % 32 of word i / 32) becomes -inf.
void mask_logits(const Tensor& x, const Tensor& mask);

// x = 0.
void zero(const Tensor& x);

// out = x ⊙ sigmoid(gate), elementwise (in place on x is allowed). `feed`: out's form for the
// matmul it feeds (see MatmulFeed).
void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out,
                 MatmulFeed* feed = nullptr);

// Splits each row of x ([rows, Σ widths]) into consecutive column blocks: outs[i] is [rows, width_i].
void split_columns(const Tensor& x, std::span<const Tensor> outs);

}  // namespace strata::backend
