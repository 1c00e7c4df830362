// Named shapes for strata bench. Qwen3.5 shapes follow MODEL_SPEC.md §1.1 in the MLX conversions'
// layout (a qwen3_5 wrapper with a nested text_config); the dense ones are the published
// config.json files, less the fields strata does not read. The tiny shapes exist for the CLI's
// tests.
#include "cli/bench_shapes.h"

#include <filesystem>
#include <map>

#include "cli/model_loading.h"
#include "core/error.h"

namespace strata::cli {

namespace {

// Fields every Qwen3.5 text config shares (§1.1): gated attention with 256-wide heads, a quarter of
// them rotated, and GDN layers with 128-wide heads, three for every attention layer.
Json qwen35_text(const char* model_type, int64_t vocab, int64_t hidden, int64_t layers,
                 int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t gdn_k_heads,
                 int64_t gdn_v_heads, int64_t gdn_dim, bool tied) {
  return {{"model_type", model_type},
          {"vocab_size", vocab},
          {"hidden_size", hidden},
          {"num_hidden_layers", layers},
          {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads},
          {"head_dim", head_dim},
          {"linear_num_key_heads", gdn_k_heads},
          {"linear_num_value_heads", gdn_v_heads},
          {"linear_key_head_dim", gdn_dim},
          {"linear_value_head_dim", gdn_dim},
          {"linear_conv_kernel_dim", 4},
          {"full_attention_interval", 4},
          {"max_position_embeddings", 262144},
          {"rms_norm_eps", 1e-6},
          {"tie_word_embeddings", tied},
          {"rope_parameters",
           {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}}};
}

Json wrap(const char* model_type, Json text_config) {
  return {{"model_type", model_type}, {"text_config", std::move(text_config)}};
}

Json dense_ffn(Json text_config, int64_t intermediate) {
  text_config["intermediate_size"] = intermediate;
  return text_config;
}

Json moe_ffn(Json text_config, int64_t experts, int64_t top_k, int64_t expert_intermediate,
             int64_t shared_intermediate) {
  text_config["num_experts"] = experts;
  text_config["num_experts_per_tok"] = top_k;
  text_config["moe_intermediate_size"] = expert_intermediate;
  text_config["shared_expert_intermediate_size"] = shared_intermediate;
  return text_config;
}

const std::map<std::string, Json>& shapes() {
  static const std::map<std::string, Json> kShapes = [] {
    std::map<std::string, Json> s;
    s["qwen3.5-9b"] = wrap(
        "qwen3_5", dense_ffn(qwen35_text("qwen3_5_text", 248320, 4096, 32, 16, 4, 256, 16, 32, 128,
                                         /*tied=*/false),
                             12288));
    s["qwen3.5-0.8b"] = wrap("qwen3_5", dense_ffn(qwen35_text("qwen3_5_text", 248320, 1024, 24, 8,
                                                              2, 256, 16, 16, 128, /*tied=*/true),
                                                  3584));
    s["qwen3.5-35b-a3b"] =
        wrap("qwen3_5_moe", moe_ffn(qwen35_text("qwen3_5_moe_text", 248320, 2048, 40, 16, 2, 256,
                                                16, 32, 128, /*tied=*/false),
                                    256, 8, 512, 512));
    s["qwen3-8b"] =
        Json::parse(R"({"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 4096,
      "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
      "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
      "tie_word_embeddings": false, "attention_bias": false})");
    s["llama-3.1-8b"] =
        Json::parse(R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "head_dim": 128, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192},
      "tie_word_embeddings": false})");
    // Tests only: every code path of the real shapes (GDN + attention with a dense or an MoE FFN,
    // tied and untied heads, llama3 RoPE) at widths that run in milliseconds.
    s["tiny-hybrid"] =
        wrap("qwen3_5", dense_ffn(qwen35_text("qwen3_5_text", 512, 128, 4, 4, 2, 32, 2, 4, 32,
                                              /*tied=*/true),
                                  256));
    s["tiny-moe"] =
        wrap("qwen3_5_moe", moe_ffn(qwen35_text("qwen3_5_moe_text", 512, 128, 4, 4, 2, 32, 2, 4, 32,
                                                /*tied=*/false),
                                    8, 2, 64, 64));
    s["tiny-dense"] = Json::parse(R"({"model_type": "llama", "vocab_size": 1024, "hidden_size": 128,
      "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 1024},
      "tie_word_embeddings": false})");
    return s;
  }();
  return kShapes;
}

}  // namespace

const std::vector<std::string>& bench_shape_names() {
  static const std::vector<std::string> kNames = {"qwen3.5-9b", "qwen3.5-0.8b", "qwen3.5-35b-a3b",
                                                  "qwen3-8b", "llama-3.1-8b"};
  return kNames;
}

Json bench_shape_config(const std::string& name) {
  if (name == kDemoShape) return read_json_file((std::filesystem::path(model_path(Settings{}, nullptr)) / "config.json").string());
  const auto it = shapes().find(name);
  if (it == shapes().end()) {
    std::string known;
    for (const std::string& n : bench_shape_names()) known += (known.empty() ? "" : ", ") + n;
    fail(ErrorKind::kInvalidInput, "unknown shape '{}' (known: {})", name, known);
  }
  return it->second;
}

Json with_layers(Json config, int64_t layers) {
  check(layers > 0, ErrorKind::kInvalidInput, "--layers must be positive, got {}", layers);
  Json& text = config.contains("text_config") ? config["text_config"] : config;
  const int64_t n = text.at("num_hidden_layers").get<int64_t>();
  check(layers <= n, ErrorKind::kInvalidInput, "--layers {}: the shape has only {} layers", layers,
        n);
  text["num_hidden_layers"] = layers;
  if (text.contains("layer_types") && text["layer_types"].is_array()) {
    Json kept = Json::array();
    for (int64_t i = 0; i < layers; ++i)
      kept.push_back(text["layer_types"][static_cast<size_t>(i)]);
    text["layer_types"] = std::move(kept);
  }
  return config;
}

}  // namespace strata::cli
