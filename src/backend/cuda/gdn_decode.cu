// The Gated DeltaNet mixer's core for one token in one launch (gdn_core, backend/gdn.h): causal
// conv
// + SiLU with the window advanced, the L2 norms of q and k, the gates, the delta rule on the fp32
// state, and the gated RMSNorm × SiLU(z). Longer steps, and shapes this kernel does not take, run
// the three ops it replaces (gdn_prepare, gated_delta_rule, rms_norm_gated).
//
// Work. A cluster of r·s blocks per key head: r = Hv/Hk value heads share the key head, and s
// splits each value head's dv state rows. Block ρ of a cluster takes value head ρ / s of the group
// and the (ρ % s)th slice of its rows, kG lanes a row as in the delta rule's row kernel. The
// group's 2·dk + r·dv channels (q and k of the key head, v of its value heads) are split evenly
// over the cluster: each block convolves its own channels and alone advances their window, so no
// block reads a window row that another has already advanced. After a cluster barrier, every block
// reads q, k and its rows' v from the owners' shared memory (distributed shared memory). After a
// second, it reads its value head's Σo² from the head's s blocks in rank order, so every block of a
// head sums the same way.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "backend/cuda/activations.h"
#include "backend/cuda/cluster.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gdn_common.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/warp.h"

namespace strata::backend::cuda {

namespace {

constexpr int kCoreMaxOwn = 2;  // channels one thread convolves
constexpr int kCoreMaxThreads = 512;
constexpr int kCoreMaxCluster = 8;  // the portable cluster size
constexpr int kCoreMaxWarps = kCoreMaxThreads / 32;

// Lanes per state row (kG) and float4s per lane (kNc) for key heads of kDk.
template <int kDk>
struct CoreRows {
  static constexpr int kG = kDk <= 128 ? 4 : 8;
  static constexpr int kNc = kDk / (4 * kG);
  static_assert(kNc >= 1 && kNc * 4 * kG == kDk, "row split");
};

struct CoreParams {
  const float* qkv;
  const float* z;
  const float* a;
  const float* b;
  const float* conv_weight;
  const float* a_log;
  const float* dt_bias;
  const float* norm;
  float* window;
  float* state;
  float* y;
  int Hk, Hv, dv, K, split;
  float l2_eps, q_scale, norm_eps;
};

// The cluster's layout of one key head's work.
struct CoreShape {
  int split;                  // blocks a value head
  int cluster, threads, own;  // blocks a cluster, threads a block, channels a block convolves
  size_t shared_bytes;
};


template <int kDk>
__global__ void __launch_bounds__(kCoreMaxThreads) gdn_decode_core_kernel(const CoreParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kG = CoreRows<kDk>::kG, kNc = CoreRows<kDk>::kNc;
  extern __shared__ float shared[];
  const int r = p.Hv / p.Hk, s = p.split, cluster = r * s;
  const int rank = cluster_rank();
  const int kh = static_cast<int>(blockIdx.x) / cluster, m = rank / s;
  const int j = kh * r + m;                                // the value head
  const int i = rank % s * (p.dv / s) + threadIdx.x / kG;  // this thread's row of it
  const int gl = threadIdx.x % kG, lane = threadIdx.x % 32;
  const int own = (2 * kDk + r * p.dv) / cluster;
  const int64_t C = 2LL * p.Hk * kDk + static_cast<int64_t>(p.Hv) * p.dv;
  float* owned = shared;       // [own]: this block's channels after conv + SiLU
  float* qk = shared + own;    // [2·kDk]: q, then k, of the key head
  float* sums = qk + 2 * kDk;  // [warps] partial Σo², then the block's at [kCoreMaxWarps]
  const int K = p.K;

  // Before the wait: weights, the window of this block's channels and its state rows (last written
  // by this layer a step ago: launch.h).
  int64_t col[kCoreMaxOwn];
  float taps[kCoreMaxOwn][kMaxConvK], win[kCoreMaxOwn][kMaxConvK - 1];
#pragma unroll
  for (int e = 0; e < kCoreMaxOwn; ++e) {
    const int l = threadIdx.x + e * blockDim.x;
    const int gc = rank * own + l;  // the channel in the group: q, k, then the value heads'
    col[e] = l >= own       ? -1
             : gc < kDk     ? int64_t{kh} * kDk + gc
             : gc < 2 * kDk ? int64_t{p.Hk} * kDk + int64_t{kh} * kDk + gc - kDk
                            : 2LL * p.Hk * kDk + int64_t{kh} * r * p.dv + gc - 2 * kDk;
#pragma unroll
    for (int t = 0; t < kMaxConvK; ++t)
      taps[e][t] = col[e] >= 0 && t < K ? p.conv_weight[col[e] * K + t] : 0.0f;
#pragma unroll
    for (int t = 0; t < kMaxConvK - 1; ++t)
      win[e][t] = col[e] >= 0 && t < K - 1 ? p.window[t * C + col[e]] : 0.0f;
  }
  float4 st[kNc];
  float4* srow = reinterpret_cast<float4*>(p.state + (int64_t{j} * p.dv + i) * kDk) + gl;
#pragma unroll
  for (int c = 0; c < kNc; ++c) st[c] = srow[c * kG];
  const float norm_w = p.norm[i], a_log = p.a_log[j], dt_bias = p.dt_bias[j];
  wait_for_inputs();

  // Conv + SiLU of this block's channels (as gdn_prepare's decode path), the window advanced.
#pragma unroll
  for (int e = 0; e < kCoreMaxOwn; ++e) {
    if (col[e] < 0) continue;
    const float cur = p.qkv[col[e]];
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < kMaxConvK; ++t) {
      const float row = t < K - 1 ? win[e][t < kMaxConvK - 1 ? t : 0] : cur;
      if (t < K) sum += taps[e][t] * row;
    }
    owned[threadIdx.x + e * blockDim.x] = silu(sum);
#pragma unroll
    for (int t = 0; t < kMaxConvK - 1; ++t)
      if (t < K - 1)
        p.window[t * C + col[e]] = t + 1 < K - 1 ? win[e][t + 1 < kMaxConvK - 1 ? t + 1 : 0] : cur;
  }
  const float z = p.z[int64_t{j} * p.dv + i];
  const float beta = sigmoid(p.b[j]), g = -expf(a_log) * softplus(p.a[j] + dt_bias);
  cluster_arrive();
  cluster_wait();

