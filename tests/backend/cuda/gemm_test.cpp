// The prefill GEMM (cuda::gemm) against the CPU matmul: weights tall enough to be dequantized in
// several tiles with a ragged last one, scales and biases in F32, BF16 and F16 (the loader keeps
// the checkpoint's dtype on CUDA), and activations that are not 16-byte aligned. Skips without a
// GPU.
#include "backend/cuda/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/tensor_test_util.h"
#include "formats/mlx_quant.h"

namespace strata {
namespace {

using test::random_tensor;

class CudaGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend::cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// `values` (F32) stored as `dtype`; `values` becomes the stored numbers read back as F32, so a CPU
// weight with them sees exactly what the GPU sees.
HostTensor round_to(HostTensor& values, DType dtype) {
  HostTensor out(dtype, values.shape());
  const auto n = static_cast<size_t>(values.numel());
  convert_from_f32(values.as<float>(), dtype, out.as<void>(), n);
  convert_to_f32(dtype, out.as<void>(), values.as<float>(), n);
  return out;
}

// A quantized weight on both devices: the host copy with F32 scales and biases, the device copy
// with the same values in `scale_dtype`.
struct QuantizedWeight {
  formats::QuantizedMatrix q;
  backend::Weight host;
  std::vector<backend::cuda::DeviceTensor> buffers;
  backend::Weight dev;
};

QuantizedWeight make_weight(int64_t N, int64_t K, int bits, int gs, DType scale_dtype,
                            uint32_t seed) {
  QuantizedWeight w;
  const HostTensor wf = random_tensor({N, K}, seed);
  w.q = formats::quantize_affine(wf.view(), formats::QuantParams{bits, gs});
  const HostTensor scales = round_to(w.q.scales, scale_dtype),
                   biases = round_to(w.q.biases, scale_dtype);
  w.host = {w.q.weight.view(), w.q.scales.view(), w.q.biases.view(), bits, gs};
  w.buffers.push_back(backend::cuda::upload(w.q.weight));
  w.buffers.push_back(backend::cuda::upload(scales));
  w.buffers.push_back(backend::cuda::upload(biases));
  w.dev = {w.buffers[0].view, w.buffers[1].view, w.buffers[2].view, bits, gs};
  return w;
}

// Quantized GEMMs round activations and dequantized weights to bf16 (8-bit mantissa):
// 8e-3·√K·3, about 2^-7 of a typical |output| (as in cuda_ops_test).
float bf16_bound(int64_t K) { return 8e-3f * std::sqrt(static_cast<float>(K)) * 3.0f; }

// cuda::gemm of x (host) with w against the CPU matmul; x_offset > 0 places x that many floats
// into its device buffer, so that it is not 16-byte aligned.
void expect_gemm_matches_cpu(const HostTensor& x, const QuantizedWeight& w, const std::string& what,
                             int64_t x_offset = 0) {
  const int64_t T = x.shape()[0], K = x.shape()[1], N = w.host.rows();
  HostTensor ref(DType::kF32, {T, N}), got = test::nan_tensor({T, N});
  backend::cpu::matmul(x, w.host, ref);
  HostTensor padded(DType::kF32, {T * K + x_offset});
  std::copy(x.as<float>(), x.as<float>() + T * K, padded.as<float>() + x_offset);
  const auto dx = backend::cuda::upload(padded);
  Tensor x_view = dx.view;
  x_view.data = dx.view.as<float>() + x_offset;
  x_view.shape = {T, K};
  auto dout = backend::cuda::upload(got);
  backend::cuda::gemm(x_view, w.dev, dout.view);
  backend::cuda::download(dout.view, got);
  for (int64_t i = 0; i < T * N; ++i)
    ASSERT_NEAR(got.as<float>()[i], ref.as<float>()[i], bf16_bound(K)) << what << " at " << i;
}

// N well past one tile (8192 rows at K = 8192), and not a multiple of the tile height: every tile,
// the last one short, lands in the right rows of the output.
TEST_F(CudaGemm, SplitsTallWeightsIntoTilesWithARaggedLastOne) {
  const int64_t N = 20000, K = 8192, T = 16;
  const int64_t tile = backend::cuda::gemm_tile_rows(N, K);
  ASSERT_LT(tile, N / 2) << "the weight must need at least three tiles";
  ASSERT_NE(N % tile, 0) << "the last tile must be ragged";
  const HostTensor x = random_tensor({T, K}, 61);
  for (int bits : {4, 8}) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const QuantizedWeight w = make_weight(N, K, bits, 64, dtype, 60);
      expect_gemm_matches_cpu(
          x, w, "bits " + std::to_string(bits) + " scales " + std::string(dtype_name(dtype)));
    }
  }
}

// Every bit width, group size and scale dtype, at the row counts of the old matmul test.
TEST_F(CudaGemm, MatchesCpuForEveryGroupSizeAndScaleDtype) {
  const int64_t N = 300, K = 1536;
  for (int bits : {4, 8}) {
    for (int gs : {32, 64, 128}) {
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
        const QuantizedWeight w = make_weight(N, K, bits, gs, dtype, 70);
        for (int64_t T : {11, 64, 200}) {
          const HostTensor x = random_tensor({T, K}, 71 + static_cast<uint32_t>(T));
          expect_gemm_matches_cpu(x, w,
                                  "bits " + std::to_string(bits) + " group " + std::to_string(gs) +
                                      " scales " + std::string(dtype_name(dtype)) + " T " +
                                      std::to_string(T));
        }
      }
    }
  }
}

