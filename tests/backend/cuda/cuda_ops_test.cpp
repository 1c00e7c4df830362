// Each CUDA op against the CPU op on random inputs. Runs on the GPU machine; where no CUDA device
// is present (CI) the tests report a skip.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/ops.h"

namespace strata {
namespace {

HostTensor random_tensor(Shape shape, uint32_t seed) {
  HostTensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = d(rng);
  return t;
}

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

}  // namespace
}  // namespace strata
