// cuda::attention against the CPU op on random inputs: decode, speculative-verify and prefill
// shapes, GQA groups, sliding windows, KV bounds above the true length, F32 and BF16 caches, paged
// caches (block tables), decode steps of many sequences (attention_rows) bit for bit as alone, and a
// captured graph replayed at later positions. Skips where no CUDA device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/tensor_test_util.h"
#include "backend/ops.h"

namespace strata {
namespace {

namespace cuda = backend::cuda;

using test::nan_tensor;
using test::random_tensor;

// Tolerance |got - ref| ≤ kTol · (1 + |ref|): both sides are fp32 with different summation orders
// (measured worst 2e-6 against a float64 reference on an H200); a key dropped or added among a few
// hundred moves outputs by 1e-3 or more.
constexpr float kTol = 5e-5f;

void expect_close(const HostTensor& got, const HostTensor& ref, float tol,
                  const std::string& what) {
  int64_t bad = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const float g = got.as<float>()[i], r = ref.as<float>()[i];
    if (!(std::fabs(g - r) <= tol * (1.0f + std::fabs(r)))) {  // NaN fails too
      if (bad == 0) ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << r;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// A KV cache on the host and the device, F32 or BF16 on the device; the host copy holds the
// device's values as F32 (for a BF16 cache, the rounded values), which is what the CPU op computes
// with either way (tests/backend/matmul_test.cpp). Rows a case must not read are NaN on the device
// (the CPU reference never reads them), so a kernel that reads past the true length or before the
// window start, or weights an unwritten row by zero, fails.
class Cache {
 public:
  Cache(int64_t capacity, int64_t kv_heads, int64_t head_dim, uint32_t seed,
        DType dtype = DType::kF32) {
    const Shape shape{capacity, kv_heads, head_dim};
    stored_k_ = test::rounded(random_tensor(shape, seed), dtype, k_);
    stored_v_ = test::rounded(random_tensor(shape, seed + 1), dtype, v_);
    HostTensor unused;
    nan_ = test::rounded(nan_tensor(shape), dtype, unused);
    dk_ = cuda::upload(stored_k_);
    dv_ = cuda::upload(stored_v_);
  }

  const HostTensor& k() const { return k_; }
  const HostTensor& v() const { return v_; }
  const Tensor& dk() const { return dk_.view; }
  const Tensor& dv() const { return dv_.view; }
  int64_t capacity() const { return k_.shape()[0]; }
  DType dtype() const { return stored_k_.dtype(); }

  // Device rows [lo, hi] hold the cache; all others NaN.
  void expose(int64_t lo, int64_t hi) {
    const size_t row = stored_k_.view().nbytes() / static_cast<size_t>(capacity());
    for (const auto& [host, dev] : {std::pair{&stored_k_, &dk_}, std::pair{&stored_v_, &dv_}}) {
      auto* d = static_cast<char*>(dev->view.data);
      cuda::copy(host->as<char>(), Device::kCpu, d, Device::kCuda, host->view().nbytes());
      if (lo > 0) cuda::copy(nan_.as<char>(), Device::kCpu, d, Device::kCuda, lo * row);
      if (hi + 1 < capacity())
        cuda::copy(nan_.as<char>(), Device::kCpu, d + (hi + 1) * row, Device::kCuda,
                   (capacity() - hi - 1) * row);
    }
  }

 private:
  HostTensor k_, v_, stored_k_, stored_v_, nan_;
  cuda::DeviceTensor dk_, dv_;
};

struct Case {
  int64_t q_heads, T, start, window;
  std::vector<int64_t> bounds;
};

// Runs one case (positions start .. start + T - 1) at each bound and compares with the CPU op.
void check_case(Cache& cache, const Case& c, uint32_t seed, float tol = kTol) {
  const int64_t D = cache.k().shape()[2], T = c.T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const HostTensor q = random_tensor({T, c.q_heads, D}, seed);
  HostTensor positions(DType::kI32, {T});
  for (int64_t t = 0; t < T; ++t) positions.as<int32_t>()[t] = static_cast<int32_t>(c.start + t);
  HostTensor ref(DType::kF32, {T, c.q_heads, D}), got(DType::kF32, {T, c.q_heads, D});
  std::vector<int32_t> rows(static_cast<size_t>(c.start + T));  // the cache is the sequence's own
  std::iota(rows.begin(), rows.end(), 0);
  backend::cpu::attention(q, cache.k(), cache.v(),
                          std::span<const int32_t>(positions.as<int32_t>(), T), rows,
                          cache.capacity(), scale, c.window, ref);

  cache.expose(c.window > 0 ? std::max<int64_t>(0, c.start - c.window + 1) : 0, c.start + T - 1);
  const auto dq = cuda::upload(q), dpos = cuda::upload(positions);
  for (int64_t bound : c.bounds) {
    const auto dout = cuda::upload(nan_tensor({T, c.q_heads, D}));  // every element must be written
    backend::attention(dq.view, cache.dk(), cache.dv(), dpos.view, bound, scale, c.window,
                       dout.view);
    cuda::download(dout.view, got);
    std::ostringstream what;
    what << dtype_name(cache.dtype()) << " D " << D << " Hq " << c.q_heads << " Hkv "
         << cache.k().shape()[1] << " T " << T << " start " << c.start << " window " << c.window
         << " bound " << bound;
    expect_close(got, ref, tol, what.str());
  }
}

// The exact bound, one rounded up as a caller sizing graphs would, and the whole cache.
std::vector<int64_t> bounds_for(int64_t last_position, int64_t capacity) {
  const int64_t exact = last_position + 1;
  return {exact, std::min<int64_t>((exact + 255) / 256 * 256, capacity), capacity};
}

class CudaAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

constexpr int64_t kCapacity = 4096 + 700;
constexpr int64_t kHeads[][2] = {{16, 4}, {8, 2}, {4, 4}};  // (Hq, Hkv): groups of 4, 4 and 1

// Decode and speculative verify (few queries, split over the keys), from the first position to
// the end of a 4K cache, with and without a window.
TEST_F(CudaAttention, DecodeAndVerifyMatchCpu) {
  uint32_t seed = 100;
  for (int64_t D : {64, 128, 256, 96, 160}) {
    for (const auto& heads : kHeads) {
      if ((D == 96 || D == 160) && heads[0] != 8) continue;
      Cache cache(kCapacity, heads[1], D, seed++);
      for (int64_t T : {1, 3, 8})
        for (int64_t start : {0, 5, 1000, 4095})
          for (int64_t window : {0, 37})
            check_case(cache, {heads[0], T, start, window, bounds_for(start + T - 1, kCapacity)},
                       seed++);
    }
  }
}

// Prefill and long verify chunks (query tiles streamed against K/V tiles), starting at the cache's
// beginning or after earlier chunks.
TEST_F(CudaAttention, PrefillMatchesCpu) {
  uint32_t seed = 200;
  for (int64_t D : {64, 128, 256}) {
    for (const auto& heads : kHeads) {
      Cache cache(kCapacity, heads[1], D, seed++);
      for (int64_t start : {0, 5, 1000, 4095}) {
        for (int64_t window : {0, 37}) {
          check_case(cache, {heads[0], 100, start, window, {start + 100, kCapacity}}, seed++);
          if (D == 128 || (heads[0] == 8 && start != 1000))
            check_case(cache, {heads[0], 700, start, window, {start + 700, kCapacity}}, seed++);
        }
      }
    }
  }
}

// Every head_dim: the multiples of 32 up to 256 (tiled kernels) and others (the any-dim kernel the
// tiny test models use), for a decode step and a short prefill.
TEST_F(CudaAttention, EveryHeadDimMatchesCpu) {
  uint32_t seed = 300;
  for (int64_t D : {16, 32, 48, 64, 80, 96, 128, 160, 192, 200, 224, 256}) {
    Cache cache(600, 2, D, seed++);
    for (int64_t T : {1, 2, 5, 40})
      for (int64_t window : {0, 37})
        check_case(cache, {8, T, 599 - T + 1 - 17, window, bounds_for(599 - 17, 600)}, seed++);
  }
}

// A decode step deep into a 16K cache (many splits), a windowed one, a verify step there, and a
// 2048-token prefill from an empty cache.
TEST_F(CudaAttention, LongContextsMatchCpu) {
  {
    Cache cache(16384, 4, 256, 400);
    check_case(cache, {16, 1, 16000, 0, {16001, 16384}}, 401, 1e-4f);
    check_case(cache, {16, 1, 16000, 4096, {16001, 16384}}, 402, 1e-4f);
    check_case(cache, {16, 4, 16000, 0, {16004, 16384}}, 403, 1e-4f);
  }
  {
    Cache cache(2048, 2, 128, 410);
    check_case(cache, {8, 2048, 0, 0, {2048}}, 411);
    check_case(cache, {8, 2048, 0, 300, {2048}}, 412);
  }
}

// A BF16 cache through every kernel: decode and verify steps (registers), short verify chunks
// (tiles widened in shared memory), prefill chunks (tensor cores, q and p in two bf16 limbs), a
// long split decode, every head dim the tiled kernels take, and head dims the any-dim kernel takes.
// The reference is the CPU op on the F32 values of the same cache.
TEST_F(CudaAttention, Bf16CacheMatchesCpu) {
  uint32_t seed = 600;
  for (int64_t D : {64, 128, 256, 96}) {
    for (const auto& heads : kHeads) {
      if (D == 96 && heads[0] != 8) continue;
      Cache cache(kCapacity, heads[1], D, seed++, DType::kBF16);
      for (int64_t T : {1, 3, 8, 100, 300})
        for (int64_t start : {0, 1000, 4095})
          for (int64_t window : {0, 37})
            check_case(cache, {heads[0], T, start, window, bounds_for(start + T - 1, kCapacity)},
                       seed++);
    }
  }
  {
    Cache cache(16384, 4, 256, seed++, DType::kBF16);
    check_case(cache, {16, 1, 16000, 0, {16001, 16384}}, seed++, 1e-4f);
  }
  {
    Cache cache(2048, 2, 128, seed++, DType::kBF16);
    check_case(cache, {8, 700, 0, 0, {700, 2048}}, seed++);
    check_case(cache, {8, 2048, 0, 0, {2048}}, seed++);
    check_case(cache, {8, 2048, 0, 300, {2048}}, seed++);
  }
  for (int64_t D : {32, 160, 192, 224}) {
    Cache cache(600, 2, D, seed++, DType::kBF16);
    for (int64_t T : {5, 40, 583})
      for (int64_t window : {0, 37})
        check_case(cache, {8, T, 599 - T + 1 - 17, window, bounds_for(599 - 17, 600)}, seed++);
  }
  for (int64_t D : {16, 48, 200}) {
    Cache cache(600, 2, D, seed++, DType::kBF16);
    for (int64_t T : {1, 5})
      check_case(cache, {8, T, 599 - T + 1 - 17, 0, bounds_for(599 - 17, 600)}, seed++);
  }
}

// A paged cache: the sequence's rows in shuffled blocks of a pool whose other rows are NaN. Every
// kernel (decode, verify, prefill on CUDA cores and on tensor cores, the any-dim kernel), F32 and
// BF16, blocks of 16 and 64 tokens: the output is the sequence's own cache's, bit for bit, and the
// fused store writes each token's key and value into its block's row.
TEST_F(CudaAttention, PagedCacheGivesTheOwnCachesBits) {
  const int64_t Hq = 8, Hkv = 2, capacity = 1024;
  uint32_t seed = 700;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t D : {16, 128, 256}) {
      for (int64_t block : {16, 64}) {
        const int64_t table_blocks = capacity / block, pool_blocks = 2 * table_blocks;
        const Shape shape{capacity, Hkv, D}, pool_shape{pool_blocks * block, Hkv, D};
        HostTensor unused;
        const HostTensor k = test::rounded(random_tensor(shape, seed++), dtype, unused);
        const HostTensor v = test::rounded(random_tensor(shape, seed++), dtype, unused);
        HostTensor pk = test::rounded(nan_tensor(pool_shape), dtype, unused);
        HostTensor pv = test::rounded(nan_tensor(pool_shape), dtype, unused);
        std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), std::mt19937(seed++));
        ids.resize(static_cast<size_t>(table_blocks));
        const size_t block_bytes = k.view().nbytes() / static_cast<size_t>(table_blocks);
        for (int64_t b = 0; b < table_blocks; ++b)
          for (const auto& [from, to] : {std::pair{&k, &pk}, std::pair{&v, &pv}})
            std::memcpy(to->as<char>() + static_cast<size_t>(ids[static_cast<size_t>(b)]) * block_bytes,
                        from->as<char>() + static_cast<size_t>(b) * block_bytes, block_bytes);
        const auto dk = cuda::upload(k), dv = cuda::upload(v), dpk = cuda::upload(pk),
                   dpv = cuda::upload(pv), dtable = cuda::upload(test::int_tensor(ids));
        const backend::KvBlocks paged{dtable.view, block};
        for (int64_t T : {1, 5, 40, 300}) {
          for (int64_t start : {int64_t{0}, 700 - T}) {
            const HostTensor q = random_tensor({T, Hq, D}, seed++);
            HostTensor positions(DType::kI32, {T});
            for (int64_t t = 0; t < T; ++t) positions.as<int32_t>()[t] = static_cast<int32_t>(start + t);
            const auto dq = cuda::upload(q), dpos = cuda::upload(positions);
            HostTensor want(DType::kF32, {T, Hq, D}), got(DType::kF32, {T, Hq, D});
            for (int64_t bound : {start + T, capacity}) {
              const auto out_own = cuda::upload(nan_tensor({T, Hq, D}));
              const auto out_paged = cuda::upload(nan_tensor({T, Hq, D}));
              const float scale = 1.0f / std::sqrt(static_cast<float>(D));
              backend::attention(dq.view, dk.view, dv.view, dpos.view, bound, scale, 0, out_own.view);
              backend::attention(dq.view, dpk.view, dpv.view, dpos.view, bound, scale, 0,
                                 out_paged.view, paged);
              cuda::download(out_own.view, want);
              cuda::download(out_paged.view, got);
              EXPECT_EQ(std::memcmp(got.view().data, want.view().data, got.view().nbytes()), 0)
                  << dtype_name(dtype) << " D " << D << " block " << block << " T " << T
                  << " start " << start << " bound " << bound;
            }
          }
        }
        // The fused store: keys and values of 40 tokens from position 690 land in their blocks.
        const int64_t T = 40, start = 690;
        HostTensor positions(DType::kI32, {T});
        for (int64_t t = 0; t < T; ++t) positions.as<int32_t>()[t] = static_cast<int32_t>(start + t);
        const HostTensor q = random_tensor({T, Hq, D}, seed++), nk = random_tensor({T, Hkv, D}, seed++),
                         nv = random_tensor({T, Hkv, D}, seed++);
        backend::RopeParams rope;
        rope.rotary_dim = static_cast<int>(D);
        rope.inv_freq = test::inv_freq(rope.rotary_dim, 10000.0f);
        const auto dpos = cuda::upload(positions);
        auto store = [&](const Tensor& kc, const Tensor& vc, const backend::KvBlocks& blocks) {
          const auto dq = cuda::upload(q), dnk = cuda::upload(nk), dnv = cuda::upload(nv);
          backend::qk_norm_rope_store(dq.view, dnk.view, dnv.view, {}, rope, dpos.view, dq.view,
                                      Tensor{}, kc, vc, blocks);
        };
        store(dk.view, dv.view, {});
        store(dpk.view, dpv.view, paged);
        HostTensor own(dtype, shape), pool(dtype, pool_shape);
        for (const auto& [own_dev, pool_dev] : {std::pair{&dk, &dpk}, std::pair{&dv, &dpv}}) {
          cuda::download(own_dev->view, own);
          cuda::download(pool_dev->view, pool);
          const size_t row = own.view().nbytes() / static_cast<size_t>(capacity);
          for (int64_t p = start; p < start + T; ++p) {
            const int64_t at = ids[static_cast<size_t>(p / block)] * block + p % block;
            EXPECT_EQ(std::memcmp(own.as<char>() + p * row, pool.as<char>() + at * row, row), 0)
                << dtype_name(dtype) << " D " << D << " block " << block << " position " << p;
          }
        }
      }
    }
  }
}

