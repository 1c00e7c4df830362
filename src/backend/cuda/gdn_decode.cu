// The Gated DeltaNet mixer's core for one token in one launch (gdn_core, backend/gdn.h): causal
// conv + SiLU with the window advanced, the L2 norms of q and k, the gates, the delta rule on the
// fp32 state, and the gated RMSNorm × SiLU(z). Longer steps, and shapes this kernel does not take,
// run the three ops it replaces (gdn_prepare, gated_delta_rule, rms_norm_gated).
//
// Work. A cluster of r·s blocks per key head: r = Hv/Hk value heads share the key head, and s
// splits each value head's dv state rows. Block ρ of a cluster takes value head ρ / s of the group
// and the (ρ % s)th slice of its rows, kG lanes a row as in the delta rule's row kernel.
//
// Latency. Everything a block reads after its wait is issued at once (the key head's q and k
// channels, its rows' v channels, z and the gates), so a step pays one L2 round trip and one
// cluster barrier after the kernel before it. Every block convolves all 2·dk q and k channels of
// its key head itself instead of trading them through distributed shared memory; one block of the
// cluster alone advances each channel's window, after a first barrier phase that the blocks enter
// once their window reads are in hand and leave once their conv is done, so it adds no wait. Each
// value head's Σo² goes from its s blocks into every one of them (distributed shared memory
// stores), then the second phase; each block sums the s values in rank order, so every block of
// a head sums the same way. Measured on an H100 (2026-11-27, Qwen3.5-9B 4-bit decode): the
// kernel of one DSMEM exchange of the conv outputs and two barriers took 5.3 µs a layer from its
// wait to its last block's exit.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/activations.h"
#include "backend/cuda/cluster.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/feed.h"
#include "backend/cuda/gdn_common.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/warp.h"
#include "backend/tuning.h"

namespace strata::backend::cuda {

namespace {

constexpr int kCoreMaxQk = 2;  // q and k channels one thread convolves
constexpr int kCoreMaxThreads = 512;
constexpr int kCoreMaxCluster = 8;  // the portable cluster size
constexpr int kCoreMaxWarps = kCoreMaxThreads / 32;
constexpr int kCoreMaxRows = 64;  // sequences of one batched launch (gdn_core_rows)

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
  const float* window_in;  // the window and state the token reads: window and state but for a
  const float* state_in;   // verify step's later positions (gdn_core_positions)
  float* window;
  float* state;
  float* y;
  uint4* form;  // y's form for the out projection (feed.h), or null
  int form_bits, form_folds;
  int Hk, Hv, dv, K, split;
  float l2_eps, q_scale, norm_eps;
};

// The cluster's layout of one key head's work.
struct CoreShape {
  int split;             // blocks a value head
  int cluster, threads;  // blocks a cluster, threads a block
  size_t shared_bytes;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // the kernel's only users (sm_90 and above)
// The window update of one channel: conv + SiLU of its taps over the window and the new value,
// and the window advanced by one (written by the caller, who alone owns the channel).
struct ChannelConv {
  float taps[kMaxConvK], win[kMaxConvK - 1];

  __device__ void load(const float* conv_weight, const float* window, int64_t C, int64_t col,
                       int K) {
#pragma unroll
    for (int t = 0; t < kMaxConvK; ++t) taps[t] = t < K ? conv_weight[col * K + t] : 0.0f;
#pragma unroll
    for (int t = 0; t < kMaxConvK - 1; ++t) win[t] = t < K - 1 ? window[t * C + col] : 0.0f;
  }
  __device__ float window_sum() const {
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < kMaxConvK - 1; ++t) sum += win[t];
    return sum;
  }
  __device__ float apply(float cur, int K) const {
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < kMaxConvK; ++t) {
      const float row = t < K - 1 ? win[t < kMaxConvK - 1 ? t : 0] : cur;
      if (t < K) sum += taps[t] * row;
    }
    return silu(sum);
  }
  __device__ void advance(float* window, int64_t C, int64_t col, float cur, int K) const {
#pragma unroll
    for (int t = 0; t < kMaxConvK - 1; ++t)
      if (t < K - 1)
        window[t * C + col] = t + 1 < K - 1 ? win[t + 1 < kMaxConvK - 1 ? t + 1 : 0] : cur;
  }
};

