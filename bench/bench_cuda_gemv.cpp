// Bandwidth of the CUDA decode matmul (one activation row) on MLX 4- and 8-bit weights (group 64)
// of Qwen3.5-9B shapes and one routed expert of Qwen3.5-35B-A3B: time per call and the weight bytes it streams per second, against the GPU's
// peak; then the multi-row kernels (a batch's decode rows: gemv_tc_rows.cu from global memory,
// gemv_tc_staged.cu from shared memory) on the 9B's shapes at 4 bits: time per call and per row. Weights rotate over enough copies to defeat the L2 cache.
// Prints markdown tables.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string_view>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/ops.h"
#include "backend/tuning.h"
#include "core/dtype.h"
#include "core/settings.h"

using namespace strata;

namespace {

struct Shape2 {
  const char* name;
  int64_t n, k;
};

double bench(const Shape2& s, int bits, int copies, int64_t rows = 1) {
  const int gs = 64;
  std::mt19937 rng(1);
  // BF16 scales and biases, as the loader keeps an MLX checkpoint's on the GPU.
  HostTensor codes(DType::kU32, {s.n, s.k * bits / 32}), scales(DType::kBF16, {s.n, s.k / gs}),
      biases(DType::kBF16, {s.n, s.k / gs}), x(DType::kF32, {rows, s.k}), out(DType::kF32, {rows, s.n});
  for (int64_t i = 0; i < codes.numel(); ++i) codes.as<uint32_t>()[i] = static_cast<uint32_t>(rng());
  for (int64_t i = 0; i < scales.numel(); ++i) {
    scales.as<uint16_t>()[i] = f32_to_bf16(0.001f);
    biases.as<uint16_t>()[i] = f32_to_bf16(-0.008f);
  }
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = 0.01f * static_cast<float>(i % 17);
  std::vector<backend::cuda::DeviceTensor> keep;
  std::vector<backend::Weight> ws;
  for (int c = 0; c < copies; ++c) {
    keep.push_back(backend::cuda::upload(codes));
    const Tensor w = keep.back().view;
    keep.push_back(backend::cuda::upload(scales));
    const Tensor sc = keep.back().view;
    keep.push_back(backend::cuda::upload(biases));
    ws.push_back({w, sc, keep.back().view, bits, gs});
  }
  auto dx = backend::cuda::upload(x), dout = backend::cuda::upload(out);
  for (int i = 0; i < copies; ++i) backend::matmul(dx.view, ws[i], dout.view);  // warm-up
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const int reps = 20 * copies;
  cudaEventRecord(a, backend::cuda::stream());
  for (int i = 0; i < reps; ++i) backend::matmul(dx.view, ws[i % copies], dout.view);
  cudaEventRecord(b, backend::cuda::stream());
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms * 1e3 / reps;  // µs per call
}

}  // namespace

int main(int argc, char** argv) {
  if (!backend::cuda::device_available()) {
    std::printf("no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const double peak = backend::cuda::device_peak_bandwidth_bytes() / 1e9;  // GB/s
  // The settings from the environment, as strata reads them: STRATA_CUDA_GEMV=cores times the
  // CUDA-core kernel.
  const Settings settings = resolve_settings({}, environment_map(environ));
  backend::set_tuning(backend::tuning_from(settings));
  std::printf("command: %s%s\ndevice: %s, peak memory bandwidth %.0f GB/s\n\n",
              settings.cuda_gemv == "cores" ? "STRATA_CUDA_GEMV=cores " : "", argv[0], prop.name,
              peak);
  // An argument: only the multi-row table, of the shapes whose name has it (for a profiler).
  const char* only = argc > 1 ? argv[1] : nullptr;
  if (only == nullptr)
    std::printf("| weight | bits | µs per call | GB/s | %% of peak |\n|---|---|---|---|---|\n");
  const Shape2 shapes[] = {{"9B mlp gate/up 12288×4096", 12288, 4096},
                           {"9B mlp down 4096×12288", 4096, 12288},
                           {"9B attention o_proj 4096×4096", 4096, 4096},
                           {"9B GDN in_proj_qkv 8192×4096", 8192, 4096},
                           {"9B lm_head 248320×4096", 248320, 4096},
                           {"35B-A3B expert gate 512×2048", 512, 2048},
                           {"35B-A3B expert down 2048×512", 2048, 512}};
  for (const Shape2& s : shapes)
    for (int bits : {4, 8}) {
      if (only != nullptr) break;
      const double bytes = static_cast<double>(s.n) * s.k * bits / 8 + 2.0 * s.n * (s.k / 64) * 2;
      const int copies = std::clamp(static_cast<int>(200e6 / bytes) + 1, 2, 512);  // 4× the L2 at least
      const double us = bench(s, bits, copies);
      const double gbs = bytes / (us * 1e-6) / 1e9;
      std::printf("| %s | %d | %.1f | %.0f | %.0f%% |\n", s.name, bits, us, gbs, 100 * gbs / peak);
      std::fflush(stdout);
    }
  // Both multi-row kernels: from global memory (gemv_tc_rows.cu) and staged in shared memory
  // (gemv_tc_staged.cu), at every row count.
  std::printf("\n| weight | bits | rows | kernel | µs per call | µs per row | weight GB/s | %% of peak |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (const Shape2& s : shapes) {
    if (s.k < 4096) continue;  // the 9B's
    if (only != nullptr && std::string_view(s.name).find(only) == std::string_view::npos) continue;
    const double bytes = static_cast<double>(s.n) * s.k / 2 + 2.0 * s.n * (s.k / 64) * 2;
    const int copies = std::clamp(static_cast<int>(200e6 / bytes) + 1, 2, 512);
    for (int64_t rows : {1, 2, 8, 16, 32, 64})
      for (int staged : {0, 16, 32, 64}) {
        if (rows == 1 && staged != 0) continue;  // one row: the one-row kernel
        if (staged > rows && staged != 16) continue;
        backend::Tuning t = backend::tuning();
        t.gemv_staged_rows = staged != 0 ? 2 : 0;
        t.gemv_staged_tokens = staged;
        const backend::ScopedTuning scope(t);
        const double us = bench(s, 4, copies, rows);
        const double gbs = bytes / (us * 1e-6) / 1e9;
        std::printf("| %s | 4 | %lld | %s | %.1f | %.2f | %.0f | %.0f%% |\n", s.name, static_cast<long long>(rows),
                    rows == 1 ? "one-row" : staged == 0 ? "global" : staged == 16 ? "staged 16" : staged == 32 ? "staged 32" : "staged 64", us, us / static_cast<double>(rows), gbs,
                    100 * gbs / peak);
        std::fflush(stdout);
      }
  }
  return 0;
}
