// qk_norm_rope_store on the GPU: the per-head work between an attention layer's q/k/v projections
// and attention() (gate split, q/k RMSNorm, RoPE, KV-cache stores) in one launch, one warp per
// (token, head). The arithmetic follows the CPU ops it replaces: rms_norm's formula, and RoPE's
// pair rotation spelled with _rn intrinsics (no FMA) as in rope_kernel. The caches are F32 or BF16
// (kv_cache.h); k itself keeps fp32.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kv_cache.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/warp.h"

namespace strata::backend::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxHalf = 256;  // rotary_dim ≤ 512 (checked by the dispatcher)

// The frequencies travel inside the launch's parameters: a captured graph replays them as they are.
struct Freqs {
  float inv_freq[kMaxHalf];
};

struct Params {
  int T, Hq, Hkv, D;
  int q_width;  // D, or 2D when each head's gate follows its query
  int64_t capacity;  // the sequence's tokens the caches can hold
  KvRows rows;       // where a token's key and value lie
  float eps;
  bool one_plus_w;
  int half;  // rotary_dim / 2
  bool neox;
  float attention_factor;
};

// Each token's block table, for a decode step of several sequences (qk_norm_rope_store_rows); a
// launch of one sequence passes none.
constexpr int kRowsMax = 64;
struct RowTables {
  const int32_t* table[kRowsMax];
};

// Warp `unit` = (token t, head h): heads [0, Hq) are queries, [Hq, Hq + Hkv) keys, the rest values.
// Lane l holds elements l + 32e (e < kPer) of the head; the rotation pairs cross lanes, so the
// normed head is staged in shared memory (the warp's own slice) for the rotation.
// kRowTables: token t's rows come from tables.table[t] (p.rows gives the block size).
template <int kPer, typename C, bool kRowTables>
__global__ void __launch_bounds__(32 * kWarps)
    qk_norm_rope_store_kernel(const float* q, float* k, const float* __restrict__ v,
                              const float* __restrict__ q_w, const float* __restrict__ k_w,
                              const int32_t* __restrict__ positions, float* q_out,
                              float* __restrict__ gate_out, C* __restrict__ k_cache,
                              C* __restrict__ v_cache, Params p, Freqs freqs, const RowTables tables) {
  wait_for_inputs();
  __shared__ float staged[kWarps][32 * kPer];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_token = p.Hq + 2 * p.Hkv;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (unit >= static_cast<int64_t>(p.T) * per_token) return;  // whole warps
  const int t = static_cast<int>(unit / per_token), h = static_cast<int>(unit % per_token);
  if constexpr (kRowTables) p.rows.table = tables.table[t];
  const int32_t pos = positions[t];
  const bool in_cache =
      pos >= 0 && pos < p.capacity;  // the dispatcher checked; never write outside
  const int D = p.D;

  if (h >= p.Hq + p.Hkv) {  // a value head: straight into the cache
    if (!in_cache) return;
    const int hv = h - p.Hq - p.Hkv;
    const float* src = v + (static_cast<int64_t>(t) * p.Hkv + hv) * D;
    C* dst = v_cache + (p.rows.row(pos) * p.Hkv + hv) * D;
    for (int i = lane; i < D; i += 32) store_cache(dst + i, src[i]);
    return;
  }

  const bool is_q = h < p.Hq;
  const float* src;
  float* dst;
  C* cache_row = nullptr;
  const float* nw;
  if (is_q) {
    src = q + (static_cast<int64_t>(t) * p.Hq + h) * p.q_width;
    dst = q_out + (static_cast<int64_t>(t) * p.Hq + h) * D;
    nw = q_w;
  } else {
    const int hk = h - p.Hq;
    dst = k + (static_cast<int64_t>(t) * p.Hkv + hk) * D;  // in place
    src = dst;
    if (in_cache) cache_row = k_cache + (p.rows.row(pos) * p.Hkv + hk) * D;
    nw = k_w;
  }

  // Every load before the first store (the gate's copy), so they go out together.
  float x[kPer], gate_x[kPer];
  const bool has_gate = is_q && p.q_width == 2 * D;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const bool in = lane + 32 * e < D;
    x[e] = in ? src[lane + 32 * e] : 0.0f;
    gate_x[e] = in && has_gate ? src[D + lane + 32 * e] : 0.0f;
  }
  if (has_gate) {
    float* gate = gate_out + (static_cast<int64_t>(t) * p.Hq + h) * D;
#pragma unroll
    for (int e = 0; e < kPer; ++e)
      if (lane + 32 * e < D) gate[lane + 32 * e] = gate_x[e];
  }
  if (nw != nullptr) {  // warp-uniform
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) ss += x[e] * x[e];
    const float inv = 1.0f / sqrtf(warp_sum(ss) / static_cast<float>(D) + p.eps);
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int i = lane + 32 * e;
      if (i < D) x[e] = x[e] * inv * (p.one_plus_w ? 1.0f + nw[i] : nw[i]);
    }
  }
  float* s = staged[warp];