// The form of the block's rows of y (feed.h): its rows are whole runs of the out projection's form
// (gdn_core checks), so the block writes them alone. Each row's value goes through shared memory
// (`ys`, rows floats) to the lane that takes its task of 8.
__device__ void write_rows_form(const CoreParams& p, float y, int j, int part, int rows,
                                float* ys) {
  const int lanes = blockDim.x / rows;  // a row's lanes (kG of the kernel)
  if (threadIdx.x % lanes == 0) ys[threadIdx.x / lanes] = y;
  __syncthreads();
  const int tasks = rows / 8, t = static_cast<int>(threadIdx.x);
  if (t >= (tasks + 31) / 32 * 32) return;  // whole warps
  const bool active = t < tasks;
  float v[8] = {};
  if (active)
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = ys[8 * t + e];
  const int64_t u = (int64_t{j} * p.dv + int64_t{part} * rows) / 8 + t, K = int64_t{p.Hv} * p.dv;
  with_format(p.form_bits, p.form_folds,
              [&](auto bits, auto folds) { write_form<bits.value, folds.value>(v, u, active, p.form, K); });
}

// A relaxed arrival at the cluster barrier once `read` is in hand: a value computed from the loads
// that must be done first, so the arrival waits for those and not for the other loads in flight
// (the state rows), as a release would.
__device__ __forceinline__ void cluster_arrive_after(float read) {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::"f"(read) : "memory");
}
#endif

