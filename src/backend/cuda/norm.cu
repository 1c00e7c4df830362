// RMSNorm on the GPU, alone or after the residual add (add_rms_norm): one block per row, fp32 sum
// of squares reduced with warp shuffles.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cluster.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/feed.h"
#include "backend/cuda/launch.h"

namespace strata::backend::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxThreads = 1024;
constexpr int kMaxFeedCluster = 8;  // blocks of a norm that writes a form (portable cluster size)

// The sum of v over the block (any whole number of warps up to 1024 threads).
__device__ float block_sum(float v) {
  __shared__ float partial[kMaxThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

__global__ void rms_norm_kernel(const float* x, const float* w, float eps, bool one_plus_w,
                                int64_t d, float* out) {
  wait_for_inputs();
  const float* xr = x + blockIdx.x * d;
  float* o = out + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) ss += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += kThreads) o[i] = xr[i] * inv * (one_plus_w ? 1.0f + w[i] : w[i]);
}

// Block `row`: x[row] += delta[row], then, for rows from first_normed on, out[row − first_normed] =
// rms_norm(x[row]). Each thread reads back only the sums it wrote itself. kVec: rows in float4.
template <bool kVec>
__global__ void add_rms_norm_kernel(float* x, const float* delta, const float* w, float eps,
                                    bool one_plus_w, int64_t d, int64_t first_normed, float* out) {
  wait_for_inputs();
  const int64_t row = blockIdx.x;
  float* xr = x + row * d;
  const float* dr = delta + row * d;
  float ss = 0.0f;
  if constexpr (kVec) {
    for (int64_t i = threadIdx.x; i < d / 4; i += kThreads) {
      float4 a = reinterpret_cast<const float4*>(xr)[i];
      const float4 b = reinterpret_cast<const float4*>(dr)[i];
      a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
      reinterpret_cast<float4*>(xr)[i] = a;
      ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    }
  } else {
    for (int64_t i = threadIdx.x; i < d; i += kThreads) {
      const float a = xr[i] + dr[i];
      xr[i] = a;
      ss += a * a;
    }
  }
  if (row < first_normed) return;  // the whole block: no barrier is left waiting
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  float* o = out + (row - first_normed) * d;
  if constexpr (kVec) {
    for (int64_t i = threadIdx.x; i < d / 4; i += kThreads) {
      const float4 a = reinterpret_cast<const float4*>(xr)[i];
      float4 wv = reinterpret_cast<const float4*>(w)[i];
      if (one_plus_w) wv.x += 1.0f, wv.y += 1.0f, wv.z += 1.0f, wv.w += 1.0f;
      reinterpret_cast<float4*>(o)[i] =
          make_float4(a.x * inv * wv.x, a.y * inv * wv.y, a.z * inv * wv.z, a.w * inv * wv.w);
    }
  } else {
    for (int64_t i = threadIdx.x; i < d; i += kThreads)
      o[i] = xr[i] * inv * (one_plus_w ? 1.0f + w[i] : w[i]);
  }
}

// add_rms_norm for rows of at most kPer·blockDim.x float4s, 16-byte aligned: a thread loads all of
// its x and delta at once and keeps the sums in registers for the norm (one round trip to memory
// instead of one per loop step: a decode step's 4096-wide rows are latency-bound).
template <int kPer>
__global__ void __launch_bounds__(kMaxThreads)
    add_rms_norm_cached_kernel(float* x, const float* delta, const float* w, float eps, bool one_plus_w,
                               int64_t d, int64_t first_normed, float* out) {
  const int64_t row = blockIdx.x;
  const int n4 = static_cast<int>(d / 4);
  // The norm weights before the wait (no kernel writes them), so that no load is left after the sum.
  float4 wv[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < n4) {
      wv[k] = reinterpret_cast<const float4*>(w)[i];
      if (one_plus_w) wv[k].x += 1.0f, wv[k].y += 1.0f, wv[k].z += 1.0f, wv[k].w += 1.0f;
    }
  }
  wait_for_inputs();
  float4* xr = reinterpret_cast<float4*>(x + row * d);
  const float4* dr = reinterpret_cast<const float4*>(delta + row * d);
  float4 a[kPer], b[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < n4) a[k] = xr[i], b[k] = dr[i];
  }
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i >= n4) continue;
    a[k].x += b[k].x, a[k].y += b[k].y, a[k].z += b[k].z, a[k].w += b[k].w;
    xr[i] = a[k];
    ss += a[k].x * a[k].x + a[k].y * a[k].y + a[k].z * a[k].z + a[k].w * a[k].w;
  }
  if (row < first_normed) return;  // the whole block: no barrier is left waiting
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  float4* o = reinterpret_cast<float4*>(out + (row - first_normed) * d);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i >= n4) continue;
    o[i] = make_float4(a[k].x * inv * wv[k].x, a[k].y * inv * wv[k].y, a[k].z * inv * wv[k].z,
                       a[k].w * inv * wv[k].w);
  }
}