// Up to 64 rows on 4-bit weights take the kernel that dequantizes codes in registers (gemm_rows.cu):
// every group size and scale dtype, rows from 1 to 64 (its tile widths 32, 48 and 64 tokens), a
// ragged last block of weight rows, and K long enough to be split over blocks.
TEST_F(CudaGemm, FewRowsMatchCpuThroughTheRegisterDequantizingKernel) {
  const int64_t N = 1000, K = 2048;
  for (int gs : {32, 64, 128}) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const QuantizedWeight w = make_weight(N, K, 4, gs, dtype, 75);
      for (int64_t T : {1, 17, 33, 48, 64}) {
        const HostTensor x = random_tensor({T, K}, 76 + static_cast<uint32_t>(T));
        expect_gemm_matches_cpu(x, w,
                                "group " + std::to_string(gs) + " scales " + std::string(dtype_name(dtype)) +
                                    " T " + std::to_string(T));
      }
    }
  }
}

// Several 4-bit weights of one K in one register-dequantizing launch (a layer's projections): rows
// that are no whole number of the kernel's 128-row blocks, a weight of a single block and one of
// several, splits of K, groups of 32 and 64, bf16 scales (paired dequantization) and f16 ones;
// each weight's outputs equal its own CPU matmul.
TEST_F(CudaGemm, WeightsOfOneLaunchEachMatchCpu) {
  const int64_t K = 1024;
  for (int gs : {32, 64}) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      const QuantizedWeight ws[] = {make_weight(300, K, 4, gs, dtype, 95), make_weight(32, K, 4, gs, dtype, 96),
                                    make_weight(1024, K, 4, gs, dtype, 97), make_weight(64, K, 4, gs, dtype, 98)};
      for (int64_t T : {25, 40, 64}) {
        const HostTensor x = random_tensor({T, K}, 99 + static_cast<uint32_t>(T));
        const auto dx = backend::cuda::upload(x);
        std::vector<const backend::Weight*> devs;
        std::vector<HostTensor> got;
        std::vector<backend::cuda::DeviceTensor> douts;
        std::vector<Tensor> outs;
        for (const QuantizedWeight& w : ws) {
          devs.push_back(&w.dev);
          got.push_back(test::nan_tensor({T, w.host.rows()}));
          douts.push_back(backend::cuda::upload(got.back()));
          outs.push_back(douts.back().view);
        }
        backend::cuda::gemm_group(dx.view, devs, outs);
        for (size_t i = 0; i < std::size(ws); ++i) {
          HostTensor ref(DType::kF32, {T, ws[i].host.rows()});
          backend::cpu::matmul(x, ws[i].host, ref);
          backend::cuda::download(outs[i], got[i]);
          for (int64_t j = 0; j < ref.numel(); ++j)
            ASSERT_NEAR(got[i].as<float>()[j], ref.as<float>()[j], bf16_bound(K))
                << "group " << gs << " scales " << dtype_name(dtype) << " T " << T << " weight " << i << " at " << j;
        }
      }
    }
  }
}

// Activations that start mid-buffer (not 16-byte aligned) take the scalar bf16 conversion.
TEST_F(CudaGemm, TakesActivationsThatAreNotSixteenByteAligned) {
  const QuantizedWeight w = make_weight(256, 512, 4, 64, DType::kBF16, 80);
  for (int64_t offset : {1, 2, 3}) {
    const HostTensor x = random_tensor({13, 512}, 81);
    expect_gemm_matches_cpu(x, w, "offset " + std::to_string(offset), offset);
  }
}

// gemm_group (x rounded to bf16 once, then each weight): quantized weights of both scale dtypes
// and a float weight, each equal to its own CPU matmul.
TEST_F(CudaGemm, GroupMatchesCpuForEachWeight) {
  const int64_t K = 768, T = 40;
  const QuantizedWeight a = make_weight(512, K, 4, 64, DType::kBF16, 90);
  const QuantizedWeight b = make_weight(96, K, 8, 32, DType::kF32, 91);
  const HostTensor wf = random_tensor({64, K}, 92);
  const auto dwf = backend::cuda::upload(wf);
  const backend::Weight float_host{wf.view(), {}, {}, 0, 0}, float_dev{dwf.view, {}, {}, 0, 0};
  const HostTensor x = random_tensor({T, K}, 93);
  const auto dx = backend::cuda::upload(x);
  const backend::Weight* hosts[] = {&a.host, &float_host, &b.host};
  const backend::Weight* devs[] = {&a.dev, &float_dev, &b.dev};
  std::vector<HostTensor> got;
  std::vector<backend::cuda::DeviceTensor> douts;
  std::vector<Tensor> outs;
  for (const backend::Weight* w : hosts) {
    got.push_back(test::nan_tensor({T, w->rows()}));
    douts.push_back(backend::cuda::upload(got.back()));
    outs.push_back(douts.back().view);
  }
  backend::cuda::gemm_group(dx.view, devs, outs);
  for (size_t i = 0; i < 3; ++i) {
    HostTensor ref(DType::kF32, {T, hosts[i]->rows()});
    backend::cpu::matmul(x, *hosts[i], ref);
    backend::cuda::download(outs[i], got[i]);
    const float bound =
        hosts[i]->quantized() ? bf16_bound(K) : 1e-5f * static_cast<float>(K) * 3.0f;
    for (int64_t j = 0; j < ref.numel(); ++j)
      ASSERT_NEAR(got[i].as<float>()[j], ref.as<float>()[j], bound)
          << "weight " << i << " at " << j;
  }
}

}  // namespace
}  // namespace strata