// One token of one sequence (below: the kernels of one sequence and of a batch's rows).
template <int kDk>
__device__ __forceinline__ void core_step(const CoreParams& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kG = CoreRows<kDk>::kG, kNc = CoreRows<kDk>::kNc;
  extern __shared__ float shared[];
  const int r = p.Hv / p.Hk, s = p.split, cluster = r * s;
  const int rank = cluster_rank();
  const int kh = static_cast<int>(blockIdx.x) / cluster, m = rank / s, part = rank % s;
  const int j = kh * r + m;  // the value head
  const int rows = p.dv / s;
  const int i = part * rows + threadIdx.x / kG;  // this thread's row of it
  const int gl = threadIdx.x % kG, lane = threadIdx.x % 32;
  const int64_t C = 2LL * p.Hk * kDk + static_cast<int64_t>(p.Hv) * p.dv;
  float* qk = shared;          // [2·dk]: q, then k, of the key head after conv + SiLU
  float* vrow = qk + 2 * kDk;  // [rows]: this block's rows' v after conv + SiLU
  // [warps]: partial Σo²; then at [kCoreMaxWarps + part], the Σo² of each block of the head
  float* sums = vrow + rows;
  const int K = p.K;

  // Before the wait: weights, the windows of the channels this thread convolves and its state row
  // (last written by this layer a step ago: launch.h). Thread τ takes q/k channels τ and τ +
  // threads of the key head, and threads below `rows` the v channel of row τ of the block's slice.
  int64_t qk_col[kCoreMaxQk];
  ChannelConv qk_conv[kCoreMaxQk];
#pragma unroll
  for (int e = 0; e < kCoreMaxQk; ++e) {
    const int c = threadIdx.x + e * blockDim.x;
    qk_col[e] = c >= 2 * kDk ? -1
                : c < kDk    ? int64_t{kh} * kDk + c
                             : int64_t{p.Hk} * kDk + int64_t{kh} * kDk + c - kDk;
    if (qk_col[e] >= 0) qk_conv[e].load(p.conv_weight, p.window_in, C, qk_col[e], K);
  }
  const bool has_v = static_cast<int>(threadIdx.x) < rows;
  const int64_t v_col = 2LL * p.Hk * kDk + int64_t{j} * p.dv + part * rows + threadIdx.x;
  ChannelConv v_conv;
  if (has_v) v_conv.load(p.conv_weight, p.window_in, C, v_col, K);
  float4 st[kNc];
  const int64_t srow_offset = (int64_t{j} * p.dv + i) * kDk;
  const float4* srow_in = reinterpret_cast<const float4*>(p.state_in + srow_offset) + gl;
  float4* srow = reinterpret_cast<float4*>(p.state + srow_offset) + gl;
#pragma unroll
  for (int c = 0; c < kNc; ++c) st[c] = srow_in[c * kG];
  const float norm_w = p.norm[i], a_log = p.a_log[j], dt_bias = p.dt_bias[j];
  wait_for_inputs();
  float read = has_v ? v_conv.window_sum() : 0.0f;
#pragma unroll
  for (int e = 0; e < kCoreMaxQk; ++e) read += qk_col[e] >= 0 ? qk_conv[e].window_sum() : 0.0f;
  cluster_arrive_after(read);  // phase 1: this thread's window reads are done

  // Every input at once: the raw q/k and v channels, z of this row, the gates' inputs.
  float qk_raw[kCoreMaxQk];
#pragma unroll
  for (int e = 0; e < kCoreMaxQk; ++e) qk_raw[e] = qk_col[e] >= 0 ? p.qkv[qk_col[e]] : 0.0f;
  const float v_raw = has_v ? p.qkv[v_col] : 0.0f;
  const float z = p.z[int64_t{j} * p.dv + i];
  const float a_in = p.a[j], b_in = p.b[j];

  // Conv + SiLU (as gdn_prepare's decode path). A v channel belongs to this block alone; a q/k
  // channel to the one block of the cluster whose slice holds it, which advances its window once
  // every block has read it (phase 1).
#pragma unroll
  for (int e = 0; e < kCoreMaxQk; ++e)
    if (qk_col[e] >= 0) qk[threadIdx.x + e * blockDim.x] = qk_conv[e].apply(qk_raw[e], K);
  if (has_v) {
    vrow[threadIdx.x] = v_conv.apply(v_raw, K);
    v_conv.advance(p.window, C, v_col, v_raw, K);
  }
  const float beta = sigmoid(b_in), g = -expf(a_log) * softplus(a_in + dt_bias);
  cluster_wait();
#pragma unroll
  for (int e = 0; e < kCoreMaxQk; ++e) {
    const int c = threadIdx.x + e * blockDim.x;
    if (qk_col[e] >= 0 && c * cluster / (2 * kDk) == rank)
      qk_conv[e].advance(p.window, C, qk_col[e], qk_raw[e], K);
  }
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
  const float o = delta_row_step<kNc, kG>(st, kc, qc, g, beta, vrow[threadIdx.x / kG]);
  // The rows go back marked evict-last in L2, so some of the layer's state may still be in L2 when
  // the next step reads it, while the weights stream through evict-first. Measured on H100s
  // (2026-11-27, decode @512 at 4 bits, same calls): against plain stores, half the rows evict-last
  // gave 0.8B 1637 to 1648-1652 tok/s and 9B 445-446 to 446-447; against half, all rows gave 9B
  // 449-450 to 452-453 (a quarter: 441-448).
  uint64_t keep;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
#pragma unroll
  for (int c = 0; c < kNc; ++c) {
    float* a = reinterpret_cast<float*>(srow + c * kG);
    asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(a), "f"(st[c].x), "f"(st[c].y),
                 "f"(st[c].z), "f"(st[c].w), "l"(keep) : "memory");
  }

  // Gated RMSNorm over the value head's dv outputs: this block's Σo², stored into each block of
  // the head (phase 2), then the head's, summed in rank order.
  const float squares = warp_sum(gl == 0 ? o * o : 0.0f);
  if (lane == 0) sums[threadIdx.x / 32] = squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    float block_squares = 0.0f;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) block_squares += sums[w];
    for (int h = 0; h < s; ++h) *in_block(sums + kCoreMaxWarps + part, m * s + h) = block_squares;
  }
  cluster_arrive();
  cluster_wait();
  float head_squares = 0.0f;
  for (int h = 0; h < s; ++h) head_squares += sums[kCoreMaxWarps + h];
  const float inv = 1.0f / sqrtf(head_squares / static_cast<float>(p.dv) + p.norm_eps);
  const float y = o * inv * norm_w * silu(z);
  if (gl == 0) p.y[int64_t{j} * p.dv + i] = y;
  if (p.form != nullptr)
    write_rows_form(p, y, j, part, rows, sums + kCoreMaxWarps + kCoreMaxCluster);