#pragma unroll
  for (int e = 0; e < kPer; ++e)
    if (lane + 32 * e < D) s[lane + 32 * e] = x[e];
  __syncwarp();
  const float fpos = static_cast<float>(pos);
  for (int i = lane; i < p.half; i += 32) {
    float sn, cs;
    sincosf(fpos * freqs.inv_freq[i], &sn, &cs);  // the accurate version, as rope_kernel
    cs *= p.attention_factor;
    sn *= p.attention_factor;
    const int a = p.neox ? i : 2 * i;
    const int b = p.neox ? i + p.half : 2 * i + 1;
    const float x0 = s[a], x1 = s[b];
    s[a] = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
    s[b] = __fadd_rn(__fmul_rn(x1, cs), __fmul_rn(x0, sn));
  }
  __syncwarp();
  for (int i = lane; i < D; i += 32) {
    dst[i] = s[i];
    if (cache_row != nullptr) store_cache(cache_row + i, s[i]);
  }
}

template <int kPer>
void launch_store(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                  const Tensor& positions, const Tensor& q_out, const Tensor& gate_out,
                  const Tensor& k_cache, const Tensor& v_cache, const Params& p,
                  const Freqs& freqs, const RowTables* tables) {
  const int64_t warps = static_cast<int64_t>(p.T) * (p.Hq + 2 * p.Hkv);
  const unsigned blocks = static_cast<unsigned>((warps + kWarps - 1) / kWarps);
  const bool has_norm = !norm.q_w.empty();
  with_cache_type(k_cache, [&](auto c) {
    using C = decltype(c);
    auto go = [&](auto kernel) {
      launch(kernel, blocks, 32 * kWarps, 0, q.as<const float>(), k.as<float>(), v.as<const float>(),
             has_norm ? norm.q_w.as<const float>() : nullptr, has_norm ? norm.k_w.as<const float>() : nullptr,
             positions.as<const int32_t>(), q_out.as<float>(), gate_out.empty() ? nullptr : gate_out.as<float>(),
             k_cache.as<C>(), v_cache.as<C>(), p, freqs, tables != nullptr ? *tables : RowTables{});
    };
    if (tables != nullptr) {
      go(qk_norm_rope_store_kernel<kPer, C, true>);
    } else {
      go(qk_norm_rope_store_kernel<kPer, C, false>);
    }
  });
}

}  // namespace

namespace {

void store(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm, const RopeParams& rope_params,
           const Tensor& positions, const Tensor& q_out, const Tensor& gate_out, const Tensor& k_cache,
           const Tensor& v_cache, const KvBlocks& blocks, const RowTables* tables) {
  Params p{};
  p.T = static_cast<int>(q_out.dim(0));
  p.Hq = static_cast<int>(q_out.dim(1));
  p.D = static_cast<int>(q_out.dim(2));
  p.Hkv = static_cast<int>(k.dim(1));
  p.q_width = static_cast<int>(q.dim(2));
  p.capacity = blocks.capacity(k_cache);
  p.rows = kv_rows(blocks);
  p.eps = norm.eps;
  p.one_plus_w = norm.one_plus_w;
  p.half = rope_params.rotary_dim / 2;
  p.neox = rope_params.neox;
  p.attention_factor = rope_params.attention_factor;
  if (p.T == 0) return;
  Freqs freqs{};
  std::copy_n(rope_params.inv_freq.begin(), std::min(p.half, kMaxHalf), freqs.inv_freq);
  if (p.D <= 32) {
    launch_store<1>(q, k, v, norm, positions, q_out, gate_out, k_cache, v_cache, p, freqs, tables);
  } else if (p.D <= 64) {
    launch_store<2>(q, k, v, norm, positions, q_out, gate_out, k_cache, v_cache, p, freqs, tables);
  } else if (p.D <= 128) {
    launch_store<4>(q, k, v, norm, positions, q_out, gate_out, k_cache, v_cache, p, freqs, tables);
  } else if (p.D <= 256) {
    launch_store<8>(q, k, v, norm, positions, q_out, gate_out, k_cache, v_cache, p, freqs, tables);
  } else {
    throw_cuda_error(static_cast<int>(cudaErrorInvalidValue),
                     "qk_norm_rope_store: head dims above 256", __FILE__, __LINE__);
  }
}

}  // namespace

void qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                        const RopeParams& rope_params, const Tensor& positions, const Tensor& q_out,
                        const Tensor& gate_out, const Tensor& k_cache, const Tensor& v_cache,
                        const KvBlocks& blocks) {
  store(q, k, v, norm, rope_params, positions, q_out, gate_out, k_cache, v_cache, blocks, nullptr);
}

bool qk_norm_rope_store_rows(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                             const RopeParams& rope_params, const Tensor& positions, const Tensor& q_out,
                             const Tensor& gate_out, const Tensor& k_cache, const Tensor& v_cache,
                             std::span<const KvBlocks> row_blocks) {
  const auto T = static_cast<int64_t>(row_blocks.size());
  if (T < 2 || T > kRowsMax) return false;
  RowTables tables{};
  for (int64_t t = 0; t < T; ++t) {
    const KvBlocks& b = row_blocks[static_cast<size_t>(t)];
    if (b.capacity(k_cache) != row_blocks[0].capacity(k_cache)) return false;
    tables.table[t] = b.table.as<const int32_t>();
  }
  store(q, k, v, norm, rope_params, positions, q_out, gate_out, k_cache, v_cache, row_blocks[0], &tables);
  return true;
}

}  // namespace strata::backend::cuda