// One row's norm (row blockIdx.y of x, delta, out and the forms), with the residual add first
// when delta is not null (x += delta), that also writes the normed row's form for the matmul it
// feeds (feed.h), over a cluster of blocks: block r
// takes the form's tasks [r·per, (r+1)·per), one a thread (8 values), reads and writes only those
// values of x, and stores its Σx² into every block of the cluster; each block sums the cluster's
// in rank order (the same sum in every block). Spread over the cluster's SMs, the conversion is
// short: on one SM it took about 1.3 µs of a 4096-wide row's norm (H100 timeline, 2026-11-27).
template <int kBits, int kFolds>
__global__ void __launch_bounds__(kMaxThreads)
    norm_feed_kernel(float* x, const float* delta, const float* w, float eps, bool one_plus_w,
                     int64_t d, int per, float* out, uint4* form, int64_t form_vecs) {
  __shared__ float cluster_squares[kMaxFeedCluster];
  const int64_t row = blockIdx.y;
  x += row * d, out += row * d, form += row * form_vecs;
  if (delta != nullptr) delta += row * d;
  const int rank = cluster_rank(), cluster = static_cast<int>(gridDim.x);
  const int64_t u = int64_t{rank} * per + threadIdx.x;
  const bool active = static_cast<int>(threadIdx.x) < per;
  // The 8 values of task u of a row, as two float4s.
  auto load8 = [u](const float* row, float4(&v)[2]) {
    const float4* p = reinterpret_cast<const float4*>(row) + 2 * u;
    v[0] = p[0], v[1] = p[1];
  };
  auto store8 = [u](float* row, const float4(&v)[2]) {
    float4* p = reinterpret_cast<float4*>(row) + 2 * u;
    p[0] = v[0], p[1] = v[1];
  };
  float4 wv[2], a[2];
  if (active) {
    load8(w, wv);
    if (one_plus_w)
      for (float4& v : wv) v.x += 1.0f, v.y += 1.0f, v.z += 1.0f, v.w += 1.0f;
  }
  wait_for_inputs();
  float ss = 0.0f;
  if (active) {
    load8(x, a);
    if (delta != nullptr) {
      float4 b[2];
      load8(delta, b);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        a[h].x += b[h].x, a[h].y += b[h].y, a[h].z += b[h].z, a[h].w += b[h].w;
    }
    for (const float4& v : a) ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  float squares = block_sum(ss);
  if (cluster > 1) {
    // Warp 0 sends the block's sum and alone releases (x is stored after the barrier: nothing else
    // to release); the other warps' arrivals are relaxed.
    if (threadIdx.x == 0)
      for (int r = 0; r < cluster; ++r) *in_block(cluster_squares + rank, r) = squares;
    if (threadIdx.x < 32) {
      cluster_arrive();
    } else {
      cluster_arrive_relaxed();
    }
    cluster_wait();
    squares = 0.0f;
    for (int r = 0; r < cluster; ++r) squares += cluster_squares[r];
  }
  if (active && delta != nullptr) store8(x, a);
  const float inv = rsqrtf(squares / static_cast<float>(d) + eps);
  float v[8] = {};
  if (active) {
    float4 n[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      n[h] = make_float4(a[h].x * inv * wv[h].x, a[h].y * inv * wv[h].y, a[h].z * inv * wv[h].z,
                         a[h].w * inv * wv[h].w);
      v[4 * h] = n[h].x, v[4 * h + 1] = n[h].y, v[4 * h + 2] = n[h].z, v[4 * h + 3] = n[h].w;
    }
    store8(out, n);
  }
  // More than one row: the multi-row matmul's layout (the same values placed for its lanes).
  if (gridDim.y > 1) {
    write_form<kBits, kFolds, true>(v, u, active, form, d);
  } else {
    write_form<kBits, kFolds>(v, u, active, form, d);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The norm of `rows` rows of d values (at most kMaxFedRows) with their feed's forms (delta null:
// no residual add), each row as the norm of that row alone, where the
// kernel takes the row: 16-byte aligned, a whole number of the form's runs a block. False: not
// launched (the feed then records no form). The cluster is the largest of 8, 4, 2 and 1 blocks
// whose shares are whole runs (8 tasks: 64 values at 4 bits, two runs at 8), at most 1024 tasks
// a block; only rows of 512 tasks or more are split (4096 values: a single block measured 424-426
// tok/s against 435-436 over 8 blocks for the 9B, but 1614-1623 against 1554-1558 for the 0.8B's
// 1024-wide rows; H100, 2026-11-27).
bool launch_norm_feed(MatmulFeed* feed, float* x, const float* delta, const float* w, float eps,
                      bool one_plus_w, int64_t d, int64_t rows, float* out) {
  const int64_t tasks = d / 8;
  int cluster = clusters_supported() && tasks >= 512 ? kMaxFeedCluster : 1;
  while (cluster > 1 && tasks % (8 * cluster) != 0) cluster /= 2;
  const int64_t per = tasks / cluster;
  const bool fits = d % 8 == 0 && per <= kMaxThreads && aligned16(x) && aligned16(w) &&
                    aligned16(out) && (delta == nullptr || aligned16(delta));
  const FeedForm form = begin_feed(FeedKind::kNorm, feed, out, rows, d, fits);
  if (form.data == nullptr) return false;
  // Whole warps: the lanes past the block's last task hold zeros (a share may end in part of one).
  const int threads = static_cast<int>((per + 31) / 32 * 32);
  with_form_format(form, [&](auto bits, auto folds) {
    launch_clustered(static_cast<unsigned>(cluster), norm_feed_kernel<bits.value, folds.value>,
                     dim3(static_cast<unsigned>(cluster), static_cast<unsigned>(rows)), threads, 0, x,
                     delta, w, eps, one_plus_w, d, static_cast<int>(per), out, form.data,
                     static_cast<int64_t>(form_bytes(form.bits, d) / sizeof(uint4)));
  });
  return true;
}

}  // namespace

void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& w, float eps, bool one_plus_w,
                  const Tensor& out, MatmulFeed* feed) {
  const int64_t d = w.numel();
  const int64_t rows = x.numel() / d, normed = out.numel() / d;
  MatmulFeed::none(feed);
  if (rows == 0) return;
  float* px = x.as<float>();
  const float* pd = delta.as<const float>();
  const float* pw = w.as<const float>();
  float* po = out.as<float>();
  // Every row normed, few enough for the decode matmul: the rows each as alone, with their forms.
  if (normed == rows && rows <= kMaxFedRows && launch_norm_feed(feed, px, pd, pw, eps, one_plus_w, d, rows, po))
    return;
  const unsigned blocks = static_cast<unsigned>(rows);
  const bool vec = d % 4 == 0 && aligned16(px) && aligned16(pd) && aligned16(pw) && aligned16(po);
  const int64_t n4 = d / 4;
  if (vec && n4 <= 4 * kMaxThreads) {
    // As many threads as float4s (whole warps), up to 1024; then up to 4 float4s each.
    const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (n4 + 31) / 32 * 32));
    const int64_t per = (n4 + threads - 1) / threads;
    if (per == 1) {
      launch(add_rms_norm_cached_kernel<1>, blocks, threads, 0, px, pd, pw, eps, one_plus_w, d, rows - normed, po);
    } else if (per == 2) {
      launch(add_rms_norm_cached_kernel<2>, blocks, threads, 0, px, pd, pw, eps, one_plus_w, d, rows - normed, po);
    } else {
      launch(add_rms_norm_cached_kernel<4>, blocks, threads, 0, px, pd, pw, eps, one_plus_w, d, rows - normed, po);
    }
  } else if (vec) {
    launch(add_rms_norm_kernel<true>, blocks, kThreads, 0, px, pd, pw, eps, one_plus_w, d,
           rows - normed, po);
  } else {
    launch(add_rms_norm_kernel<false>, blocks, kThreads, 0, px, pd, pw, eps, one_plus_w, d,
           rows - normed, po);
  }
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out,
              MatmulFeed* feed) {
  const int64_t d = w.numel();
  const int64_t rows = x.numel() / d;
  MatmulFeed::none(feed);
  if (rows == 0) return;
  // x is only read: the kernel writes x back only where it adds a delta.
  if (rows <= kMaxFedRows && launch_norm_feed(feed, x.as<float>(), nullptr, w.as<const float>(), eps,
                                              one_plus_w, d, rows, out.as<float>()))
    return;
  launch(rms_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, x.as<const float>(),
         w.as<const float>(), eps, one_plus_w, d, out.as<float>());
}

}  // namespace strata::backend::cuda