#else
  __trap();  // never launched below sm_90: gdn_core checks clusters_supported()
#endif
}

template <int kDk>
__global__ void __launch_bounds__(kCoreMaxThreads) gdn_decode_core_kernel(const CoreParams p) {
  core_step<kDk>(p);
}

// Each sequence's window and state, for a batch's rows (gdn_core_rows): row y of the launch's
// grid is sequence y, one token.
struct CoreRowStates {
  float* window[kCoreMaxRows];
  float* state[kCoreMaxRows];
};

// Row blockIdx.y of the step's qkv, z, a, b and y, against that sequence's window and state: each
// row's clusters run exactly the one-sequence kernel's work.
template <int kDk>
__global__ void __launch_bounds__(kCoreMaxThreads)
    gdn_decode_core_rows_kernel(const CoreParams p, const CoreRowStates rows) {
  CoreParams q = p;
  const int64_t row = blockIdx.y, C = 2LL * p.Hk * kDk + int64_t{p.Hv} * p.dv, V = int64_t{p.Hv} * p.dv;
  q.qkv += row * C, q.z += row * V, q.a += row * p.Hv, q.b += row * p.Hv, q.y += row * V;
  q.window = rows.window[row], q.state = rows.state[row];
  q.window_in = q.window, q.state_in = q.state;
  core_step<kDk>(q);
}

// A verify step's positions of one sequence (gdn_core_positions), one after another in one launch:
// position t reads the state position t - 1 wrote (the sequence's own for t = 0) and writes its own
// to slot t (the sequence's own for the last), each position exactly the one-token kernel's work.
// Between positions, a block's state rows and v channels are its threads' own; the q/k windows
// that another block of the cluster advanced are visible after the second cluster barrier (a
// release and an acquire) that every position passes.
struct CorePositions {
  float* window[kCoreMaxRows];  // after position t (t < T - 1)
  float* state[kCoreMaxRows];
};

template <int kDk>
__global__ void __launch_bounds__(kCoreMaxThreads)
    gdn_decode_core_positions_kernel(const CoreParams p, const CorePositions after, int T) {
  const int64_t C = 2LL * p.Hk * kDk + int64_t{p.Hv} * p.dv, V = int64_t{p.Hv} * p.dv;
  for (int t = 0; t < T; ++t) {
    CoreParams q = p;
    q.qkv += t * C, q.z += t * V, q.a += t * p.Hv, q.b += t * p.Hv, q.y += t * V;
    q.window_in = t == 0 ? p.window : after.window[t - 1];
    q.state_in = t == 0 ? p.state : after.state[t - 1];
    q.window = t + 1 == T ? p.window : after.window[t];
    q.state = t + 1 == T ? p.state : after.state[t];
    core_step<kDk>(q);
  }
}