  // q and k of the key head, and this row's v, from the blocks that own them.
  for (int t = threadIdx.x; t < 2 * kDk; t += blockDim.x) qk[t] = in_block(owned, t / own)[t % own];
  const int vc = 2 * kDk + m * p.dv + i;
  const float v = in_block(owned, vc / own)[vc % own];
  __syncthreads();
  float q_squares = 0.0f, k_squares = 0.0f;
  for (int t = lane; t < kDk; t += 32)
    q_squares += qk[t] * qk[t], k_squares += qk[kDk + t] * qk[kDk + t];
  const float fq = p.q_scale / sqrtf(warp_sum(q_squares) + p.l2_eps);
  const float fk = 1.0f / sqrtf(warp_sum(k_squares) + p.l2_eps);

  // The delta rule on this row (as the row kernel, for one token).
  float4 kc[kNc], qc[kNc];
#pragma unroll
  for (int c = 0; c < kNc; ++c) {
    const float* kp = qk + kDk + c * 4 * kG + 4 * gl;
    const float* qp = qk + c * 4 * kG + 4 * gl;
    kc[c] = make_float4(kp[0] * fk, kp[1] * fk, kp[2] * fk, kp[3] * fk);
    qc[c] = make_float4(qp[0] * fq, qp[1] * fq, qp[2] * fq, qp[3] * fq);
  }
  const float o = delta_row_step<kNc, kG>(st, kc, qc, g, beta, v);
#pragma unroll
  for (int c = 0; c < kNc; ++c) srow[c * kG] = st[c];

  // Gated RMSNorm over the value head's dv outputs: this block's Σo², then the head's.
  const float squares = warp_sum(gl == 0 ? o * o : 0.0f);
  if (lane == 0) sums[threadIdx.x / 32] = squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    float block_squares = 0.0f;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) block_squares += sums[w];
    sums[kCoreMaxWarps] = block_squares;
  }
  cluster_arrive();
  cluster_wait();
  float head_squares = 0.0f;
  for (int h = 0; h < s; ++h) head_squares += in_block(sums, m * s + h)[kCoreMaxWarps];
  cluster_arrive();  // done reading the other blocks' shared memory
  const float inv = 1.0f / sqrtf(head_squares / static_cast<float>(p.dv) + p.norm_eps);
  if (gl == 0) p.y[int64_t{j} * p.dv + i] = o * inv * norm_w * silu(z);
  cluster_wait();  // no block leaves while another may still read its shared memory
#else
  __trap();  // never launched below sm_90: gdn_core checks clusters_supported()
#endif
}