// A decode step of many sequences sharing one pool (attention_rows, qk_norm_rope_store_rows): each
// row's output, and each sequence's stored key and value, are bit for bit what the row gives alone,
// for 2 to 64 sequences of mixed lengths and bounds (65: rows beyond one launch), GQA groups of 1,
// 4, 8 and 16 (16: not the decode kernel's, so row by row), F32 and BF16 pools.
TEST_F(CudaAttention, RowsOfManySequencesGiveEachRowItsBitsAlone) {
  const int64_t block = 64, table_blocks = 16, capacity = table_blocks * block;
  uint32_t seed = 900;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (const auto [Hq, Hkv, D] : {std::array<int64_t, 3>{16, 4, 256}, {16, 4, 128}, {16, 2, 64}, {4, 4, 128},
                                    {16, 1, 64}}) {
      for (int64_t B : {2, 3, 17, 64, 65}) {
        const int64_t pool_blocks = B * table_blocks;
        const Shape pool_shape{pool_blocks * block, Hkv, D};
        HostTensor unused;
        const HostTensor pk = test::rounded(random_tensor(pool_shape, seed++), dtype, unused);
        const HostTensor pv = test::rounded(random_tensor(pool_shape, seed++), dtype, unused);
        std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), std::mt19937(seed++));
        std::mt19937 rng(seed++);
        std::vector<cuda::DeviceTensor> tables;
        std::vector<backend::KvBlocks> blocks;
        std::vector<int64_t> bounds;
        HostTensor positions(DType::kI32, {B});
        for (int64_t b = 0; b < B; ++b) {
          tables.push_back(cuda::upload(test::int_tensor(
              std::vector<int32_t>(ids.begin() + b * table_blocks, ids.begin() + (b + 1) * table_blocks))));
          blocks.push_back(backend::KvBlocks{tables.back().view, block});
          const auto pos = static_cast<int32_t>(rng() % (capacity - 1));
          positions.as<int32_t>()[b] = pos;
          bounds.push_back(b % 2 == 0 ? pos + 1 : std::min<int64_t>((pos + 256) / 256 * 256, capacity));
        }
        const HostTensor q = random_tensor({B, Hq, 2 * D}, seed++), k = random_tensor({B, Hkv, D}, seed++),
                         v = random_tensor({B, Hkv, D}, seed++);
        const HostTensor q_w = random_tensor({D}, seed++), k_w = random_tensor({D}, seed++);
        backend::RopeParams rope;
        rope.rotary_dim = static_cast<int>(D / 2);
        rope.inv_freq = test::inv_freq(rope.rotary_dim, 10000.0f);
        const auto dq_w = cuda::upload(q_w), dk_w = cuda::upload(k_w), dpos = cuda::upload(positions);
        const backend::QkNorm norm{dq_w.view, dk_w.view, 1e-6f, false};
        const float scale = 1.0f / std::sqrt(static_cast<float>(D));
        // Together, then row by row on fresh copies of everything.
        struct Run {
          cuda::DeviceTensor k_cache, v_cache, q, k, v, q_out, gate, out;
        };
        auto fresh = [&] {
          return Run{cuda::upload(pk), cuda::upload(pv), cuda::upload(q), cuda::upload(k), cuda::upload(v),
                     cuda::upload(nan_tensor({B, Hq, D})), cuda::upload(nan_tensor({B, Hq, D})),
                     cuda::upload(nan_tensor({B, Hq, D}))};
        };
        Run all = fresh(), alone = fresh();
        backend::qk_norm_rope_store_rows(all.q.view, all.k.view, all.v.view, norm, rope, dpos.view, all.q_out.view,
                                         all.gate.view, all.k_cache.view, all.v_cache.view, blocks);
        backend::attention_rows(all.q_out.view, all.k_cache.view, all.v_cache.view, dpos.view, blocks, bounds, scale,
                                0, all.out.view);
        for (int64_t b = 0; b < B; ++b) {
          const Tensor pos = dpos.view.rows(b, b + 1);
          backend::qk_norm_rope_store(alone.q.view.rows(b, b + 1), alone.k.view.rows(b, b + 1),
                                      alone.v.view.rows(b, b + 1), norm, rope, pos, alone.q_out.view.rows(b, b + 1),
                                      alone.gate.view.rows(b, b + 1), alone.k_cache.view, alone.v_cache.view,
                                      blocks[static_cast<size_t>(b)]);
          backend::attention(alone.q_out.view.rows(b, b + 1), alone.k_cache.view, alone.v_cache.view, pos,
                             bounds[static_cast<size_t>(b)], scale, 0, alone.out.view.rows(b, b + 1),
                             blocks[static_cast<size_t>(b)]);
        }
        const std::string what = std::string(dtype_name(dtype)) + " Hq " + std::to_string(Hq) + " Hkv " +
                                 std::to_string(Hkv) + " D " + std::to_string(D) + " B " + std::to_string(B);
        auto same = [&](const cuda::DeviceTensor& x, const cuda::DeviceTensor& y, const char* name) {
          HostTensor hx(x.view.dtype, x.view.shape), hy(y.view.dtype, y.view.shape);
          cuda::download(x.view, hx);
          cuda::download(y.view, hy);
          EXPECT_EQ(std::memcmp(hx.view().data, hy.view().data, hx.view().nbytes()), 0) << what << ": " << name;
        };
        same(all.out, alone.out, "attention");
        same(all.q_out, alone.q_out, "q");
        same(all.gate, alone.gate, "gate");
        same(all.k, alone.k, "k");
        same(all.k_cache, alone.k_cache, "key pool");
        same(all.v_cache, alone.v_cache, "value pool");
      }
    }
  }
}

