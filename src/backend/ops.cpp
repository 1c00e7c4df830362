// Device dispatch for the op interface: every op checks where its tensors live and calls that
// backend. Only the CPU backend exists in this build unless STRATA_CUDA is on.
#include "backend/ops.h"

#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "backend/dispatch.h"

namespace strata::backend {

using detail::placement;
namespace {
void require_f32(const char* op, const Tensor& t) { detail::require_f32(op, {&t}); }
void require_i32(const char* op, const Tensor& t, int64_t n) {
  check(t.dtype == DType::kI32 && t.numel() == n, ErrorKind::kInternal, "op {}: expected I32 [{}], got {} {}", op, n,
        dtype_name(t.dtype), t.shape.str());
}
// A KV cache: F32, or BF16 (values rounded to nearest even as they are stored); K and V alike.
void require_kv_cache(const char* op, const Tensor& k_cache, const Tensor& v_cache) {
  check((k_cache.dtype == DType::kF32 || k_cache.dtype == DType::kBF16) &&
            v_cache.dtype == k_cache.dtype,
        ErrorKind::kInternal, "op {}: KV caches must be F32 or BF16 (both alike), got {} and {}",
        op, dtype_name(k_cache.dtype), dtype_name(v_cache.dtype));
}
bool cuda_scale_dtype(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }
// What the CUDA matmul kernels take: F32, or MLX affine 4/8-bit codes in groups of 32/64/128 with
// F32, BF16 or F16 scales and biases (one dtype for both).
void check_cuda_weight(const Weight& w) {
  check(w.w.dtype == DType::kF32 ||
            (w.quantized() && (w.bits == 4 || w.bits == 8) &&
             (w.group_size == 32 || w.group_size == 64 || w.group_size == 128) && w.scales.device == w.w.device &&
             w.biases.device == w.w.device && cuda_scale_dtype(w.scales.dtype) && w.biases.dtype == w.scales.dtype),
        ErrorKind::kUnsupported, "CUDA matmul: {}-bit weights with groups of {} ({} scales) are not supported",
        w.bits, w.group_size, dtype_name(w.scales.dtype));
}

std::span<const int32_t> host_ints(const Tensor& t) {
  return {t.as<const int32_t>(), static_cast<size_t>(t.numel())};
}
// A paged cache's block table: I32 [blocks] on the cache's device, blocks of a power-of-two size
// that tile the pool.
void require_kv_blocks(const char* op, const KvBlocks& blocks, const Tensor& cache) {
  if (!blocks.paged()) return;
  const int64_t b = blocks.block_tokens;
  check(blocks.table.dtype == DType::kI32 && blocks.table.rank() == 1 &&
            blocks.table.device == cache.device && b > 0 && (b & (b - 1)) == 0 && b <= (1 << 20) &&
            cache.dim(0) % b == 0,
        ErrorKind::kInternal, "op {}: block table {} of {}-token blocks for a pool of {} rows", op,
        blocks.table.shape.str(), b, cache.dim(0));
}
// The cache rows of n tokens of a sequence, token(i) the i-th (the CPU path), each checked to lie
// in the sequence's capacity and the cache. `rows` is the caller's grow-only scratch.
template <typename Token>
std::span<const int32_t> cache_rows(size_t n, Token token, const KvBlocks& blocks, const Tensor& cache,
                                    std::vector<int32_t>& rows) {
  rows.resize(n);
  const int64_t capacity = blocks.capacity(cache), b = blocks.block_tokens;
  const std::span<const int32_t> table =
      blocks.paged() ? host_ints(blocks.table) : std::span<const int32_t>{};
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = token(i);
    check(t >= 0 && t < capacity, ErrorKind::kInternal, "token {} of a sequence of capacity {}", t,
          capacity);
    const int64_t row = blocks.paged() ? int64_t{table[static_cast<size_t>(t / b)]} * b + t % b : t;
    check(row >= 0 && row < cache.dim(0), ErrorKind::kInternal,
          "token {} lies in row {} of a cache of {} rows", t, row, cache.dim(0));
    rows[i] = static_cast<int32_t>(row);
  }
  return rows;
}
}  // namespace

