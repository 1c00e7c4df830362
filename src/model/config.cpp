// config.json → ModelConfig, for the dense families (llama, qwen2, qwen3, mistral) and the fields the
// Qwen3.5 hybrids share with them. Missing required fields and unknown model types are clear errors.
#include "model/config.h"

#include <algorithm>

#include "core/error.h"

namespace strata::model {

namespace {

int64_t require_int(const Json& j, const char* key) {
  auto it = j.find(key);
  check(it != j.end() && it->is_number_integer(), ErrorKind::kInvalidInput,
        "config.json: '{}' is missing or not an integer", key);
  const int64_t v = it->get<int64_t>();
  check(v > 0, ErrorKind::kInvalidInput, "config.json: '{}' must be positive, got {}", key, v);
  return v;
}

void add_ids(const Json& v, std::vector<int32_t>& ids) {
  auto add = [&](const Json& x) {
    if (!x.is_number_integer()) return;
    const auto id = x.get<int32_t>();
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (v.is_array()) {
    for (const auto& x : v) add(x);
  } else {
    add(v);
  }
}

double number_or(const Json& j, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  check(it->is_number(), ErrorKind::kInvalidInput, "config.json: '{}' must be a number", key);
  return it->get<double>();
}

RopeConfig parse_rope(const Json& cfg) {
  RopeConfig rope;
  // transformers v5 writes "rope_parameters" (theta inside); older files "rope_theta" + "rope_scaling".
  Json params = Json::object();
  if (auto it = cfg.find("rope_parameters"); it != cfg.end() && it->is_object()) params = *it;
  if (auto it = cfg.find("rope_scaling"); it != cfg.end() && it->is_object())
    for (const auto& [k, v] : it->items()) params.emplace(k, v);
  rope.theta = number_or(params, "rope_theta", number_or(cfg, "rope_theta", 10000.0));
  rope.partial_rotary_factor =
      number_or(params, "partial_rotary_factor", number_or(cfg, "partial_rotary_factor", 1.0));
  std::string type = get_or<std::string>(params, "rope_type", get_or<std::string>(params, "type", "default"));
  if (type == "mrope") type = "default";  // text-only positions: MRoPE reduces to plain RoPE
  static const char* kKnown[] = {"default", "linear", "dynamic", "yarn", "llama3"};
  check(std::find(std::begin(kKnown), std::end(kKnown), type) != std::end(kKnown), ErrorKind::kUnsupported,
        "config.json: rope type '{}' is not supported", type);
  rope.type = type;
  rope.factor = number_or(params, "factor", 1.0);
  rope.low_freq_factor = number_or(params, "low_freq_factor", 1.0);
  rope.high_freq_factor = number_or(params, "high_freq_factor", 4.0);
  rope.original_max_position = static_cast<int64_t>(number_or(params, "original_max_position_embeddings", 0));
  if (auto it = params.find("attention_factor"); it != params.end() && it->is_number())
    rope.attention_factor = it->get<double>();
  rope.beta_fast = number_or(params, "beta_fast", 32.0);
  rope.beta_slow = number_or(params, "beta_slow", 1.0);
  rope.mscale = number_or(params, "mscale", 0.0);
  rope.mscale_all_dim = number_or(params, "mscale_all_dim", 0.0);
  rope.truncate = get_or<bool>(params, "truncate", true);
  if (type == "llama3")
    check(rope.original_max_position > 0, ErrorKind::kInvalidInput,
          "config.json: llama3 rope scaling needs original_max_position_embeddings");
  return rope;
}

int64_t int_or(const Json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  check(it->is_number_integer() && it->get<int64_t>() >= 0, ErrorKind::kInvalidInput,
        "config.json: '{}' must be a non-negative integer", key);
  return it->get<int64_t>();
}

// layer_types, or every full_attention_interval-th layer (the last of each group) is attention.
std::vector<LayerKind> parse_layer_kinds(const Json& cfg, int64_t num_layers) {
  std::vector<LayerKind> kinds;
  if (auto it = cfg.find("layer_types"); it != cfg.end() && it->is_array()) {
    check(static_cast<int64_t>(it->size()) == num_layers, ErrorKind::kInvalidInput,
          "config.json: layer_types has {} entries for {} layers", it->size(), num_layers);
    for (const auto& t : *it) {
      const std::string name = t.is_string() ? t.get<std::string>() : "";
      if (name == "linear_attention" || name == "linear") {
        kinds.push_back(LayerKind::kLinearAttention);
      } else if (name == "full_attention" || name == "attention") {
        kinds.push_back(LayerKind::kFullAttention);
      } else {
        fail(ErrorKind::kInvalidInput, "config.json: unknown layer type {}", t.dump());
      }
    }
    return kinds;
  }
  const int64_t interval = int_or(cfg, "full_attention_interval", 4);
  check(interval > 0, ErrorKind::kInvalidInput, "config.json: full_attention_interval must be positive");
  for (int64_t i = 0; i < num_layers; ++i)
    kinds.push_back((i + 1) % interval == 0 ? LayerKind::kFullAttention : LayerKind::kLinearAttention);
  return kinds;
}

void parse_hybrid(const Json& cfg, ModelConfig& c) {
  c.layer_kinds = parse_layer_kinds(cfg, c.num_layers);
  LinearAttentionConfig& la = c.linear;
  la.key_heads = require_int(cfg, "linear_num_key_heads");
  la.value_heads = require_int(cfg, "linear_num_value_heads");
  la.key_dim = require_int(cfg, "linear_key_head_dim");
  la.value_dim = require_int(cfg, "linear_value_head_dim");
  la.conv_kernel = require_int(cfg, "linear_conv_kernel_dim");
  check(la.value_heads % la.key_heads == 0, ErrorKind::kInvalidInput,
        "config.json: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}", la.value_heads,
        la.key_heads);
  check(get_or<bool>(cfg, "attn_output_gate", true), ErrorKind::kUnsupported,
        "config.json: attn_output_gate=false is not a Qwen3.5 configuration");
  MoeConfig& moe = c.moe;
  moe.num_experts = int_or(cfg, "num_experts", 0);
  if (moe.num_experts > 0) {
    moe.top_k = require_int(cfg, "num_experts_per_tok");
    moe.expert_intermediate = require_int(cfg, "moe_intermediate_size");
    moe.shared_intermediate = int_or(cfg, "shared_expert_intermediate_size", 0);
    check(moe.top_k <= moe.num_experts, ErrorKind::kInvalidInput,
          "config.json: num_experts_per_tok {} exceeds num_experts {}", moe.top_k, moe.num_experts);
    // Qwen3.5-MoE always renormalises and has no sparse step; Qwen3-Next reads both.
    const bool next = c.model_type == "qwen3_next";
    moe.norm_topk = next ? get_or<bool>(cfg, "norm_topk_prob", true) : true;
    moe.sparse_step = next ? int_or(cfg, "decoder_sparse_step", 1) : 1;
    check(moe.sparse_step > 0, ErrorKind::kInvalidInput, "config.json: decoder_sparse_step must be positive");
    if (next)
      if (auto it = cfg.find("mlp_only_layers"); it != cfg.end() && it->is_array())
        for (const auto& l : *it)
          if (l.is_number_integer()) moe.mlp_only_layers.push_back(l.get<int64_t>());
  }
  for (int64_t l = 0; l < c.num_layers; ++l)
    check(c.is_moe_layer(l) || c.intermediate_size > 0, ErrorKind::kInvalidInput,
          "config.json: 'intermediate_size' is missing (layer {} has a dense FFN)", l);
  c.mtp_layers = int_or(cfg, "mtp_num_hidden_layers", int_or(cfg, "num_nextn_predict_layers", 0));
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (moe.num_experts == 0) return false;
  if (std::find(moe.mlp_only_layers.begin(), moe.mlp_only_layers.end(), layer) != moe.mlp_only_layers.end())
    return false;
  return (layer + 1) % moe.sparse_step == 0;
}

int64_t ModelConfig::rotary_dim() const {
  return static_cast<int64_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
}

ModelConfig parse_model_config(const Json& root) {
  check(root.is_object(), ErrorKind::kInvalidInput, "config.json must be a JSON object");
  const Json& cfg = root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
  ModelConfig c;
  c.model_type = get_or<std::string>(cfg, "model_type", get_or<std::string>(root, "model_type", ""));
  static const char* kDense[] = {"llama", "qwen2", "qwen3", "mistral"};
  static const char* kHybrid[] = {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next"};
  if (std::find(std::begin(kDense), std::end(kDense), c.model_type) != std::end(kDense)) {
    c.family = Family::kDense;
  } else if (std::find(std::begin(kHybrid), std::end(kHybrid), c.model_type) != std::end(kHybrid)) {
    c.family = Family::kQwen35;
  } else {
    fail(ErrorKind::kUnsupported, "config.json: model_type '{}' is not supported (supported: llama, qwen2, "
         "qwen3, mistral, qwen3_5, qwen3_5_moe, qwen3_next)", c.model_type);
  }
  c.vocab_size = require_int(cfg, "vocab_size");
  c.hidden_size = require_int(cfg, "hidden_size");
  c.num_layers = require_int(cfg, "num_hidden_layers");
  c.num_heads = require_int(cfg, "num_attention_heads");
  c.num_kv_heads = cfg.contains("num_key_value_heads") && !cfg["num_key_value_heads"].is_null()
                       ? require_int(cfg, "num_key_value_heads")
                       : c.num_heads;
  c.head_dim = cfg.contains("head_dim") && !cfg["head_dim"].is_null() ? require_int(cfg, "head_dim")
                                                                      : c.hidden_size / c.num_heads;
  if (cfg.contains("intermediate_size") && !cfg["intermediate_size"].is_null())
    c.intermediate_size = require_int(cfg, "intermediate_size");
  check(c.num_heads % c.num_kv_heads == 0, ErrorKind::kInvalidInput,
        "config.json: num_attention_heads {} is not a multiple of num_key_value_heads {}", c.num_heads,
        c.num_kv_heads);
  c.max_position_embeddings = get_or<int64_t>(cfg, "max_position_embeddings", 4096);
  c.rms_norm_eps = number_or(cfg, "rms_norm_eps", 1e-6);
  c.rope = parse_rope(cfg);
  check(c.rotary_dim() % 2 == 0 && c.rotary_dim() <= c.head_dim && c.rotary_dim() > 0, ErrorKind::kInvalidInput,
        "config.json: rotary dimension {} does not fit head_dim {}", c.rotary_dim(), c.head_dim);
  const bool use_sliding = get_or<bool>(cfg, "use_sliding_window", c.model_type == "mistral");
  c.sliding_window = use_sliding ? get_or<int64_t>(cfg, "sliding_window", 0) : 0;
  // The wrapper's own flag counts too (Qwen3.5 multimodal configs).
  c.tie_word_embeddings = get_or<bool>(cfg, "tie_word_embeddings", get_or<bool>(root, "tie_word_embeddings", false));
  c.attention_bias = get_or<bool>(cfg, "attention_bias", c.model_type == "qwen2");
  c.qk_norm = c.model_type == "qwen3" || c.family == Family::kQwen35;
  if (auto it = cfg.find("bos_token_id"); it != cfg.end() && it->is_number_integer()) c.bos_token_id = it->get<int32_t>();
  if (auto it = cfg.find("eos_token_id"); it != cfg.end()) add_ids(*it, c.eos_token_ids);
  if (&cfg != &root)
    if (auto it = root.find("eos_token_id"); it != root.end()) add_ids(*it, c.eos_token_ids);
  if (c.family == Family::kQwen35) parse_hybrid(cfg, c);
  return c;
}

void merge_generation_config(const Json& generation_config, ModelConfig& cfg) {
  if (auto it = generation_config.find("eos_token_id"); it != generation_config.end()) add_ids(*it, cfg.eos_token_ids);
  if (!cfg.bos_token_id)
    if (auto it = generation_config.find("bos_token_id"); it != generation_config.end() && it->is_number_integer())
      cfg.bos_token_id = it->get<int32_t>();
}

}  // namespace strata::model