// A decode step captured once at a bound and replayed with later positions written into the same
// device tensor (what the engine's decode graph does): the lengths come from the device.
TEST_F(CudaAttention, CapturedGraphServesLaterPositions) {
  const int64_t D = 128, Hq = 16, Hkv = 4, bound = 3000;
  Cache cache(4096, Hkv, D, 500);
  cache.expose(0, cache.capacity() - 1);
  for (int64_t T : {1, 4}) {
    for (int64_t window : {0, 100}) {
      const float scale = 0.09f;
      const HostTensor q = random_tensor({T, Hq, D}, 501 + static_cast<uint32_t>(T));
      HostTensor positions(DType::kI32, {T}), ref(DType::kF32, {T, Hq, D}),
          got(DType::kF32, {T, Hq, D});
      for (int64_t t = 0; t < T; ++t)
        positions.as<int32_t>()[t] = static_cast<int32_t>(bound - T + t);
      const auto dq = cuda::upload(q), dpos = cuda::upload(positions), dout = cuda::upload(got);
      // The eager call sizes the workspace for this bound before the capture.
      backend::attention(dq.view, cache.dk(), cache.dv(), dpos.view, bound, scale, window,
                         dout.view);
      cuda::synchronize();
      cuda::begin_capture();
      backend::attention(dq.view, cache.dk(), cache.dv(), dpos.view, bound, scale, window,
                         dout.view);
      const cuda::Graph graph = cuda::end_capture();
      for (int64_t start :
           {int64_t{0}, int64_t{1}, int64_t{33}, int64_t{700}, int64_t{2222}, bound - T}) {
        for (int64_t t = 0; t < T; ++t)
          positions.as<int32_t>()[t] = static_cast<int32_t>(start + t);
        cuda::copy(positions.as<int32_t>(), Device::kCpu, dpos.view.data, Device::kCuda,
                   positions.view().nbytes());
        const HostTensor poison = nan_tensor({T, Hq, D});
        cuda::copy(poison.as<float>(), Device::kCpu, dout.view.data, Device::kCuda,
                   poison.view().nbytes());
        graph.launch();
        cuda::download(dout.view, got);
        std::vector<int32_t> rows(static_cast<size_t>(start + T));
        std::iota(rows.begin(), rows.end(), 0);
        backend::cpu::attention(q, cache.k(), cache.v(),
                                std::span<const int32_t>(positions.as<int32_t>(), T), rows,
                                cache.capacity(), scale, window, ref);
        expect_close(got, ref, kTol,
                     "graph T " + std::to_string(T) + " window " + std::to_string(window) +
                         " start " + std::to_string(start));
      }
    }
  }
}

}  // namespace
}  // namespace strata