void embedding(const Weight& table, const Tensor& ids, const Tensor& out) {
  const Device d = placement("embedding", {&table.w, &ids, &out});
  require_f32("embedding", out);
  require_i32("embedding", ids, out.dim(0));
  check(out.rank() == 2 && out.dim(1) == table.cols(), ErrorKind::kInternal,
        "embedding: output shape {} for {} ids of width {}", out.shape.str(), ids.numel(), table.cols());
  STRATA_CUDA_DISPATCH("embedding", d, cuda::embedding(table, ids, out));
  for (int32_t id : host_ints(ids)) {
    check(id >= 0 && id < table.rows(), ErrorKind::kInvalidInput,
          "token id {} is outside the vocabulary (size {})", id, table.rows());
  }
  cpu::embedding(table, host_ints(ids), out);
}

void matmul(const Tensor& x, const Weight& w, const Tensor& out,
            [[maybe_unused]] const MatmulFeed* feed) {  // unused where CUDA is not built
  const Device d = placement("matmul", {&x, &w.w, &out});
  require_f32("matmul", x);
  require_f32("matmul", out);
  check(x.dim(-1) == w.cols() && out.dim(-1) == w.rows() && x.numel() / x.dim(-1) == out.numel() / out.dim(-1),
        ErrorKind::kInternal, "matmul: x {} · w [{}, {}] -> out {}", x.shape.str(), w.rows(), w.cols(),
        out.shape.str());
  if (d == Device::kCuda) check_cuda_weight(w);
  STRATA_CUDA_DISPATCH("matmul", d, cuda::matmul(x, w, out, feed));
  cpu::matmul(x, w, out);
}

int64_t batch_invariant_rows(Device device, std::span<const Weight* const> weights) {
#ifdef STRATA_HAVE_CUDA
  if (device == Device::kCuda) return cuda::batch_invariant_rows(weights);
#endif
  (void)device;
  // The fused quantized kernel keeps a row's sums for up to 8 rows; the float one for kFloatRowsMax.
  for (const Weight* w : weights)
    if (w->quantized()) return 8;
  return cpu::kFloatRowsMax;
}

void matmul_group(const Tensor& x, std::span<const Weight* const> ws, std::span<const Tensor> outs,
                  [[maybe_unused]] const MatmulFeed* feed,
                  [[maybe_unused]] MatmulFeed* glu_feed) {
  check(!ws.empty() && ws.size() == outs.size(), ErrorKind::kInternal, "matmul_group: {} weights, {} outputs",
        ws.size(), outs.size());
  const Device d = placement("matmul_group", {&x, &ws[0]->w});
  if (d == Device::kCuda) {
    for (size_t i = 0; i < ws.size(); ++i) {
      check(ws[i]->w.device == d && outs[i].device == d && ws[i]->cols() == x.dim(-1) &&
                outs[i].dim(-1) == ws[i]->rows() && outs[i].numel() / outs[i].dim(-1) == x.numel() / x.dim(-1),
            ErrorKind::kInternal, "matmul_group: weight {} [{}, {}] for x {} -> out {}", i, ws[i]->rows(),
            ws[i]->cols(), x.shape.str(), outs[i].shape.str());
      require_f32("matmul_group", outs[i]);
      check_cuda_weight(*ws[i]);
    }
    require_f32("matmul_group", x);
    STRATA_CUDA_DISPATCH("matmul", d, cuda::matmul_group(x, ws, outs, feed, glu_feed));
  }
  MatmulFeed::none(glu_feed);
  for (size_t i = 0; i < ws.size(); ++i) matmul(x, *ws[i], outs[i]);
}

