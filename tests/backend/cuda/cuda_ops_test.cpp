// Each CUDA op against the CPU op on random inputs. Runs on the GPU machine; where no CUDA device
// is present (CI) the tests report a skip.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/tensor_test_util.h"
#include "backend/ops.h"
#include "formats/mlx_quant.h"

namespace strata {
namespace {

using test::random_tensor;

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend::cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(CudaOps, RmsNormMatchesCpu) {
  for (int64_t d : {64, 256, 1000, 4096}) {
    for (bool offset : {false, true}) {
      HostTensor x = random_tensor({7, d}, 1), w = random_tensor({d}, 2);
      HostTensor ref(DType::kF32, {7, d}), got(DType::kF32, {7, d});
      backend::cpu::rms_norm(x, w, 1e-6f, offset, ref);
      auto dx = backend::cuda::upload(x), dw = backend::cuda::upload(w), dout = backend::cuda::upload(got);
      backend::rms_norm(dx.view, dw.view, 1e-6f, offset, dout.view);
      backend::cuda::download(dout.view, got);
      for (int64_t i = 0; i < x.numel(); ++i)
        ASSERT_NEAR(got.as<float>()[i], ref.as<float>()[i], 1e-4f * (1.0f + std::fabs(ref.as<float>()[i])))
            << "d " << d << " at " << i;
    }
  }
}

// A weight on the device (F32, or MLX affine codes with F32 scales and biases) and its buffers.
struct DeviceWeight {
  backend::Weight w;
  std::vector<backend::cuda::DeviceTensor> buffers;
};

DeviceWeight upload_weight(const backend::Weight& host) {
  DeviceWeight d;
  d.buffers.push_back(backend::cuda::upload(host.w));
  d.w = host;
  d.w.w = d.buffers.back().view;
  if (host.quantized()) {
    d.buffers.push_back(backend::cuda::upload(host.scales));
    d.w.scales = d.buffers.back().view;
    d.buffers.push_back(backend::cuda::upload(host.biases));
    d.w.biases = d.buffers.back().view;
  }
  return d;
}

// A matrix tall enough for the decode kernel's 8-rows-per-warp path (the lm_head shape class).
TEST_F(CudaOps, MatmulOnATallMatrixMatchesCpu) {
  const int64_t N = 70001, K = 128;
  const HostTensor wf = random_tensor({N, K}, 5);
  for (int bits : {4, 8}) {
    formats::QuantizedMatrix q = formats::quantize_affine(wf.view(), formats::QuantParams{bits, 64});
    const backend::Weight host{q.weight.view(), q.scales.view(), q.biases.view(), bits, 64};
    const auto dw_codes = backend::cuda::upload(host.w), dw_s = backend::cuda::upload(host.scales),
               dw_b = backend::cuda::upload(host.biases);
    const backend::Weight dev{dw_codes.view, dw_s.view, dw_b.view, bits, 64};
    const HostTensor x = random_tensor({1, K}, 6);
    HostTensor ref(DType::kF32, {1, N}), got(DType::kF32, {1, N});
    backend::cpu::matmul(x, host, ref);
    auto dx = backend::cuda::upload(x), dout = backend::cuda::upload(got);
    backend::matmul(dx.view, dev, dout.view);
    backend::cuda::download(dout.view, got);
    for (int64_t i = 0; i < N; ++i) ASSERT_NEAR(got.as<float>()[i], ref.as<float>()[i], 1e-3f) << bits << " at " << i;
  }
}

// Every supported bit width and group size, 1 to 8 activation rows (the decode kernels) and more
// (the tensor-core GEMM), against the CPU matmul on the same weights. Tolerance: fp32 summation order
// only (1e-5·K·3) for the decode kernels and float weights; quantized GEMMs round activations and
// dequantized weights to bf16 (8-bit mantissa): 8e-3·√K·3, about 2^-7 of a typical |output|.
TEST_F(CudaOps, MatmulMatchesCpuForFloatAndAffineWeights) {
  const int64_t N = 300, K = 1536;
  const HostTensor wf = random_tensor({N, K}, 3);
  for (int bits : {0, 4, 8}) {
    for (int gs : {32, 64, 128}) {
      if (bits == 0 && gs != 32) continue;
      backend::Weight host;
      formats::QuantizedMatrix q;
      if (bits == 0) {
        host.w = wf.view();
      } else {
        q = formats::quantize_affine(wf.view(), formats::QuantParams{bits, gs});
        host = {q.weight.view(), q.scales.view(), q.biases.view(), bits, gs};
      }
      const DeviceWeight dw = upload_weight(host);
      for (int64_t T : {1, 2, 5, 8, 11, 64, 200}) {
        const HostTensor x = random_tensor({T, K}, 10 + static_cast<uint32_t>(T));
        HostTensor ref(DType::kF32, {T, N}), got(DType::kF32, {T, N});
        backend::cpu::matmul(x, host, ref);
        auto dx = backend::cuda::upload(x), dout = backend::cuda::upload(got);
        backend::matmul(dx.view, dw.w, dout.view);
        backend::cuda::download(dout.view, got);
        const float bound = bits != 0 && T > 8 ? 8e-3f * std::sqrt(static_cast<float>(K)) * 3.0f
                                               : 1e-5f * static_cast<float>(K) * 3.0f;
        for (int64_t i = 0; i < T * N; ++i)
          ASSERT_NEAR(got.as<float>()[i], ref.as<float>()[i], bound)
              << "bits " << bits << " group " << gs << " T " << T << " at " << i;
      }
    }
  }
}

// Projections that share an input (q/k/v, the GDN inputs) in one launch: each output equals its own
// matmul, for both bit widths and 1 or 3 activation rows, with segments of very different heights.
TEST_F(CudaOps, MatmulGroupMatchesSeparateMatmuls) {
  const int64_t K = 512;
  const int64_t heights[] = {1024, 256, 32, 7};
  for (int bits : {4, 8}) {
    std::vector<HostTensor> floats;
    std::vector<formats::QuantizedMatrix> qs;
    std::vector<backend::Weight> host;
    std::vector<DeviceWeight> dev;
    for (int i = 0; i < 4; ++i) {
      floats.push_back(random_tensor({heights[i], K}, 40 + static_cast<uint32_t>(i)));
      qs.push_back(formats::quantize_affine(floats.back().view(), formats::QuantParams{bits, 64}));
      host.push_back({qs.back().weight.view(), qs.back().scales.view(), qs.back().biases.view(), bits, 64});
    }
    for (const auto& h : host) dev.push_back(upload_weight(h));
    for (int64_t T : {1, 3}) {
      const HostTensor x = random_tensor({T, K}, 50 + static_cast<uint32_t>(T));
      auto dx = backend::cuda::upload(x);
      std::vector<HostTensor> got;
      std::vector<backend::cuda::DeviceTensor> douts;
      std::vector<Tensor> outs;
      std::vector<const backend::Weight*> ws;
      for (int i = 0; i < 4; ++i) {
        got.emplace_back(DType::kF32, Shape{T, heights[i]});
        douts.push_back(backend::cuda::upload(got.back()));
        outs.push_back(douts.back().view);
        ws.push_back(&dev[static_cast<size_t>(i)].w);
      }
      backend::matmul_group(dx.view, ws, outs);
      for (int i = 0; i < 4; ++i) {
        HostTensor ref(DType::kF32, {T, heights[i]});
        backend::cpu::matmul(x, host[static_cast<size_t>(i)], ref);
        backend::cuda::download(outs[static_cast<size_t>(i)], got[static_cast<size_t>(i)]);
        for (int64_t j = 0; j < ref.numel(); ++j)
          ASSERT_NEAR(got[static_cast<size_t>(i)].as<float>()[j], ref.as<float>()[j], 1e-5f * K * 3.0f)
              << "bits " << bits << " T " << T << " segment " << i << " at " << j;
      }
    }
  }
}

}  // namespace
}  // namespace strata