// The shape for value heads split s ways, or cluster 0 where it does not fit (or dk has no kernel).
CoreShape core_shape(int dk, int r, int dv, int s) {
  if (dk != 16 && dk != 32 && dk != 64 && dk != 128 && dk != 256) return {};
  const int lanes = dk <= 128 ? 4 : 8;
  const int cluster = r * s, channels = 2 * dk + r * dv;
  if (cluster > kCoreMaxCluster || dv % s != 0 || channels % cluster != 0) return {};
  const int threads = dv / s * lanes, own = channels / cluster;
  if (threads % 32 != 0 || threads > kCoreMaxThreads || own > kCoreMaxOwn * threads) return {};
  return {s, cluster, threads, own,
          sizeof(float) * static_cast<size_t>(own + 2 * dk + kCoreMaxWarps + 1)};
}

// Each value head's rows split in two where that fits, else whole; STRATA_GDN_SPLIT (1, 2, 4 or 8)
// names the split instead where it fits, for tuning and tests (read on every eager call; a graph
// keeps the shape it was captured with). Measured on an H100 (2026-11-22, decode tok/s at 4 bits,
// splits 1 / 2 / 4 / 8): Qwen3.5-9B 403-405 / 413-414 / 412 / 409-413, Qwen3.5-0.8B 1440 /
// 1421-1436 / 1393-1409 / 1367-1394; the three launches this replaces gave 411-412 and 1380-1386.
CoreShape choose_core_shape(int dk, int r, int dv) {
  const char* env = std::getenv("STRATA_GDN_SPLIT");
  const int forced = env != nullptr ? std::atoi(env) : 0;
  for (const int s : {forced, 2, 1}) {
    if (s != 1 && s != 2 && s != 4 && s != 8) continue;
    const CoreShape shape = core_shape(dk, r, dv, s);
    if (shape.cluster != 0) return shape;
  }
  return {};
}

template <int kDk>
void launch_core(const CoreParams& p, const CoreShape& shape) {
  launch_clustered(static_cast<unsigned>(shape.cluster), gdn_decode_core_kernel<kDk>,
                   static_cast<unsigned>(p.Hk * shape.cluster),
                   static_cast<unsigned>(shape.threads), shape.shared_bytes, p);
}

}  // namespace

void gdn_core(const GdnCore& c, const Tensor& y) {
  const int64_t T = c.qkv.dim(0), Hk = c.q.dim(1), dk = c.q.dim(2), Hv = c.v.dim(1),
                dv = c.v.dim(2);
  const int64_t K = c.conv_weight.dim(1);
  const CoreShape shape =
      T == 1 && clusters_supported() && K >= 2 && K <= kMaxConvK &&
              reinterpret_cast<uintptr_t>(c.state.data) % 16 == 0
          ? choose_core_shape(static_cast<int>(dk), static_cast<int>(Hv / Hk), static_cast<int>(dv))
          : CoreShape{};
  if (shape.cluster != 0) {
    const CoreParams p{c.qkv.as<const float>(),
                       c.z.as<const float>(),
                       c.a.as<const float>(),
                       c.b.as<const float>(),
                       c.conv_weight.as<const float>(),
                       c.a_log.as<const float>(),
                       c.dt_bias.as<const float>(),
                       c.norm.as<const float>(),
                       c.window.as<float>(),
                       c.state.as<float>(),
                       y.as<float>(),
                       static_cast<int>(Hk),
                       static_cast<int>(Hv),
                       static_cast<int>(dv),
                       static_cast<int>(K),
                       shape.split,
                       c.l2_eps,
                       c.q_scale,
                       c.norm_eps};
    switch (dk) {
      case 16:
        return launch_core<16>(p, shape);
      case 32:
        return launch_core<32>(p, shape);
      case 64:
        return launch_core<64>(p, shape);
      case 128:
        return launch_core<128>(p, shape);
      default:
        return launch_core<256>(p, shape);  // core_shape takes no other
    }
  }
  // Qualified: DeltaRuleForm would bring in the backend ops of the same names too.
  cuda::gdn_prepare(c.qkv, c.conv_weight, c.window, c.a, c.b, c.a_log, c.dt_bias, c.l2_eps,
                    c.q_scale, c.q, c.k, c.v, c.g, c.beta);
  cuda::gated_delta_rule(c.q, c.k, c.v, c.g, c.beta, c.state, c.o, c.form);
  cuda::rms_norm_gated(c.o.reshaped({T * Hv, dv}), c.norm, c.z, c.norm_eps, y);
}

}  // namespace strata::backend::cuda
