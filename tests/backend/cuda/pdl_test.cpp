// Programmatic Dependent Launch (backend/cuda/launch.h): with PDL each kernel may start while the
// one before it is still running, so every kernel must wait for its inputs before touching global
// memory. A chain of dependent ops, each reading what the one before wrote and several overwriting
// a buffer their predecessor read, runs eagerly against the CPU ops and as a captured graph (where
// the launches become programmatic edges) against the eager run. Runs on the GPU machine; where no
// CUDA device is present the tests report a skip.
//
// Tolerances: eager against the CPU within 1e-3·(1 + |ref|) (24 ops with rsqrt, exp and
// reductions compound an ulp or two each; a missed wait reads stale or NaN data, far off). The
// graph replays exactly the eager kernels, so its results must be bit-identical.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_ops.h"
#include "backend/tensor_test_util.h"
#include "backend/cuda/launch.h"
#include "backend/gdn.h"
#include "backend/memory.h"
#include "backend/ops.h"
#include "backend/tuning.h"

namespace strata {
namespace {

namespace cuda = backend::cuda;
using test::nan_tensor;
using test::random_tensor;

constexpr int kRounds = 3;
constexpr float kEps = 1e-6f;

// The tensors the chain works on: x is the residual it keeps adding to; h, g and z are scratch
// that each op overwrites; w and w2 are norm weights.
struct Chain {
  Tensor x, h, g, z, w, w2;
};

// kRounds × 8 ops on one device; each op reads the previous op's output.
void run_chain(const Chain& c) {
  const float l2_scale = std::sqrt(static_cast<float>(c.x.dim(1)));
  for (int round = 0; round < kRounds; ++round) {
    backend::rms_norm(c.x, c.w, kEps, true, c.h);            // reads x
    backend::add(c.x, c.h);                                  // writes x
    backend::silu_mul(c.h, c.x, c.g);                        // g = SiLU(h) ⊙ x
    backend::add_rms_norm(c.x, c.g, c.w, kEps, false, c.h);  // writes h, which silu_mul read
    backend::sigmoid_mul(c.h, c.g, c.h);                     // in place
    backend::l2_norm(c.h, kEps, l2_scale, c.g);              // writes g, which sigmoid_mul read
    backend::rms_norm_gated(c.g, c.w2, c.h, kEps, c.z);      // z from g and h
    backend::add(c.x, c.z);
  }
}

struct DeviceCopy {
  cuda::DeviceBuffer buffer;
  Tensor view;
};
DeviceCopy to_device(const Tensor& host) {
  DeviceCopy d{cuda::DeviceBuffer(host.nbytes()), host};
  d.view.data = d.buffer.data();
  d.view.device = Device::kCuda;
  cuda::copy(host.data, Device::kCpu, d.view.data, Device::kCuda, host.nbytes());
  return d;
}
void upload_into(const Tensor& host, const DeviceCopy& d) {
  cuda::copy(host.data, Device::kCpu, d.view.data, Device::kCuda, host.nbytes());
}

// |got − ref| ≤ tol·(1 + |ref|), elementwise (NaN never passes).
void expect_close(const Tensor& got, const Tensor& ref, float tol, const std::string& what) {
  ASSERT_EQ(got.numel(), ref.numel()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.as<const float>()[i], r = ref.as<const float>()[i];
    ASSERT_LE(std::fabs(g - r), tol * (1.0f + std::fabs(r)))
        << what << " at " << i << ": " << g << " vs " << r;
  }
}

void expect_identical(const Tensor& got, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(got.nbytes(), ref.nbytes()) << what;
  EXPECT_EQ(std::memcmp(got.data, ref.data, got.nbytes()), 0) << what;
}

class CudaPdl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// PDL is on by default from compute capability 9.0, so the chain below exercises it on an H100;
// Tuning::pdl turns it off.
TEST_F(CudaPdl, IsOnFromComputeCapability9UnlessTurnedOff) {
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  EXPECT_EQ(cuda::pdl_enabled(), major >= 9);
  RecordProperty("pdl", cuda::pdl_enabled() ? "on" : "off");
  const backend::Tuning saved = backend::tuning();
  backend::Tuning off = saved;
  off.pdl = false;
  backend::set_tuning(off);
  EXPECT_FALSE(cuda::pdl_enabled());
  backend::set_tuning(saved);
}

TEST_F(CudaPdl, DependentOpsMatchTheCpuEagerlyAndFromAGraph) {
  // A decode-sized hidden state (float4 paths) and an odd width (scalar paths).
  for (Shape shape : {Shape{64, 4096}, Shape{5, 1001}}) {
    const std::string what = std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
    const int64_t D = shape[1];
    const HostTensor x0 = random_tensor(shape, 1), w = random_tensor({D}, 2, 0.3f),
                     w2 = random_tensor({D}, 3, 0.3f), nan = nan_tensor(shape);

    // The CPU reference.
    const HostTensor x = random_tensor(shape, 1), h = nan_tensor(shape), g = nan_tensor(shape),
                     z = nan_tensor(shape);
    run_chain({x, h, g, z, w, w2});

    // Eagerly on the GPU.
    const DeviceCopy dx = to_device(x0), dh = to_device(nan), dg = to_device(nan),
                     dz = to_device(nan), dw = to_device(w), dw2 = to_device(w2);
    const Chain device{dx.view, dh.view, dg.view, dz.view, dw.view, dw2.view};
    run_chain(device);
    const HostTensor ex = backend::to_host(dx.view), eh = backend::to_host(dh.view),
                     eg = backend::to_host(dg.view), ez = backend::to_host(dz.view);
    expect_close(ex, x, 1e-3f, what + " x");
    expect_close(eh, h, 1e-3f, what + " h");
    expect_close(eg, g, 1e-3f, what + " g");
    expect_close(ez, z, 1e-3f, what + " z");

    // Captured once, replayed from fresh inputs several times.
    cuda::synchronize();
    cuda::begin_capture();
    run_chain(device);
    const cuda::Graph graph = cuda::end_capture();
    for (int replay = 0; replay < 3; ++replay) {
      upload_into(x0, dx);
      for (const DeviceCopy* d : {&dh, &dg, &dz}) upload_into(nan, *d);
      graph.launch();
      const std::string at = what + " replay " + std::to_string(replay);
      expect_identical(backend::to_host(dx.view), ex, at + " x");
      expect_identical(backend::to_host(dh.view), eh, at + " h");
      expect_identical(backend::to_host(dg.view), eg, at + " g");
      expect_identical(backend::to_host(dz.view), ez, at + " z");
    }
  }
}

}  // namespace
}  // namespace strata