void add_bias(const Tensor& x, const Tensor& bias) {
  const Device d = placement("add_bias", {&x, &bias});
  check(bias.numel() == x.dim(-1), ErrorKind::kInternal, "add_bias: bias {} for x {}", bias.shape.str(),
        x.shape.str());
  STRATA_CUDA_DISPATCH("add_bias", d, cuda::add_bias(x, bias));
  cpu::add_bias(x, bias);
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out,
              MatmulFeed* feed) {
  const Device d = placement("rms_norm", {&x, &w, &out});
  check(w.numel() == x.dim(-1) && out.numel() == x.numel(), ErrorKind::kInternal,
        "rms_norm: x {} w {} out {}", x.shape.str(), w.shape.str(), out.shape.str());
  STRATA_CUDA_DISPATCH("rms_norm", d, cuda::rms_norm(x, w, eps, one_plus_w, out, feed));
  MatmulFeed::none(feed);
  cpu::rms_norm(x, w, eps, one_plus_w, out);
}

void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& w, float eps, bool one_plus_w,
                  const Tensor& out, MatmulFeed* feed) {
  const Device d = placement("add_rms_norm", {&x, &delta, &w, &out});
  detail::require_f32("add_rms_norm", {&x, &delta, &w, &out});
  const int64_t D = w.numel();
  check(D > 0 && x.rank() == 2 && x.dim(1) == D && delta.shape == x.shape && out.rank() == 2 && out.dim(1) == D &&
            out.dim(0) <= x.dim(0) && out.data != x.data,
        ErrorKind::kInternal, "add_rms_norm: x {} delta {} w {} out {}", x.shape.str(), delta.shape.str(),
        w.shape.str(), out.shape.str());
  STRATA_CUDA_DISPATCH("add_rms_norm", d,
                       cuda::add_rms_norm(x, delta, w, eps, one_plus_w, out, feed));
  MatmulFeed::none(feed);
  cpu::add_rms_norm(x, delta, w, eps, one_plus_w, out);
}

void rope(const Tensor& x, const Tensor& positions, const RopeParams& params) {
  const Device d = placement("rope", {&x, &positions});
  require_i32("rope", positions, x.dim(0));
  check(x.rank() == 3 && params.rotary_dim <= x.dim(2) && params.rotary_dim % 2 == 0 &&
            static_cast<int>(params.inv_freq.size()) == params.rotary_dim / 2 && params.rotary_dim <= 512,
        ErrorKind::kInternal, "rope: x {} with {} positions, rotary_dim {}", x.shape.str(), positions.numel(),
        params.rotary_dim);
  STRATA_CUDA_DISPATCH("rope", d, cuda::rope(x, positions, params));
  cpu::rope(x, host_ints(positions), params);
}

void qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                        const RopeParams& rope_params, const Tensor& positions, const Tensor& q_out,
                        const Tensor& gate_out, const Tensor& k_cache, const Tensor& v_cache,
                        const KvBlocks& blocks) {
  const bool gated = !gate_out.empty();
  const Device d = placement("qk_norm_rope_store", {&q, &k, &v, &positions, &q_out, &k_cache, &v_cache});
  detail::require_f32("qk_norm_rope_store", {&q, &k, &v, &q_out});
  require_kv_cache("qk_norm_rope_store", k_cache, v_cache);
  check(q_out.rank() == 3 && k.rank() == 3, ErrorKind::kInternal, "qk_norm_rope_store: q_out {} k {}",
        q_out.shape.str(), k.shape.str());
  const int64_t T = q_out.dim(0), Hq = q_out.dim(1), D = q_out.dim(2), Hkv = k.dim(1);
  require_i32("qk_norm_rope_store", positions, T);
  check(q.shape == Shape{T, Hq, gated ? 2 * D : D} && k.shape == Shape{T, Hkv, D} && v.shape == k.shape &&
            k_cache.rank() == 3 && k_cache.dim(1) == Hkv && k_cache.dim(2) == D && v_cache.shape == k_cache.shape &&
            (!gated || (gate_out.shape == q_out.shape && gate_out.device == d && gate_out.dtype == DType::kF32)) &&
            (gated ? q_out.data != q.data : true),
        ErrorKind::kInternal, "qk_norm_rope_store: q {} q_out {} gate_out {} k {} v {} cache {}", q.shape.str(),
        q_out.shape.str(), gate_out.shape.str(), k.shape.str(), v.shape.str(), k_cache.shape.str());
  if (!norm.q_w.empty())
    check(norm.q_w.numel() == D && norm.k_w.numel() == D && norm.q_w.device == d && norm.k_w.device == d,
          ErrorKind::kInternal, "qk_norm_rope_store: norm weights {} {} for head dim {}", norm.q_w.shape.str(),
          norm.k_w.shape.str(), D);
  check(rope_params.rotary_dim <= D && rope_params.rotary_dim % 2 == 0 &&
            static_cast<int>(rope_params.inv_freq.size()) == rope_params.rotary_dim / 2 &&
            rope_params.rotary_dim <= 512,
        ErrorKind::kInternal, "qk_norm_rope_store: rotary_dim {} for head dim {}", rope_params.rotary_dim, D);
  check(d != Device::kCuda || D <= 256, ErrorKind::kUnsupported, "CUDA qk_norm_rope_store: head dim {} above 256",
        D);
  require_kv_blocks("qk_norm_rope_store", blocks, k_cache);
  STRATA_CUDA_DISPATCH("qk_norm_rope_store", d,
                       cuda::qk_norm_rope_store(q, k, v, norm, rope_params, positions, q_out, gate_out, k_cache,
                                                v_cache, blocks));
  static thread_local std::vector<int32_t> scratch;  // grow-only
  const std::span<const int32_t> pos = host_ints(positions);
  const std::span<const int32_t> rows =
      cache_rows(pos.size(), [&](size_t i) { return int64_t{pos[i]}; }, blocks, k_cache, scratch);
  cpu::qk_norm_rope_store(q, k, v, norm, rope_params, pos, rows, q_out, gate_out, k_cache,
                          v_cache);
}

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
               int64_t kv_bound, float scale, int64_t window, const Tensor& out, const KvBlocks& blocks) {
  const Device d = placement("attention", {&q, &k_cache, &v_cache, &positions, &out});
  detail::require_f32("attention", {&q, &out});
  require_kv_cache("attention", k_cache, v_cache);
  require_i32("attention", positions, q.dim(0));
  check(q.rank() == 3 && k_cache.rank() == 3 && q.dim(2) == k_cache.dim(2) && q.dim(1) % k_cache.dim(1) == 0 &&
            kv_bound >= q.dim(0) && kv_bound <= blocks.capacity(k_cache) && k_cache.shape == v_cache.shape &&
            out.shape == q.shape,
        ErrorKind::kInternal, "attention: q {} cache {} bound {}", q.shape.str(), k_cache.shape.str(), kv_bound);
  require_kv_blocks("attention", blocks, k_cache);
  STRATA_CUDA_DISPATCH("attention", d,
                       cuda::attention(q, k_cache, v_cache, positions, kv_bound, scale, window, out, blocks));
  const std::span<const int32_t> pos = host_ints(positions);
  for (size_t t = 0; t < pos.size(); ++t)
    check(pos[t] >= 0 && pos[t] < kv_bound && (t == 0 || pos[t] > pos[t - 1]), ErrorKind::kInternal,
          "attention: position {} of query {} (bound {})", pos[t], t, kv_bound);
  // The rows of every token a query may read: positions [0, last] of the sequence.
  static thread_local std::vector<int32_t> scratch;  // grow-only, to a whole capacity at once
  const auto capacity = static_cast<size_t>(blocks.capacity(k_cache));
  scratch.reserve(capacity);
  const size_t keys = pos.empty() ? 0 : static_cast<size_t>(pos.back()) + 1;
  cpu::attention(q, k_cache, v_cache, pos,
                 cache_rows(keys, [](size_t i) { return static_cast<int64_t>(i); }, blocks, k_cache, scratch),
                 static_cast<int64_t>(capacity), scale, window, out);
}

namespace {
// What the _rows ops take: T rows, a paged table each, all of one block size over one pool.
void require_row_blocks(const char* op, std::span<const KvBlocks> row_blocks, int64_t T, const Tensor& cache) {
  check(static_cast<int64_t>(row_blocks.size()) == T && T > 0, ErrorKind::kInternal, "op {}: {} rows, {} tables",
        op, T, row_blocks.size());
  for (const KvBlocks& b : row_blocks) {
    check(b.paged() && b.block_tokens == row_blocks[0].block_tokens, ErrorKind::kInternal,
          "op {}: every row needs a block table of one block size", op);
    require_kv_blocks(op, b, cache);
  }
}
}  // namespace

