// CPU speed of the Qwen3.5 hybrids: the tiny golden checkpoints (float, q8/q4 on load), a
// Qwen3.5-0.8B-shaped synthetic MLX checkpoint (random 4- and 8-bit codes, built in memory by
// model/synthetic.h), and snapshot + restore / serialize of a Qwen3.5-9B-shaped sequence state.
// Prints markdown tables with the command and the machine; asserts nothing.
//
// Usage: bench_hybrid [fixtures_dir] [prompt] [decode]   (fixtures_dir: tests/fixtures/models)
#include <omp.h>

#include <chrono>

#include "bench_util.h"
#include "core/json.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "model/qwen35.h"
#include "model/synthetic.h"
#include "runtime/sequence.h"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

// Qwen3.5-0.8B text dimensions (MODEL_SPEC.md §1.1), tied embeddings.
Json qwen35_08b_config() {
  return Json::parse(R"({"model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 1024,
    "intermediate_size": 3584, "num_hidden_layers": 24, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
    "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}})");
}

// Qwen3.5-9B: 32 layers (24 GDN + 8 attention), Hv = 32 value heads of 128 × 128.
Json qwen35_9b_config() {
  return Json::parse(R"({"model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 4096,
    "intermediate_size": 12288, "num_hidden_layers": 32, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
    "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}})");
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  const std::string fixtures = argc > 1 ? argv[1] : "tests/fixtures/models";
  const int64_t prompt = argc > 2 ? std::atoll(argv[2]) : 128;
  const int64_t decode = argc > 3 ? std::atoll(argv[3]) : 32;
  std::printf("command: %s %s %lld %lld\n", argv[0], fixtures.c_str(), static_cast<long long>(prompt),
              static_cast<long long>(decode));
  std::printf("device: %s, %d threads\n\n", bench::cpu_name().c_str(), omp_get_max_threads());

  std::printf("| model | weights | params | weight bytes | prefill %lld tok/s | decode tok/s |\n",
              static_cast<long long>(prompt));
  std::printf("|---|---|---|---|---|---|\n");
  for (const char* name : {"qwen35", "qwen35_moe", "qwen3_next"}) {
    const std::pair<const char*, std::optional<formats::QuantParams>> variants[] = {
        {"f32", std::nullopt}, {"q8 g64 (on load)", formats::QuantParams{8, 64}},
        {"q4 g64 (on load)", formats::QuantParams{4, 64}}};
    for (const auto& [label, q] : variants) {
      model::LoadOptions opts;
      opts.quantize = q;
      auto m = model::load_model(fixtures + "/" + name, opts);
      const bench::Speed s = bench::measure(*m, prompt, decode);
      const model::ModelInfo i = m->info();
      std::printf("| %s (tiny golden) | %s | %.2f M | %.1f MiB | %.0f | %.0f |\n", name, label, i.parameters / 1e6,
                  i.weight_bytes / 1048576.0, s.prefill_tps, s.decode_tps);
      std::fflush(stdout);
    }
  }
  for (int bits : {4, 8}) {
    // Random MLX codes of the real shape, built in memory (what a quantized conversion looks like
    // to the loader, without the cost of quantizing 0.8 B random floats).
    const Json config = {{"model_type", "qwen3_5"}, {"text_config", qwen35_08b_config()}};
    const model::SyntheticCheckpoint ck = model::make_synthetic_checkpoint(config, {.bits = bits});
    auto m = model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors));
    const bench::Speed s = bench::measure(*m, prompt, decode);
    const model::ModelInfo i = m->info();
    std::printf("| Qwen3.5-0.8B shape (synthetic) | mlx q%d g64 | %.0f M | %.0f MiB | %.1f | %.1f |\n", bits,
                i.parameters / 1e6, i.weight_bytes / 1048576.0, s.prefill_tps, s.decode_tps);
    std::fflush(stdout);
  }

  // A 9B-shaped state: 24 GDN layers × (2 MiB recurrent state + conv window) + 8 attention layers
  // of KV cache (fp32 here, 4096-token capacity, 1000 tokens in use).
  const model::ModelConfig c9 = model::parse_model_config(qwen35_9b_config());
  model::ModelState state = model::make_hybrid_state(c9, 4096);
  state.n_tokens = 1000;
  runtime::Sequence seq("bench-9b", std::move(state));
  runtime::Snapshot snap(seq);
  size_t recurrent = 0, kv = 0;
  for (const auto& b : seq.state().buffers) (b.token_indexed ? kv : recurrent) += b.tensor.view().nbytes();
  const int reps = 50;
  snap.take(seq);  // first touch of the snapshot memory
  auto t = Clock::now();
  for (int i = 0; i < reps; ++i) snap.take(seq);
  const double take_ms = seconds_since(t) * 1e3 / reps;
  t = Clock::now();
  for (int i = 0; i < reps; ++i) snap.restore(seq);
  const double restore_ms = seconds_since(t) * 1e3 / reps;
  t = Clock::now();
  const std::vector<uint8_t> bytes = seq.serialize();
  const double ser_ms = seconds_since(t) * 1e3;
  t = Clock::now();
  seq.deserialize(bytes);
  const double deser_ms = seconds_since(t) * 1e3;
  std::printf("\n| Qwen3.5-9B-shaped state | recurrent (24 GDN layers) | KV (8 layers, capacity 4096, fp32) | "
              "snapshot | restore | serialize (1000 tokens) | deserialize |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::printf("| %zu buffers | %.1f MiB | %.0f MiB | %.2f ms | %.2f ms | %.0f ms (%.0f MiB) | %.0f ms |\n",
              seq.state().buffers.size(), recurrent / 1048576.0, kv / 1048576.0, take_ms, restore_ms, ser_ms,
              bytes.size() / 1048576.0, deser_ms);
  return 0;
}
