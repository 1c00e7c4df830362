// The matmuls of one Qwen3.5-9B 4-bit decode step alone, chained in a CUDA graph as the model
// launches them (per layer: the input projections as one launch, the out projection, gate/up as one
// launch, the down projection with SiLU(gate) ⊙ up; then the lm_head), with none of the step's
// other work: how close the decode matmuls come to streaming the weights when nothing stands
// between them. Rows that leave work out or merge launches are timing-only bounds (their outputs
// are not the model's):
//   - with add_rms_norm where the model has one (twice a layer);
//   - "GDN in + out": each GDN layer's input projections (but the 32-row a) and its out projection
//     streamed by one launch, the bound of a kernel that fuses them (with the recurrent core
//     between) at no cost of its own;
//   - "FFN": gate/up and the down projection's bytes streamed by one launch, the bound of a fused
//   MLP
//     (the down weight read as 12288 rows of 4096: the same bytes and groups).
// Prints a markdown table with the command and the device.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/tuning.h"
#include "core/dtype.h"
#include "core/settings.h"

using namespace strata;
namespace cuda = strata::backend::cuda;

namespace {

constexpr int kLayers = 32;
constexpr int64_t kHidden = 4096, kInter = 12288, kVocab = 248320;

// Device memory filled from a host pattern of random bytes (weights' values do not matter to time).
class Filler {
 public:
  Filler() : pattern_(64 << 20) {
    std::mt19937 rng(1);
    for (auto& b : pattern_) b = static_cast<uint8_t>(rng());
  }
  void fill(void* dst, size_t n) const {
    for (size_t off = 0; off < n; off += pattern_.size())
      cuda::copy(pattern_.data(), Device::kCpu, static_cast<uint8_t*>(dst) + off, Device::kCuda,
                 std::min(pattern_.size(), n - off));
  }

 private:
  std::vector<uint8_t> pattern_;
};

struct Matrix {
  cuda::DeviceBuffer codes, scales, biases;
  backend::Weight w;
};

// A 4-bit, group-64 matrix of n rows and k columns with BF16 scales and biases in a usable range.
std::unique_ptr<Matrix> matrix(int64_t n, int64_t k, const Filler& filler) {
  auto m = std::make_unique<Matrix>();
  const int64_t groups = k / 64;
  m->codes = cuda::DeviceBuffer(static_cast<size_t>(n * k / 2));
  m->scales = cuda::DeviceBuffer(static_cast<size_t>(n * groups * 2));
  m->biases = cuda::DeviceBuffer(static_cast<size_t>(n * groups * 2));
  filler.fill(m->codes.data(), m->codes.size());
  std::vector<uint16_t> s(static_cast<size_t>(n * groups), f32_to_bf16(0.002f)),
      b(static_cast<size_t>(n * groups), f32_to_bf16(-0.01f));
  cuda::copy(s.data(), Device::kCpu, m->scales.data(), Device::kCuda, s.size() * 2);
  cuda::copy(b.data(), Device::kCpu, m->biases.data(), Device::kCuda, b.size() * 2);
  m->w.w = Tensor{m->codes.data(), DType::kU32, Shape{n, k / 8}, Device::kCuda};
  m->w.scales = Tensor{m->scales.data(), DType::kBF16, Shape{n, groups}, Device::kCuda};
  m->w.biases = Tensor{m->biases.data(), DType::kBF16, Shape{n, groups}, Device::kCuda};
  m->w.bits = 4;
  m->w.group_size = 64;
  return m;
}

struct Vector {
  cuda::DeviceBuffer buffer;
  Tensor t;
};
Vector vec(int64_t n) {
  Vector v{cuda::DeviceBuffer(static_cast<size_t>(n) * 4), {}};
  v.t = Tensor{v.buffer.data(), DType::kF32, Shape{1, n}, Device::kCuda};
  std::vector<float> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) h[i] = 0.01f * static_cast<float>(i % 37) - 0.18f;
  cuda::copy(h.data(), Device::kCpu, v.buffer.data(), Device::kCuda, h.size() * 4);
  return v;
}

bool is_attention(int layer) { return (layer + 1) % 4 == 0; }  // Qwen3.5: every fourth layer

enum Flags { kNorms = 1, kMergeGdn = 2, kMergeFfn = 4 };

}  // namespace

