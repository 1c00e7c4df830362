// CPU prefill and decode speed for a ~124M-parameter synthetic Llama-shaped model (random weights
// written to a temporary checkpoint), in float32 and quantized on load to 8 and 4 bits.
// Prints a markdown table with the command and the machine; asserts nothing.
#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/mmap.h"
#include "formats/safetensors.h"
#include "bench_util.h"
#include "model/model.h"

using namespace strata;

namespace {

void write_checkpoint(const std::string& dir) {
  const int64_t H = 768, L = 12, Hq = 12, Hkv = 4, D = 64, I = 2048, V = 32000;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << fmt::format(
      R"({{"model_type": "llama", "vocab_size": {}, "hidden_size": {}, "intermediate_size": {},
"num_hidden_layers": {}, "num_attention_heads": {}, "num_key_value_heads": {}, "head_dim": {},
"max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false}})",
      V, H, I, L, Hq, Hkv, D);
  std::vector<HostTensor> owned;
  std::map<std::string, Tensor> tensors;
  std::mt19937 rng(0);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  auto add = [&](const std::string& name, Shape shape) {
    HostTensor t(DType::kBF16, shape);
    auto* p = t.as<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = f32_to_bf16(name.find("norm") != std::string::npos ? 1.0f : dist(rng));
    owned.push_back(std::move(t));
    tensors[name] = owned.back().view();
  };
  add("model.embed_tokens.weight", {V, H});
  add("lm_head.weight", {V, H});
  add("model.norm.weight", {H});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    add(p + "input_layernorm.weight", {H});
    add(p + "post_attention_layernorm.weight", {H});
    add(p + "self_attn.q_proj.weight", {Hq * D, H});
    add(p + "self_attn.k_proj.weight", {Hkv * D, H});
    add(p + "self_attn.v_proj.weight", {Hkv * D, H});
    add(p + "self_attn.o_proj.weight", {H, Hq * D});
    add(p + "mlp.gate_proj.weight", {I, H});
    add(p + "mlp.up_proj.weight", {I, H});
    add(p + "mlp.down_proj.weight", {H, I});
  }
  formats::write_safetensors(dir + "/model.safetensors", tensors);
}

struct Result {
  double prefill_tps, decode_tps;
  int64_t params;
  size_t bytes;
};

Result measure(const std::string& dir, std::optional<formats::QuantParams> q, int64_t prompt, int64_t decode) {
  model::LoadOptions opts;
  opts.quantize = q;
  auto m = model::load_model(dir, opts);
  const bench::Speed speed = bench::measure(*m, prompt, decode);
  const model::ModelInfo info = m->info();
  return {speed.prefill_tps, speed.decode_tps, info.parameters, info.weight_bytes};
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t prompt = argc > 1 ? std::atoll(argv[1]) : 128;
  const int64_t decode = argc > 2 ? std::atoll(argv[2]) : 64;
  const std::string dir = (std::filesystem::temp_directory_path() / "strata-bench-cpu-124m").string();
  if (!file_exists(dir + "/model.safetensors")) write_checkpoint(dir);
  std::printf("command: %s %lld %lld\n", argv[0], static_cast<long long>(prompt), static_cast<long long>(decode));
  std::printf("device: %s, %d threads\n\n", bench::cpu_name().c_str(), omp_get_max_threads());
  std::printf("| model | weights | params | weight bytes | prefill %lld tok/s | decode tok/s |\n",
              static_cast<long long>(prompt));
  std::printf("|---|---|---|---|---|---|\n");
  const std::pair<const char*, std::optional<formats::QuantParams>> variants[] = {
      {"f32 (from bf16)", std::nullopt}, {"q8 g64", formats::QuantParams{8, 64}}, {"q4 g64", formats::QuantParams{4, 64}}};
  for (const auto& [name, q] : variants) {
    const Result r = measure(dir, q, prompt, decode);
    std::printf("| llama-124m synthetic | %s | %.1f M | %.0f MiB | %.1f | %.1f |\n", name, r.params / 1e6,
                r.bytes / 1048576.0, r.prefill_tps, r.decode_tps);
    std::fflush(stdout);
  }
  return 0;
}
