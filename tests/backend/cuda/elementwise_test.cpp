// The small CUDA ops (backend/cuda/elementwise.cu and moe.cu) through their dispatchers against the
// CPU ops on host copies of the same random inputs. Runs on the GPU machine; where no CUDA device
// is present (CI) the tests report a skip.
//
// Tolerances: copies, argmax, sample_row, top-k ids, add and add_bias exact (one rounding either side). With
// exp, sin or cos (GPU and libm versions differ by an ulp or two): silu_mul, sigmoid_mul and top-k
// weights within 1e-5·|ref|, rope within 1e-4 absolute (angles up to 2.6·10⁵ radians).
// Multiply-adds (quantized embedding, add_sigmoid_gated) within 1e-5·(1 + |ref|): the host compiler
// may fuse them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/tensor_test_util.h"
#include "backend/memory.h"
#include "backend/moe.h"
#include "backend/ops.h"
#include "formats/mlx_quant.h"

namespace strata {
namespace {

using backend::cuda::DeviceBuffer;

using test::random_tensor;
using test::inv_freq;
using test::rounded;

HostTensor int_tensor(const std::vector<int32_t>& values) {
  HostTensor t(DType::kI32, {static_cast<int64_t>(values.size())});
  std::memcpy(t.as<int32_t>(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

// A device copy of a host tensor, placed `offset_bytes` into its allocation (4 breaks the 16-byte
// alignment that the vectorised paths need, so the scalar paths run too).
struct DeviceCopy {
  DeviceBuffer buffer;
  Tensor view;
};
DeviceCopy to_device(const Tensor& host, size_t offset_bytes = 0) {
  DeviceCopy d{DeviceBuffer(host.nbytes() + offset_bytes + 16), host};
  d.view.data = static_cast<char*>(d.buffer.data()) + offset_bytes;
  d.view.device = Device::kCuda;
  backend::cuda::copy(host.data, Device::kCpu, d.view.data, Device::kCuda, host.nbytes());
  return d;
}

void expect_equal_bytes(const Tensor& got, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(got.nbytes(), ref.nbytes()) << what;
  const auto* g = static_cast<const uint8_t*>(got.data);
  const auto* r = static_cast<const uint8_t*>(ref.data);
  for (size_t i = 0; i < got.nbytes(); ++i) ASSERT_EQ(g[i], r[i]) << what << " at byte " << i;
}

backend::Weight float_weight(const Tensor& table) {
  backend::Weight w;
  w.w = table;
  return w;
}

// |got - ref| ≤ rel·|ref| + abs, elementwise (NaN never passes).
void expect_close(const Tensor& got, const Tensor& ref, float rel, float abs,
                  const std::string& what) {
  ASSERT_EQ(got.numel(), ref.numel()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.as<const float>()[i], r = ref.as<const float>()[i];
    ASSERT_LE(std::fabs(g - r), rel * std::fabs(r) + abs)
        << what << " at " << i << ": " << g << " vs " << r;
  }
}

class CudaElementwise : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend::cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// ---- embedding ----

TEST_F(CudaElementwise, EmbeddingOfAFloatTableCopiesTheRows) {
  const int64_t V = 1000;
  for (int64_t H : {64, 1001, 4096}) {
    for (size_t offset : {0, 4}) {
      const HostTensor table = random_tensor({V, H}, 1);
      const HostTensor ids = int_tensor({0, 999, 17, 17, 500, 3, 998});
      const int64_t T = ids.numel();
      HostTensor ref = random_tensor({T, H}, 2);
      backend::cpu::embedding(float_weight(table), {ids.as<int32_t>(), static_cast<size_t>(T)},
                              ref);
      const DeviceCopy dt = to_device(table, offset), di = to_device(ids),
                       dout = to_device(random_tensor({T, H}, 3));
      backend::embedding(float_weight(dt.view), di.view, dout.view);
      expect_equal_bytes(backend::to_host(dout.view), ref, "H " + std::to_string(H));
    }
  }
}

TEST_F(CudaElementwise, EmbeddingOfAQuantizedTableDequantizesLikeTheCpu) {
  const int64_t V = 300, H = 384;
  const HostTensor wf = random_tensor({V, H}, 4);
  struct Case {
    int bits, group;
  };
  const std::vector<Case> cases = {{4, 32},  {4, 64}, {4, 128}, {8, 32}, {8, 64},
                                   {8, 128}, {2, 64}, {3, 64},  {5, 32}, {6, 128}};
  for (const Case& c : cases) {
    for (size_t offset : {0, 4}) {
      const formats::QuantizedMatrix q =
          formats::quantize_affine(wf.view(), formats::QuantParams{c.bits, c.group});
      const backend::Weight host{q.weight.view(), q.scales.view(), q.biases.view(), c.bits,
                                 c.group};
      const HostTensor ids = int_tensor({299, 0, 150, 7, 7});
      const int64_t T = ids.numel();
      HostTensor ref(DType::kF32, {T, H});
      backend::cpu::embedding(host, {ids.as<int32_t>(), static_cast<size_t>(T)}, ref);
      const DeviceCopy dw = to_device(host.w), ds = to_device(host.scales),
                       db = to_device(host.biases);
      const DeviceCopy di = to_device(ids), dout = to_device(random_tensor({T, H}, 5), offset);
      backend::embedding(backend::Weight{dw.view, ds.view, db.view, c.bits, c.group}, di.view,
                         dout.view);
      expect_close(backend::to_host(dout.view), ref, 1e-5f, 1e-5f,
                   "bits " + std::to_string(c.bits) + " group " + std::to_string(c.group) +
                       " offset " + std::to_string(offset));
    }
  }
}

// ---- add_bias, silu_mul, add, sigmoid_mul ----

TEST_F(CudaElementwise, AddBiasMatchesCpu) {
  for (Shape shape : {Shape{3, 1000}, Shape{5, 1001}, Shape{1, 4096}, Shape{70000, 4}}) {
    for (size_t offset : {0, 4}) {
      const HostTensor x = random_tensor(shape, 6), bias = random_tensor({shape[1]}, 7);
      HostTensor ref = random_tensor(shape, 6);
      backend::cpu::add_bias(ref, bias);
      const DeviceCopy dx = to_device(x, offset), db = to_device(bias);
      backend::add_bias(dx.view, db.view);
      expect_equal_bytes(backend::to_host(dx.view), ref, shape.str());
    }
  }
}

// Structured output's token mask: every logit whose bit is clear becomes -inf, the rest keep their
// bits, on a vocabulary that is not a multiple of 32 and with the row at an unaligned address.
TEST_F(CudaElementwise, MaskLogitsMatchesCpu) {
  for (int64_t V : {int64_t{37}, int64_t{248320 + 5}}) {
    for (size_t offset : {0, 4}) {
      const HostTensor x = random_tensor({V}, 8);
      HostTensor mask(DType::kI32, {(V + 31) / 32});
      std::mt19937 rng(static_cast<uint32_t>(V + offset));
      for (int64_t i = 0; i < mask.numel(); ++i) mask.as<int32_t>()[i] = static_cast<int32_t>(rng());
      mask.as<int32_t>()[0] = 0;   // a word with nothing allowed
      mask.as<int32_t>()[mask.numel() - 1] = -1;  // and one with all (bits past V unused)
      HostTensor ref = random_tensor({V}, 8);
      backend::cpu::mask_logits(ref, mask);
      int64_t masked = 0;
      for (int64_t i = 0; i < V; ++i) masked += std::isinf(ref.as<float>()[i]) ? 1 : 0;
      ASSERT_GT(masked, 0);
      ASSERT_LT(masked, V);
      const DeviceCopy dx = to_device(x, offset), dm = to_device(mask);
      backend::mask_logits(dx.view, dm.view);
      expect_equal_bytes(backend::to_host(dx.view), ref, "V " + std::to_string(V));
    }
  }
}

TEST_F(CudaElementwise, BinaryOpsMatchCpu) {
  for (int64_t n : {1, 3, 4, 4099, 100003, 1 << 20}) {
    for (size_t offset : {0, 4}) {
      const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(offset);
      const HostTensor a = random_tensor({n}, 8), b = random_tensor({n}, 9);
      const DeviceCopy da = to_device(a, offset), db = to_device(b);

      HostTensor ref(DType::kF32, {n});
      backend::cpu::silu_mul(a, b, ref);
      const DeviceCopy dout = to_device(random_tensor({n}, 10));
      backend::silu_mul(da.view, db.view, dout.view);
      expect_close(backend::to_host(dout.view), ref, 1e-5f, 0.0f, "silu_mul " + what);

      backend::cpu::sigmoid_mul(a, b, ref);
      backend::sigmoid_mul(da.view, db.view, dout.view);
      expect_close(backend::to_host(dout.view), ref, 1e-5f, 0.0f, "sigmoid_mul " + what);

      HostTensor sum = random_tensor({n}, 8);
      backend::cpu::add(sum, b);
      backend::add(da.view, db.view);
      expect_equal_bytes(backend::to_host(da.view), sum, "add " + what);

      // In place: x = x ⊙ sigmoid(gate).
      HostTensor in_place = random_tensor({n}, 11);
      const DeviceCopy dx = to_device(in_place, offset);
      backend::cpu::sigmoid_mul(in_place, b, in_place);
      backend::sigmoid_mul(dx.view, db.view, dx.view);
      expect_close(backend::to_host(dx.view), in_place, 1e-5f, 0.0f,
                   "sigmoid_mul in place " + what);
    }
  }
}

// ---- rope ----

TEST_F(CudaElementwise, RopeMatchesCpuAtLargePositions) {
  struct Case {
    int64_t heads, head_dim;
    int rotary_dim;
  };
  // Full and partial rotation; 12 heads of 32 pairs leave the last block of heads half full.
  const std::vector<Case> cases = {
      {12, 64, 64}, {4, 128, 128}, {3, 256, 64}, {5, 80, 40}, {2, 512, 512}};
  const HostTensor positions = int_tensor({0, 1, 4095, 131071, 262143, 200000, 77});
  const int64_t T = positions.numel();
  for (const Case& c : cases) {
    for (bool neox : {true, false}) {
      for (float factor : {1.0f, 1.2f}) {
        backend::RopeParams params;
        params.inv_freq = inv_freq(c.rotary_dim, 1e6f);
        params.rotary_dim = c.rotary_dim;
        params.neox = neox;
        params.attention_factor = factor;
        const HostTensor x = random_tensor({T, c.heads, c.head_dim}, 12);
        HostTensor ref = random_tensor({T, c.heads, c.head_dim}, 12);
        backend::cpu::rope(ref, {positions.as<int32_t>(), static_cast<size_t>(T)}, params);
        const DeviceCopy dx = to_device(x), dp = to_device(positions);
        backend::rope(dx.view, dp.view, params);
        const HostTensor got = backend::to_host(dx.view);
        const std::string what = "heads " + std::to_string(c.heads) + " dim " +
                                 std::to_string(c.head_dim) + " rotary " +
                                 std::to_string(c.rotary_dim) + (neox ? " neox" : " interleaved") +
                                 " factor " + std::to_string(factor);
        expect_close(got, ref, 0.0f, 1e-4f, what);
        for (int64_t i = 0; i < got.numel(); ++i) {  // dims past rotary_dim are untouched
          if (i % c.head_dim >= c.rotary_dim) {
            ASSERT_EQ(got.as<float>()[i], x.as<float>()[i]) << what << " at " << i;
          }
        }
      }
    }
  }
}

// The decode step replays as a graph: rope (frequencies in the launch parameters) and argmax (its
// partials in a workspace grown before capture) must read the positions and logits that are in
// device memory at replay time.
TEST_F(CudaElementwise, RopeAndArgmaxReplayFromAGraphWithNewInputs) {
  backend::RopeParams params;
  params.inv_freq = inv_freq(128, 1e7f);
  params.rotary_dim = 128;
  params.attention_factor = 1.1f;
  const int64_t V = 248320;
  const HostTensor x0 = random_tensor({2, 8, 128}, 13);
  DeviceCopy dx = to_device(x0), dp = to_device(int_tensor({5, 6}));
  DeviceCopy dlogits = to_device(random_tensor({2, V}, 14)), dout = to_device(int_tensor({-1, -1}));
  backend::argmax(dlogits.view, dout.view);  // eager first: grows the workspace
  backend::cuda::synchronize();
  backend::cuda::begin_capture();
  backend::rope(dx.view, dp.view, params);
  backend::argmax(dlogits.view, dout.view);
  const backend::cuda::Graph graph = backend::cuda::end_capture();

  const HostTensor positions = int_tensor({100000, 262143});
  const HostTensor logits = random_tensor({2, V}, 15);
  backend::cuda::copy(x0.view().data, Device::kCpu, dx.view.data, Device::kCuda,
                      x0.view().nbytes());
  backend::cuda::copy(positions.view().data, Device::kCpu, dp.view.data, Device::kCuda, 8);
  backend::cuda::copy(logits.view().data, Device::kCpu, dlogits.view.data, Device::kCuda,
                      logits.view().nbytes());
  graph.launch();

  HostTensor ref = random_tensor({2, 8, 128}, 13);
  backend::cpu::rope(ref, {positions.as<int32_t>(), 2}, params);
  expect_close(backend::to_host(dx.view), ref, 0.0f, 1e-4f, "rope from a graph");
  HostTensor ids(DType::kI32, {2});
  backend::cpu::argmax(logits, ids);
  expect_equal_bytes(backend::to_host(dout.view), ids, "argmax from a graph");
}

// ---- store_rows, split_columns ----

TEST_F(CudaElementwise, StoreRowsWritesCacheRowsOfAnyWidth) {
  const std::vector<int32_t> pos = {7, 0, 31, 3, 12};
  const HostTensor positions = int_tensor(pos);
  const int64_t T = positions.numel(), capacity = 32;
  struct Case {
    DType dtype;
    int64_t heads, dim;
  };
  // 16-byte rows, 12-byte rows, and 6-byte rows of a 2-byte dtype.
  for (const Case& c :
       {Case{DType::kF32, 2, 64}, Case{DType::kF32, 1, 3}, Case{DType::kBF16, 1, 3}}) {
    HostTensor src(c.dtype, {T, c.heads, c.dim}), dst(c.dtype, {capacity, c.heads, c.dim});
    std::mt19937 rng(16);
    for (size_t i = 0; i < src.view().nbytes(); ++i)
      static_cast<uint8_t*>(src.view().data)[i] = rng();
    for (size_t i = 0; i < dst.view().nbytes(); ++i)
      static_cast<uint8_t*>(dst.view().data)[i] = rng();
    const DeviceCopy ds = to_device(src), dp = to_device(positions), dd = to_device(dst);
    backend::cpu::store_rows(src, pos, dst);
    backend::store_rows(ds.view, dp.view, dd.view);
    expect_equal_bytes(backend::to_host(dd.view), dst,
                       std::string(dtype_name(c.dtype)) + " dim " + std::to_string(c.dim));
  }
}

TEST_F(CudaElementwise, SplitColumnsMatchesCpu) {
  const std::vector<std::vector<int64_t>> splits = {
      {2048, 512, 512}, {3, 5, 8}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {128, 0, 64}, {4096}};
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (const std::vector<int64_t>& widths : splits) {
      int64_t width = 0;
      for (int64_t w : widths) width += w;
      const int64_t rows = 5;
      HostTensor x(dtype, {rows, width});
      std::mt19937 rng(17);
      for (size_t i = 0; i < x.view().nbytes(); ++i)
        static_cast<uint8_t*>(x.view().data)[i] = rng();
      const DeviceCopy dx = to_device(x);
      std::vector<HostTensor> ref;
      std::vector<DeviceCopy> dev;
      std::vector<Tensor> ref_views, dev_views;
      for (int64_t w : widths) {
        ref.emplace_back(dtype, Shape{rows, w});
        dev.push_back(to_device(ref.back()));
        ref_views.push_back(ref.back().view());
        dev_views.push_back(dev.back().view);
      }
      backend::cpu::split_columns(x, ref_views);
      backend::split_columns(dx.view, dev_views);
      for (size_t i = 0; i < widths.size(); ++i)
        expect_equal_bytes(backend::to_host(dev[i].view), ref[i],
                           std::string(dtype_name(dtype)) + " output " + std::to_string(i) +
                               " of " + std::to_string(widths.size()));
    }
  }
}

// ---- argmax ----

TEST_F(CudaElementwise, ArgmaxMatchesCpuWithTiesAndNaNs) {
  for (int64_t V : {248320, 8193, 1000, 7}) {
    for (int64_t rows : {1, 3, 8}) {
      for (size_t offset : {0, 4}) {
        HostTensor x = random_tensor({rows, V}, 18);
        float* p = x.as<float>();
        // Row 0: a tie between two chunks of the vocabulary (the lower index must win).
        p[V - 1] = p[V / 3] = 100.0f;
        if (rows > 1) {  // row 1: a tie inside one 4-wide load, and a NaN that must be ignored
          p[V + 2] = std::numeric_limits<float>::quiet_NaN();
          p[V + V - 2] = p[V + V - 3] = 50.0f;
        }
        if (rows > 2) p[2 * V] = std::numeric_limits<float>::quiet_NaN();  // row 2: NaN first wins
        HostTensor ref(DType::kI32, {rows});
        backend::cpu::argmax(x, ref);
        const DeviceCopy dx = to_device(x, offset),
                         dout = to_device(int_tensor(std::vector<int32_t>(rows, -1)));
        backend::argmax(dx.view, dout.view);
        expect_equal_bytes(backend::to_host(dout.view), ref,
                           "V " + std::to_string(V) + " rows " + std::to_string(rows) + " offset " +
                               std::to_string(offset));
      }
    }
  }
}

// argmax_rows: rows that lie apart (each in its own buffer, a few unaligned), 1 to 70 of them (70:
// two launches), with the ties and NaNs above; each equal to the CPU's argmax of its row.
TEST_F(CudaElementwise, ArgmaxRowsApartMatchCpu) {
  for (int64_t V : {248320, 8193, 7}) {
    for (int64_t rows : {1, 5, 64, 70}) {
      std::vector<DeviceCopy> xs, outs;
      std::vector<Tensor> x_views, out_views;
      std::vector<int32_t> want;
      for (int64_t r = 0; r < rows; ++r) {
        HostTensor x = random_tensor({1, V}, 30 + static_cast<uint32_t>(r));
        float* p = x.as<float>();
        if (r % 3 == 0) p[V - 1] = p[V / 3] = 100.0f;  // a tie: the lower index wins
        if (r % 3 == 1) p[V / 2] = std::numeric_limits<float>::quiet_NaN();  // ignored
        if (r % 7 == 2) p[0] = std::numeric_limits<float>::quiet_NaN();      // a NaN first wins
        HostTensor ref(DType::kI32, {1});
        backend::cpu::argmax(x, ref);
        want.push_back(ref.as<int32_t>()[0]);
        xs.push_back(to_device(x, r % 2 == 0 ? 0 : 4));
        outs.push_back(to_device(int_tensor({-1})));
      }
      for (int64_t r = 0; r < rows; ++r) {
        x_views.push_back(xs[static_cast<size_t>(r)].view.reshaped({V}));
        out_views.push_back(outs[static_cast<size_t>(r)].view);
      }
      backend::argmax_rows(x_views, out_views);
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_EQ(backend::to_host(out_views[static_cast<size_t>(r)]).as<int32_t>()[0], want[static_cast<size_t>(r)])
            << "V " << V << " rows " << rows << " row " << r;
    }
  }
}

// ---- sample_row ----

// The token the CPU's sort picks, for every truncation, on flat and peaked rows with ties, NaNs and
// infinities: exact (the draw's sums are integers; only an ulp of expf at a boundary could part
// them). The lengths cover one block, partial clusters, a full one, and a row too long for shared
// memory (re-read from global memory).
TEST_F(CudaElementwise, SampleRowPicksTheCpuToken) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<backend::RowDraw> draws = {
      {1.0f, 0, 1.0f, 0.0f, 0.0}, {1.0f, 0, 1.0f, 0.0f, 0.37},   {0.7f, 0, 0.95f, 0.0f, 0.81},
      {0.6f, 20, 0.95f, 0.0f, 0.5}, {1.3f, 40, 1.0f, 0.05f, 0.93}, {1.0f, 1, 1.0f, 0.0f, 0.99},
      {2.0f, 5000, 0.5f, 0.0f, 0.2}, {0.01f, 0, 1.0f, 0.0f, 0.999}, {1.0f, 0, 1.0f, 0.9f, 0.6}};
  for (int64_t V : {7, 1000, 8193, 40000, 151936, 248320, 600000}) {
    for (float spread : {1.0f, 12.0f}) {  // flat (every token near the best) and peaked
      HostTensor x = random_tensor({V}, static_cast<uint32_t>(V), spread);
      float* p = x.as<float>();
      p[V / 2] = nan;
      p[V / 3] = -inf;
      p[V - 1] = p[V / 5 + 1] = 3.0f * spread;  // a tie at (or near) the top
      for (const backend::RowDraw& d : draws) {
        HostTensor ref(DType::kI32, {1});
        backend::cpu::sample_row(x, d, ref);
        const DeviceCopy dx = to_device(x), dout = to_device(int_tensor({-2}));
        backend::sample_row(dx.view, d, dout.view);
        expect_equal_bytes(backend::to_host(dout.view), ref,
                           "V " + std::to_string(V) + " spread " + std::to_string(spread) + " T " +
                               std::to_string(d.temperature) + " k " + std::to_string(d.top_k) + " p " +
                               std::to_string(d.top_p) + " min_p " + std::to_string(d.min_p) + " u " +
                               std::to_string(d.u));
      }
    }
  }
  // No candidate; +inf logits share the draw.
  for (const std::vector<float>& row : {std::vector<float>{nan, -inf, nan}, std::vector<float>{inf, 5.0f, inf, nan}}) {
    HostTensor x(DType::kF32, {static_cast<int64_t>(row.size())}), ref(DType::kI32, {1});
    std::copy(row.begin(), row.end(), x.as<float>());
    for (double u : {0.1, 0.9}) {
      const backend::RowDraw d{1.0f, 0, 1.0f, 0.0f, u};
      backend::cpu::sample_row(x, d, ref);
      const DeviceCopy dx = to_device(x), dout = to_device(int_tensor({-2}));
      backend::sample_row(dx.view, d, dout.view);
      expect_equal_bytes(backend::to_host(dout.view), ref, "special row, u " + std::to_string(u));
    }
  }
}

// Penalties and bias on the listed tokens, exact: one formula without fused multiply-adds.
TEST_F(CudaElementwise, EditLogitsMatchesCpu) {
  const int64_t V = 151936;
  HostTensor x = random_tensor({V}, 3, 4.0f);
  std::vector<int32_t> ids, counts;
  std::vector<float> biases;
  for (int32_t i = 0; i < 3000; ++i) {
    ids.push_back((i * 7919) % static_cast<int32_t>(V));  // distinct: 7919 is prime to V
    counts.push_back(i % 5);
    biases.push_back(i % 3 == 0 ? 0.25f * static_cast<float>(i % 11) - 1.0f : 0.0f);
  }
  HostTensor hi = int_tensor(ids), hc = int_tensor(counts), hb(DType::kF32, {static_cast<int64_t>(biases.size())});
  std::copy(biases.begin(), biases.end(), hb.as<float>());
  for (const backend::LogitPenalties& p : {backend::LogitPenalties{1.3f, 0.4f, 0.2f}, backend::LogitPenalties{1.0f, 1.5f, 0.0f},
                                           backend::LogitPenalties{0.8f, 0.0f, 0.7f}}) {
    HostTensor ref = backend::to_host(x);
    backend::cpu::edit_logits(ref, hi, hc, hb, p);
    const DeviceCopy dx = to_device(x), di = to_device(hi), dc = to_device(hc), db = to_device(hb);
    backend::edit_logits(dx.view, di.view, dc.view, db.view, p);
    expect_equal_bytes(backend::to_host(dx.view), ref, "repetition " + std::to_string(p.repetition));
  }
}

// ---- MoE ----

TEST_F(CudaElementwise, TopkSoftmaxMatchesCpuWithTies) {
  struct Case {
    int64_t T, E, k;
  };
  // E = 40 leaves lanes with fewer experts; E = 1500 takes the path that recomputes probabilities.
  for (const Case& c : {Case{5, 256, 8}, Case{3, 64, 4}, Case{2, 512, 16}, Case{4, 40, 3},
                        Case{2, 1500, 4}, Case{3, 256, 40}}) {
    // shared: one more logit column (a shared expert's gate) and one more slot for it.
    for (const auto& [renormalize, shared] :
         {std::pair{false, false}, std::pair{true, false}, std::pair{true, true}}) {
      const int64_t L = c.E + (shared ? 1 : 0), S = c.k + (shared ? 1 : 0);
      HostTensor logits = random_tensor({c.T, L}, 19);
      float* l = logits.as<float>();
      l[c.E - 1] = l[3] = 10.0f;                // token 0: a tie for first place
      if (c.T > 1) l[L + 5] = l[L + 1] = 3.0f;  // token 1: a tie for a lower place
      HostTensor ids(DType::kI32, {c.T, S}), weights(DType::kF32, {c.T, S});
      backend::cpu::topk_softmax(logits, c.k, renormalize, ids, weights, shared);
      const DeviceCopy dl = to_device(logits);
      const DeviceCopy di = to_device(int_tensor(std::vector<int32_t>(c.T * S, -7)));
      const DeviceCopy dw = to_device(random_tensor({c.T, S}, 20));
      Tensor ids_view = di.view;
      ids_view.shape = Shape{c.T, S};
      backend::topk_softmax(dl.view, c.k, renormalize, ids_view, dw.view, shared);
      const std::string what = "E " + std::to_string(c.E) + " k " + std::to_string(c.k) +
                               (renormalize ? " renormalized" : "") + (shared ? " shared" : "");
      expect_equal_bytes(backend::to_host(ids_view), ids, what);
      expect_close(backend::to_host(dw.view), weights, 1e-5f, 0.0f, what);
    }
  }
}

TEST_F(CudaElementwise, AddSigmoidGatedMatchesCpu) {
  for (int64_t C : {2048, 7}) {
    for (int64_t R : {1, 5}) {
      for (size_t offset : {0, 4}) {
        const HostTensor y = random_tensor({R, C}, 25), gate = random_tensor({R, 1}, 26);
        HostTensor ref = random_tensor({R, C}, 27);
        const DeviceCopy dx = to_device(ref, offset), dy = to_device(y), dg = to_device(gate);
        backend::cpu::add_sigmoid_gated(ref, y, gate);
        backend::add_sigmoid_gated(dx.view, dy.view, dg.view);
        expect_close(backend::to_host(dx.view), ref, 1e-5f, 1e-5f,
                     "C " + std::to_string(C) + " R " + std::to_string(R) + " offset " +
                         std::to_string(offset));
      }
    }
  }
}

// Empty inputs return without launching (a launch with a zero-sized grid would be an error).
TEST_F(CudaElementwise, EmptyInputsAreNoOps) {
  const HostTensor empty(DType::kF32, {0, 16});
  const DeviceCopy d = to_device(empty);
  backend::silu_mul(d.view, d.view, d.view);
  backend::add(d.view, d.view);
  backend::sigmoid_mul(d.view, d.view, d.view);
  const HostTensor bias = random_tensor({16}, 28);
  const DeviceCopy db = to_device(bias);
  backend::add_bias(d.view, db.view);
  backend::split_columns(d.view, std::vector<Tensor>{d.view});
  HostTensor ids(DType::kI32, {0, 2}), weights(DType::kF32, {0, 2});
  const DeviceCopy di = to_device(ids), dw = to_device(weights);
  backend::topk_softmax(d.view, 2, true, di.view, dw.view);
  backend::cuda::synchronize();
}

// ---- moe_experts ----

// E experts (gate and up [I, H], down [H, I]) twice: for the CPU op with F32 scales holding the
// values the GPU reads, and on the GPU with `bits` (0: F32) in groups of gs, scales in scale_dtype.
struct ExpertFormat {
  int bits, gs;
  DType scale_dtype;
};
struct TestExperts {
  std::deque<HostTensor> host_memory;
  std::deque<backend::cuda::DeviceTensor> device_memory;
  std::vector<backend::Weight> host[3], dev[3];  // gate, up, down
};
void add_expert_matrix(TestExperts& x, int part, int64_t rows, int64_t cols, const ExpertFormat& f, uint32_t seed) {
  const HostTensor values = random_tensor({rows, cols}, seed, 0.1f);
  if (f.bits == 0) {
    x.device_memory.push_back(backend::cuda::upload(values));
    x.host_memory.push_back(test::clone(values));
    x.host[part].push_back(float_weight(x.host_memory.back().view()));
    x.dev[part].push_back(float_weight(x.device_memory.back().view));
    return;
  }
  formats::QuantizedMatrix q = formats::quantize_affine(values.view(), formats::QuantParams{f.bits, f.gs});
  HostTensor s32, b32;
  const HostTensor s = rounded(q.scales.view(), f.scale_dtype, s32), b = rounded(q.biases.view(), f.scale_dtype, b32);
  const auto store_host = [&](HostTensor t) {
    x.host_memory.push_back(std::move(t));
    return x.host_memory.back().view();
  };
  const auto store_device = [&](const Tensor& t) {
    x.device_memory.push_back(backend::cuda::upload(t));
    return x.device_memory.back().view;
  };
  x.dev[part].push_back({store_device(q.weight), store_device(s), store_device(b), f.bits, f.gs});
  x.host[part].push_back({store_host(std::move(q.weight)), store_host(std::move(s32)), store_host(std::move(b32)),
                          f.bits, f.gs});
}

// The routed experts on the GPU against the CPU op: every weight format, one to eight tokens (decode
// and speculative verify), prompts of 40 and 200 tokens (experts with several tiles of pairs), a
// slot without an expert (id −1, as a NaN router row gives), unaligned activations, and a shape whose
// rows and columns end mid-tile. Steps of up to 8 tokens within 1e-4 (the GPU folds scales per
// 16-byte chunk, the CPU per group). Quantized prompts take the grouped GEMM on tensor cores, which
// rounds activations and dequantized weights to bf16 (8-bit mantissa): within 1% of the largest
// output; float experts, and activations that are not 16-byte aligned, keep the per-pair kernels and
// 1e-4.
TEST_F(CudaElementwise, MoeExpertsMatchCpu) {
  struct Case {
    int64_t E, I, H;
    ExpertFormat f;
  };
  std::vector<Case> cases;
  for (const ExpertFormat& f : {ExpertFormat{4, 64, DType::kBF16}, ExpertFormat{4, 32, DType::kF16},
                                ExpertFormat{4, 128, DType::kF32}, ExpertFormat{8, 64, DType::kBF16},
                                ExpertFormat{8, 32, DType::kF32}, ExpertFormat{0, 0, DType::kF32}})
    cases.push_back({12, 128, 256, f});
  cases.push_back({5, 96, 160, ExpertFormat{4, 32, DType::kBF16}});
  cases.push_back({5, 96, 160, ExpertFormat{8, 32, DType::kF16}});
  // 4 experts a token, and 9 (8 routed and a folded shared expert: more than 8 warps' worth).
  for (const int64_t k : {int64_t{4}, int64_t{9}}) {
    for (const Case& cs : cases) {
      if (k > cs.E) continue;
      const int64_t E = cs.E, I = cs.I, H = cs.H;
      const ExpertFormat& f = cs.f;
      TestExperts x;
      for (int64_t e = 0; e < E; ++e) {
        add_expert_matrix(x, 0, I, H, f, static_cast<uint32_t>(200 + 3 * e));
        add_expert_matrix(x, 1, I, H, f, static_cast<uint32_t>(201 + 3 * e));
        add_expert_matrix(x, 2, H, I, f, static_cast<uint32_t>(202 + 3 * e));
      }
      const backend::Buffer table = backend::expert_table(Device::kCuda, x.dev[0], x.dev[1], x.dev[2]);
      for (int64_t T : {1, 3, 8, 40, 200}) {
        for (size_t offset : {size_t{0}, size_t{4}}) {
          if (offset != 0 && T != 3 && T != 40) continue;
          std::vector<int32_t> id_list(static_cast<size_t>(T * k));
          std::mt19937 rng(static_cast<uint32_t>(T));
          for (int64_t t = 0; t < T; ++t) {
            std::vector<int32_t> perm(static_cast<size_t>(E));
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), rng);
            std::copy_n(perm.begin(), k, id_list.begin() + t * k);
          }
          if (T > 1) id_list[5] = -1;
          HostTensor ids = int_tensor(id_list);
          Tensor ids_host = ids.view();
          ids_host.shape = Shape{T, k};
          const HostTensor h = random_tensor({T, H}, 30), w = random_tensor({T, k}, 31);
          HostTensor want(DType::kF32, {T, H});
          backend::cpu::moe_experts(h, ids_host, w, x.host[0], x.host[1], x.host[2], want);

          const DeviceCopy dh = to_device(h, offset), dids = to_device(ids), dw = to_device(w),
                           dout = to_device(test::nan_tensor({T, H}));
          Tensor ids_dev = dids.view;
          ids_dev.shape = Shape{T, k};
          backend::moe_experts(dh.view, ids_dev, dw.view, x.dev[0], x.dev[1], x.dev[2], table, dout.view);
          const bool bf16 = T > 8 && f.bits != 0 && offset == 0;
          float largest = 0.0f;
          for (int64_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::fabs(want.as<float>()[i]));
          expect_close(backend::to_host(dout.view), want, bf16 ? 0.0f : 1e-4f, bf16 ? 1e-2f * largest : 1e-4f,
                       "bits " + std::to_string(f.bits) + " group " + std::to_string(f.gs) + " I " + std::to_string(I) +
                           " T " + std::to_string(T) + " k " + std::to_string(k) + " offset " + std::to_string(offset));
        }
      }
    }
  }
}

TEST_F(CudaElementwise, ExpertTableRefusesExpertsOfMixedFormats) {
  TestExperts x;
  add_expert_matrix(x, 0, 32, 64, ExpertFormat{4, 64, DType::kBF16}, 40);
  add_expert_matrix(x, 0, 32, 64, ExpertFormat{8, 64, DType::kBF16}, 41);
  for (int part : {1, 2})
    for (int e = 0; e < 2; ++e) add_expert_matrix(x, part, 32, 64, ExpertFormat{4, 64, DType::kBF16}, 42);
  EXPECT_THROW(backend::expert_table(Device::kCuda, x.dev[0], x.dev[1], x.dev[2]), Error);
}

}  // namespace
}  // namespace strata