void attention_rows(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                    std::span<const KvBlocks> row_blocks, std::span<const int64_t> kv_bounds, float scale,
                    int64_t window, const Tensor& out) {
  const Device d = placement("attention_rows", {&q, &k_cache, &v_cache, &positions, &out});
  const int64_t T = q.rank() == 3 ? q.dim(0) : 0;
  require_row_blocks("attention_rows", row_blocks, T, k_cache);
  check(kv_bounds.size() == row_blocks.size() && out.shape == q.shape, ErrorKind::kInternal,
        "attention_rows: {} bounds for {} rows, out {}", kv_bounds.size(), T, out.shape.str());
  require_i32("attention_rows", positions, T);
#ifdef STRATA_HAVE_CUDA
  if (d == Device::kCuda) {
    const detail::CudaOpTimer timer("attention_rows");
    if (cuda::attention_rows(q, k_cache, v_cache, positions, row_blocks, kv_bounds, scale, window, out)) return;
  }
#endif
  (void)d;
  for (int64_t t = 0; t < T; ++t)  // each row alone: the reference, and what a shape the launch declines takes
    attention(q.rows(t, t + 1), k_cache, v_cache, positions.rows(t, t + 1), kv_bounds[static_cast<size_t>(t)],
              scale, window, out.rows(t, t + 1), row_blocks[static_cast<size_t>(t)]);
}

void qk_norm_rope_store_rows(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                             const RopeParams& rope_params, const Tensor& positions, const Tensor& q_out,
                             const Tensor& gate_out, const Tensor& k_cache, const Tensor& v_cache,
                             std::span<const KvBlocks> row_blocks) {
  const Device d = placement("qk_norm_rope_store_rows", {&q, &k, &v, &positions, &q_out, &k_cache, &v_cache});
  const int64_t T = q_out.rank() == 3 ? q_out.dim(0) : 0;
  require_row_blocks("qk_norm_rope_store_rows", row_blocks, T, k_cache);
  check(q.rank() == 3 && k.rank() == 3 && v.rank() == 3 && q.dim(0) == T && k.dim(0) == T && v.dim(0) == T &&
            (gate_out.empty() || gate_out.dim(0) == T),
        ErrorKind::kInternal, "qk_norm_rope_store_rows: q {} k {} v {} for {} rows", q.shape.str(), k.shape.str(),
        v.shape.str(), T);
  require_i32("qk_norm_rope_store_rows", positions, T);
#ifdef STRATA_HAVE_CUDA
  if (d == Device::kCuda) {
    const detail::CudaOpTimer timer("qk_norm_rope_store_rows");
    if (cuda::qk_norm_rope_store_rows(q, k, v, norm, rope_params, positions, q_out, gate_out, k_cache, v_cache,
                                      row_blocks))
      return;
  }
#endif
  (void)d;
  for (int64_t t = 0; t < T; ++t)
    qk_norm_rope_store(q.rows(t, t + 1), k.rows(t, t + 1), v.rows(t, t + 1), norm, rope_params,
                       positions.rows(t, t + 1), q_out.rows(t, t + 1),
                       gate_out.empty() ? gate_out : gate_out.rows(t, t + 1), k_cache, v_cache,
                       row_blocks[static_cast<size_t>(t)]);
}