int main(int, char** argv) {
  if (!cuda::device_available()) {
    std::printf("no CUDA device\n");
    return 0;
  }
  // The kernels' settings from the environment, as strata reads them (STRATA_CUDA_PDL, ...).
  backend::set_tuning(backend::tuning_from(resolve_settings({}, environment_map(environ))));
  const Filler filler;
  // Per layer: the input projections (GDN: qkv, z, b, a; attention: q with its gate, k, v), out,
  // gate, up, down.
  std::vector<std::vector<std::unique_ptr<Matrix>>> layers(kLayers);
  std::vector<backend::Weight> down_wide(kLayers);
  double bytes = 0;
  for (int l = 0; l < kLayers; ++l) {
    auto& m = layers[l];
    if (is_attention(l)) {
      for (int64_t n : {int64_t{8192}, int64_t{1024}, int64_t{1024}})
        m.push_back(matrix(n, kHidden, filler));
    } else {
      for (int64_t n : {int64_t{8192}, int64_t{4096}, int64_t{32}, int64_t{32}})
        m.push_back(matrix(n, kHidden, filler));
    }
    m.push_back(matrix(kHidden, 4096, filler));
    m.push_back(matrix(kInter, kHidden, filler));
    m.push_back(matrix(kInter, kHidden, filler));
    m.push_back(matrix(kHidden, kInter, filler));
    for (const auto& w : m) bytes += static_cast<double>(w->w.nbytes());
    backend::Weight wide = m.back()->w;
    wide.w.shape = Shape{kInter, kHidden / 8};
    wide.scales.shape = wide.biases.shape = Shape{kInter, kHidden / 64};
    down_wide[l] = wide;
  }
  const auto lm_head = matrix(kVocab, kHidden, filler);
  bytes += static_cast<double>(lm_head->w.nbytes());
  Vector h = vec(kHidden), attn_out = vec(kHidden), mixed = vec(kHidden), resid = vec(kHidden),
         norm_w = vec(kHidden), proj = vec(12352), z = vec(kInter), small0 = vec(kHidden),
         small1 = vec(kHidden), gate = vec(kInter), up = vec(kInter), act = vec(kInter),
         logits = vec(kVocab);
  cuda::synchronize();

  auto step = [&](int flags) {
    auto norm = [&] {
      if (flags & kNorms) cuda::add_rms_norm(resid.t, mixed.t, norm_w.t, 1e-6f, true, h.t);
    };
    for (int l = 0; l < kLayers; ++l) {
      auto& m = layers[l];
      const backend::Weight* in[4];
      const Tensor outs[4] = {proj.t, z.t, small0.t, small1.t};
      const size_t n_in = is_attention(l) ? 3 : 4;
      for (size_t i = 0; i < n_in; ++i) in[i] = &m[i]->w;
      const backend::Weight& out = m[n_in]->w;
      if ((flags & kMergeGdn) && !is_attention(l)) {
        const backend::Weight* merged[4] = {in[0], in[1], in[2], &out};
        cuda::matmul_group(h.t, merged, outs);
      } else {
        cuda::matmul_group(h.t, std::span<const backend::Weight* const>(in, n_in),
                           std::span<const Tensor>(outs, n_in));
        cuda::matmul(attn_out.t, out, mixed.t);
      }
      norm();
      const backend::Weight* gu[3] = {&m[n_in + 1]->w, &m[n_in + 2]->w, &down_wide[l]};
      const Tensor gu_out[3] = {gate.t, up.t, act.t};
      if (flags & kMergeFfn) {
        cuda::matmul_group(h.t, gu, gu_out);
      } else {
        cuda::matmul_group(h.t, std::span<const backend::Weight* const>(gu, 2),
                           std::span<const Tensor>(gu_out, 2));
        cuda::silu_mul_matmul(gate.t, up.t, m[n_in + 3]->w, act.t, mixed.t);
      }
      norm();
    }
    cuda::matmul(h.t, lm_head->w, logits.t);
  };

  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const double peak = cuda::device_peak_bandwidth_bytes();
  std::printf(
      "command: %s\ndevice: %s, peak memory bandwidth %.0f GB/s\nweights streamed per chain: %.2f "
      "GB\n\n",
      argv[0], prop.name, peak / 1e9, bytes / 1e9);
  std::printf("| chain (graph replay, mean of 20) | ms | GB/s | %% of peak |\n|---|---|---|---|\n");
  struct Row {
    const char* name;
    int flags;
  };
  const Row rows[] = {{"the decode matmuls alone (129 launches and 32 conversions)", 0},
                      {"with add_rms_norm twice a layer", kNorms},
                      {"timing only: GDN in + out as one launch", kMergeGdn},
                      {"timing only: FFN as one launch", kMergeFfn},
                      {"timing only: both", kMergeGdn | kMergeFfn},
                      {"timing only: both, with add_rms_norm", kMergeGdn | kMergeFfn | kNorms}};
  for (const Row& r : rows) {
    step(r.flags);  // eagerly once: workspaces grow outside the capture
    cuda::synchronize();
    cuda::begin_capture();
    step(r.flags);
    const cuda::Graph graph = cuda::end_capture();
    for (int i = 0; i < 3; ++i) graph.launch();
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    constexpr int kReps = 20;
    cudaEventRecord(start, cuda::stream());
    for (int i = 0; i < kReps; ++i) graph.launch();
    cudaEventRecord(stop, cuda::stream());
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    ms /= kReps;
    const double gbs = bytes / (ms * 1e-3);
    std::printf("| %s | %.3f | %.0f | %.0f%% |\n", r.name, ms, gbs / 1e9, 100 * gbs / peak);
    std::fflush(stdout);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  return 0;
}