// The shape for value heads split s ways, or cluster 0 where it does not fit (or dk has no kernel).
CoreShape core_shape(int dk, int r, int dv, int s) {
  if (dk != 16 && dk != 32 && dk != 64 && dk != 128 && dk != 256) return {};
  const int lanes = dk <= 128 ? 4 : 8;
  const int cluster = r * s;
  if (cluster > kCoreMaxCluster || dv % s != 0) return {};  // s ≤ cluster: the Σo² slots fit
  const int rows = dv / s, threads = rows * lanes;
  if (threads % 32 != 0 || threads > kCoreMaxThreads || 2 * dk > kCoreMaxQk * threads) return {};
  return {
      s, cluster, threads,
      sizeof(float) * static_cast<size_t>(2 * dk + rows + kCoreMaxWarps + kCoreMaxCluster + rows)};
}

// Each value head's rows split in two where that fits, else whole; Tuning::gdn_split (1, 2, 4 or 8)
// names the split instead where it fits, for tuning and tests (read on every eager call; a graph
// keeps the shape it was captured with). Measured on an H100 (2026-11-22, decode tok/s at 4 bits,
// splits 1 / 2 / 4 / 8): Qwen3.5-9B 403-405 / 413-414 / 412 / 409-413, Qwen3.5-0.8B 1440 /
// 1421-1436 / 1393-1409 / 1367-1394; the three launches this replaces gave 411-412 and 1380-1386.
CoreShape choose_core_shape(int dk, int r, int dv) {
  for (const int s : {tuning().gdn_split, 2, 1}) {
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

template <int kDk>
void launch_core_rows(const CoreParams& p, const CoreRowStates& rows, int64_t T, const CoreShape& shape) {
  launch_clustered(static_cast<unsigned>(shape.cluster), gdn_decode_core_rows_kernel<kDk>,
                   dim3(static_cast<unsigned>(p.Hk * shape.cluster), static_cast<unsigned>(T)),
                   static_cast<unsigned>(shape.threads), shape.shared_bytes, p, rows);
}

template <int kDk>
void launch_core_positions(const CoreParams& p, const CorePositions& after, int64_t T, const CoreShape& shape) {
  launch_clustered(static_cast<unsigned>(shape.cluster), gdn_decode_core_positions_kernel<kDk>,
                   static_cast<unsigned>(p.Hk * shape.cluster), static_cast<unsigned>(shape.threads),
                   shape.shared_bytes, p, after, static_cast<int>(T));
}

// The one-token shape of the core, or none (cluster 0) where the kernel does not take it.
CoreShape decode_shape(const GdnCore& c, int64_t T) {
  const int64_t dk = c.q.dim(2), Hk = c.q.dim(1), Hv = c.v.dim(1), dv = c.v.dim(2);
  const int64_t K = c.conv_weight.dim(1);
  return T == 1 && clusters_supported() && K >= 2 && K <= kMaxConvK &&
                 reinterpret_cast<uintptr_t>(c.state.data) % 16 == 0
             ? choose_core_shape(static_cast<int>(dk), static_cast<int>(Hv / Hk), static_cast<int>(dv))
             : CoreShape{};
}

CoreParams core_params(const GdnCore& c, const Tensor& y, const FeedForm& form, const CoreShape& shape) {
  return CoreParams{c.qkv.as<const float>(),
                    c.z.as<const float>(),
                    c.a.as<const float>(),
                    c.b.as<const float>(),
                    c.conv_weight.as<const float>(),
                    c.a_log.as<const float>(),
                    c.dt_bias.as<const float>(),
                    c.norm.as<const float>(),
                    c.window.as<const float>(),
                    c.state.as<const float>(),
                    c.window.as<float>(),
                    c.state.as<float>(),
                    y.as<float>(),
                    form.data,
                    form.bits,
                    form.folds,
                    static_cast<int>(c.q.dim(1)),
                    static_cast<int>(c.v.dim(1)),
                    static_cast<int>(c.v.dim(2)),
                    static_cast<int>(c.conv_weight.dim(1)),
                    shape.split,
                    c.l2_eps,
                    c.q_scale,
                    c.norm_eps};
}

// f(dk) with dk a compile-time value, for the key head widths the kernel takes.
template <typename F>
void with_dk(int64_t dk, F&& f) {
  switch (dk) {
    case 16:
      return f(std::integral_constant<int, 16>{});
    case 32:
      return f(std::integral_constant<int, 32>{});
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 128:
      return f(std::integral_constant<int, 128>{});
    default:
      return f(std::integral_constant<int, 256>{});  // core_shape takes no other
  }
}

}  // namespace

void gdn_core(const GdnCore& c, const Tensor& y, MatmulFeed* feed) {
  const int64_t T = c.qkv.dim(0), Hv = c.v.dim(1), dv = c.v.dim(2);
  const CoreShape shape = decode_shape(c, T);
  // A form of y where each block's rows are whole runs of it.
  const int64_t run = form_run(feed);
  const FeedForm form = begin_feed(FeedKind::kGdnCore, feed, y.data, T, Hv * dv,
                                   shape.cluster != 0 && run > 0 && (dv / shape.split) % run == 0);
  if (shape.cluster != 0) {
    const CoreParams p = core_params(c, y, form, shape);
    with_dk(c.q.dim(2), [&](auto dk) { launch_core<dk.value>(p, shape); });
    return;
  }
  // Qualified: DeltaRuleForm would bring in the backend ops of the same names too.
  cuda::gdn_prepare(c.qkv, c.conv_weight, c.window, c.a, c.b, c.a_log, c.dt_bias, c.l2_eps,
                    c.q_scale, c.q, c.k, c.v, c.g, c.beta);
  cuda::gated_delta_rule(c.q, c.k, c.v, c.g, c.beta, c.state, c.o, c.form);
  cuda::rms_norm_gated(c.o.reshaped({T * Hv, dv}), c.norm, c.z, c.norm_eps, y);
}

bool gdn_core_rows(const GdnCore& c, std::span<const Tensor> windows, std::span<const Tensor> states,
                   const Tensor& y) {
  const auto T = static_cast<int64_t>(states.size());
  if (T < 2 || T > kCoreMaxRows) return false;
  GdnCore one = c;  // row 0's shape decides: every row has the same
  one.state = states[0];
  const CoreShape shape = decode_shape(one, 1);
  if (shape.cluster == 0) return false;
  CoreRowStates rows{};
  for (int64_t t = 0; t < T; ++t) {
    if (reinterpret_cast<uintptr_t>(states[static_cast<size_t>(t)].data) % 16 != 0) return false;
    rows.window[t] = windows[static_cast<size_t>(t)].as<float>();
    rows.state[t] = states[static_cast<size_t>(t)].as<float>();
  }
  const CoreParams p = core_params(one, y, FeedForm{}, shape);
  with_dk(c.q.dim(2), [&](auto dk) { launch_core_rows<dk.value>(p, rows, T, shape); });
  return true;
}

bool gdn_core_positions(const GdnCore& c, std::span<const Tensor> after_windows,
                        std::span<const Tensor> after_states, const Tensor& y) {
  const int64_t T = c.qkv.dim(0);
  if (T < 2 || T > kCoreMaxRows) return false;
  const CoreShape shape = decode_shape(c, 1);
  if (shape.cluster == 0) return false;
  CorePositions after{};
  for (int64_t t = 0; t + 1 < T; ++t) {
    if (reinterpret_cast<uintptr_t>(after_states[static_cast<size_t>(t)].data) % 16 != 0) return false;
    after.window[t] = after_windows[static_cast<size_t>(t)].as<float>();
    after.state[t] = after_states[static_cast<size_t>(t)].as<float>();
  }
  const CoreParams p = core_params(c, y, FeedForm{}, shape);
  with_dk(c.q.dim(2), [&](auto dk) { launch_core_positions<dk.value>(p, after, T, shape); });
  return true;
}

}  // namespace strata::backend::cuda