void silu_mul_matmul(const Tensor& gate, const Tensor& up, const Weight& w, const Tensor& act,
                     const Tensor& out, [[maybe_unused]] const MatmulFeed* feed) {
  const Device d = placement("silu_mul_matmul", {&gate, &up, &act, &w.w, &out});
  require_f32("silu_mul_matmul", out);
  check(gate.shape == up.shape && act.numel() == up.numel() && up.dim(-1) == w.cols() && out.dim(-1) == w.rows() &&
            up.numel() / up.dim(-1) == out.numel() / out.dim(-1),
        ErrorKind::kInternal, "silu_mul_matmul: gate {} up {} act {} · w [{}, {}] -> out {}", gate.shape.str(),
        up.shape.str(), act.shape.str(), w.rows(), w.cols(), out.shape.str());
  if (d == Device::kCuda) check_cuda_weight(w);
  STRATA_CUDA_DISPATCH("silu_mul_matmul", d, cuda::silu_mul_matmul(gate, up, w, act, out, feed));
  cpu::silu_mul(gate, up, act);
  cpu::matmul(act, w, out);
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const Device d = placement("silu_mul", {&gate, &up, &out});
  check(gate.numel() == up.numel() && gate.numel() == out.numel(), ErrorKind::kInternal,
        "silu_mul: shapes {} {} {}", gate.shape.str(), up.shape.str(), out.shape.str());
  STRATA_CUDA_DISPATCH("silu_mul", d, cuda::silu_mul(gate, up, out));
  cpu::silu_mul(gate, up, out);
}

void add(const Tensor& a, const Tensor& b) {
  const Device d = placement("add", {&a, &b});
  check(a.numel() == b.numel(), ErrorKind::kInternal, "add: shapes {} {}", a.shape.str(), b.shape.str());
  STRATA_CUDA_DISPATCH("add", d, cuda::add(a, b));
  cpu::add(a, b);
}

void store_rows(const Tensor& src, const Tensor& positions, const Tensor& dst) {
  const Device d = placement("store_rows", {&src, &positions, &dst});
  require_i32("store_rows", positions, src.dim(0));
  check(src.dtype == dst.dtype && src.dim(0) > 0 && dst.dim(0) > 0 &&
            src.numel() / src.dim(0) == dst.numel() / dst.dim(0),
        ErrorKind::kInternal, "store_rows: src {} into dst {}", src.shape.str(), dst.shape.str());
  STRATA_CUDA_DISPATCH("store_rows", d, cuda::store_rows(src, positions, dst));
  for (int32_t p : host_ints(positions))
    check(p >= 0 && p < dst.dim(0), ErrorKind::kInternal, "store_rows: row {} of dst {}", p, dst.shape.str());
  cpu::store_rows(src, host_ints(positions), dst);
}

void argmax_rows(std::span<const Tensor> xs, std::span<const Tensor> outs) {
  check(xs.size() == outs.size(), ErrorKind::kInternal, "argmax_rows: {} rows, {} outputs", xs.size(), outs.size());
  if (xs.empty()) return;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Device d = placement("argmax_rows", {&xs[0], &xs[i], &outs[i]});
    (void)d;
    require_f32("argmax_rows", xs[i]);
    check(xs[i].numel() == xs[0].numel() && xs[i].numel() > 0, ErrorKind::kInternal, "argmax_rows: row {} of {}",
          i, xs[i].shape.str());
    require_i32("argmax_rows", outs[i], 1);
  }
#ifdef STRATA_HAVE_CUDA
  if (xs[0].device == Device::kCuda) {
    const detail::CudaOpTimer timer("argmax_rows");
    cuda::argmax_rows(xs, outs);
    return;
  }
#endif
  for (size_t i = 0; i < xs.size(); ++i) cpu::argmax(xs[i].reshaped({1, xs[i].numel()}), outs[i]);
}

void argmax(const Tensor& x, const Tensor& out) {
  const Device d = placement("argmax", {&x, &out});
  require_f32("argmax", x);
  check(x.rank() >= 1 && x.numel() > 0, ErrorKind::kInternal, "argmax: x {}", x.shape.str());
  require_i32("argmax", out, x.numel() / x.dim(-1));
  STRATA_CUDA_DISPATCH("argmax", d, cuda::argmax(x, out));
  cpu::argmax(x, out);
}

void sample_row(const Tensor& x, const RowDraw& draw, const Tensor& out) {
  const Device d = placement("sample_row", {&x, &out});
  require_f32("sample_row", x);
  check(x.numel() > 0 && x.numel() == x.dim(-1) && x.numel() < row_draw::kMaxVocab, ErrorKind::kInternal,
        "sample_row: x {} is not one row of fewer than 2^24 logits", x.shape.str());
  require_i32("sample_row", out, 1);
  check(draw.temperature > 0.0f && draw.top_k >= 0 && draw.top_p > 0.0f && draw.top_p <= 1.0f &&
            draw.min_p >= 0.0f && draw.min_p <= 1.0f && draw.u >= 0.0 && draw.u < 1.0,
        ErrorKind::kInternal, "sample_row: temperature {} top_k {} top_p {} min_p {} u {}", draw.temperature,
        draw.top_k, draw.top_p, draw.min_p, draw.u);
  STRATA_CUDA_DISPATCH("sample_row", d, cuda::sample_row(x, draw, out));
  cpu::sample_row(x, draw, out);
}

void edit_logits(const Tensor& x, const Tensor& ids, const Tensor& counts, const Tensor& biases,
                 const LogitPenalties& penalties) {
  const Device d = placement("edit_logits", {&x, &ids, &counts, &biases});
  require_f32("edit_logits", x);
  check(x.numel() > 0 && x.numel() == x.dim(-1), ErrorKind::kInternal, "edit_logits: x {} is not one row",
        x.shape.str());
  require_i32("edit_logits", ids, ids.numel());
  require_i32("edit_logits", counts, ids.numel());
  require_f32("edit_logits", biases);
  check(biases.numel() == ids.numel(), ErrorKind::kInternal, "edit_logits: {} ids, {} biases", ids.numel(),
        biases.numel());
  if (ids.numel() == 0) return;
  STRATA_CUDA_DISPATCH("edit_logits", d, cuda::edit_logits(x, ids, counts, biases, penalties));
  cpu::edit_logits(x, ids, counts, biases, penalties);
}

void mask_logits(const Tensor& x, const Tensor& mask) {
  const Device d = placement("mask_logits", {&x, &mask});
  require_f32("mask_logits", x);
  check(x.numel() > 0 && x.numel() == x.dim(-1), ErrorKind::kInternal, "mask_logits: x {} is not one row",
        x.shape.str());
  require_i32("mask_logits", mask, (x.numel() + 31) / 32);
  STRATA_CUDA_DISPATCH("mask_logits", d, cuda::mask_logits(x, mask));
  cpu::mask_logits(x, mask);
}

void zero(const Tensor& x) {
  const Device d = placement("zero", {&x});
  STRATA_CUDA_DISPATCH("zero", d, cuda::fill_zero(x.data, x.nbytes()));
  std::memset(x.data, 0, x.nbytes());
}

void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out, MatmulFeed* feed) {
  const Device d = placement("sigmoid_mul", {&x, &gate, &out});
  check(x.numel() == gate.numel() && x.numel() == out.numel(), ErrorKind::kInternal, "sigmoid_mul: shapes {} {} {}",
        x.shape.str(), gate.shape.str(), out.shape.str());
  STRATA_CUDA_DISPATCH("sigmoid_mul", d, cuda::sigmoid_mul(x, gate, out, feed));
  MatmulFeed::none(feed);
  cpu::sigmoid_mul(x, gate, out);
}

void split_columns(const Tensor& x, std::span<const Tensor> outs) {
  const Device d = placement("split_columns", {&x});
  int64_t width = 0;
  for (const Tensor& o : outs) {
    check(o.device == d, ErrorKind::kInternal, "split_columns: outputs on another device");
    check(o.rank() == 2 && o.dim(0) == x.dim(0) && o.dtype == x.dtype, ErrorKind::kInternal,
          "split_columns: output {} for x {}", o.shape.str(), x.shape.str());
    width += o.dim(1);
  }
  check(x.rank() == 2 && width == x.dim(1), ErrorKind::kInternal, "split_columns: widths sum to {} for x {}", width,
        x.shape.str());
  STRATA_CUDA_DISPATCH("split_columns", d, cuda::split_columns(x, outs));
  cpu::split_columns(x, outs);
}

}  // namespace strata::backend
