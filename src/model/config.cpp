// config.json → ModelConfig, for the dense families (llama, qwen2, qwen3, mistral) and the fields the
// Qwen3.5 hybrids share with them. Missing required fields and unknown model types are clear errors.
#include "model/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

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
  check(get_or<bool>(cfg, "attn_output_gate", true), ErrorKind::kUnsupported,
        "config.json: attn_output_gate=false is not a Qwen3.5 configuration");
  MoeConfig& moe = c.moe;
  moe.num_experts = int_or(cfg, "num_experts", 0);
  if (moe.num_experts > 0) {
    moe.top_k = require_int(cfg, "num_experts_per_tok");
    moe.expert_intermediate = require_int(cfg, "moe_intermediate_size");
    moe.shared_intermediate = int_or(cfg, "shared_expert_intermediate_size", 0);
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
  c.mtp_layers = int_or(cfg, "mtp_num_hidden_layers", int_or(cfg, "num_nextn_predict_layers", 0));
}

// The checks of validate_model_config, each naming its key as the source names it.
class Checks {
 public:
  explicit Checks(ConfigSource source) : source_(std::move(source)) {}

  std::string name(std::string_view key) const { return source_.name(key); }

  template <typename... Args>
  void rule(bool ok, fmt::format_string<Args...> format, Args&&... args) const {
    if (!ok) fail(ErrorKind::kInvalidInput, "{}: {}", source_.file, fmt::format(format, std::forward<Args>(args)...));
  }

  void positive(std::string_view key, int64_t v) const {
    rule(v > 0, "'{}' must be positive, got {}", name(key), v);
  }

  // NaN fails the comparison, so it is refused too.
  void positive_finite(std::string_view key, double v) const {
    rule(std::isfinite(v) && v > 0.0, "'{}' must be a positive finite number, got {}", name(key), v);
  }

 private:
  ConfigSource source_;
};

void check_rope(const Checks& checks, const ModelConfig& c) {
  const RopeConfig& r = c.rope;
  checks.positive_finite("rope_theta", r.theta);
  checks.rule(r.partial_rotary_factor > 0.0 && r.partial_rotary_factor <= 1.0,
              "'{}' must be in (0, 1], got {}", checks.name("partial_rotary_factor"), r.partial_rotary_factor);
  // RoPE turns pairs of dimensions.
  checks.rule(c.rotary_dim() % 2 == 0 && c.rotary_dim() > 0,
              "rotary dimension {} ('{}' {} × '{}' {}) must be even and positive", c.rotary_dim(),
              checks.name("head_dim"), c.head_dim, checks.name("partial_rotary_factor"), r.partial_rotary_factor);
  if (r.type == "default") return;  // the scaling fields below are not read
  checks.positive_finite("factor", r.factor);
  checks.rule(r.original_max_position >= 0, "'original_max_position_embeddings' must not be negative, got {}",
              r.original_max_position);
  if (r.type == "llama3") {
    checks.rule(r.original_max_position > 0, "llama3 rope scaling needs original_max_position_embeddings");
    checks.positive_finite("low_freq_factor", r.low_freq_factor);
    // The medium band interpolates by (x - low) / (high - low).
    checks.rule(std::isfinite(r.high_freq_factor) && r.high_freq_factor > r.low_freq_factor,
                "'high_freq_factor' ({}) must be finite and greater than 'low_freq_factor' ({})", r.high_freq_factor,
                r.low_freq_factor);
  } else if (r.type == "yarn") {
    // YaRN's correction range divides by log(rope_theta) and takes log(... / beta).
    checks.rule(r.theta > 1.0, "yarn rope scaling needs '{}' greater than 1, got {}", checks.name("rope_theta"),
                r.theta);
    checks.positive_finite("beta_fast", r.beta_fast);
    checks.positive_finite("beta_slow", r.beta_slow);
    if (r.attention_factor) checks.positive_finite("attention_factor", *r.attention_factor);
    checks.rule(std::isfinite(r.mscale) && std::isfinite(r.mscale_all_dim),
                "'mscale' and 'mscale_all_dim' must be finite, got {} and {}", r.mscale, r.mscale_all_dim);
  }
}

void check_token_ids(const Checks& checks, const ModelConfig& c) {
  auto in_vocab = [&](const char* key, int64_t id) {
    checks.rule(id >= 0 && id < c.vocab_size, "'{}' {} is outside the vocabulary (size {})", checks.name(key), id,
                c.vocab_size);
  };
  if (c.bos_token_id) in_vocab("bos_token_id", *c.bos_token_id);
  for (int32_t id : c.eos_token_ids) in_vocab("eos_token_id", id);
}

void check_hybrid(const Checks& checks, const ModelConfig& c) {
  checks.rule(static_cast<int64_t>(c.layer_kinds.size()) == c.num_layers, "{} layer kinds for {} layers",
              c.layer_kinds.size(), c.num_layers);
  const LinearAttentionConfig& la = c.linear;
  checks.positive("linear_num_key_heads", la.key_heads);
  checks.positive("linear_num_value_heads", la.value_heads);
  checks.positive("linear_key_head_dim", la.key_dim);
  checks.positive("linear_value_head_dim", la.value_dim);
  // Each key head serves a whole number of value heads.
  checks.rule(la.value_heads % la.key_heads == 0, "'linear_num_value_heads' {} is not a multiple of "
              "'linear_num_key_heads' {}", la.value_heads, la.key_heads);
  // The conv window keeps the kernel's last (width - 1) inputs: at least one.
  checks.rule(la.conv_kernel >= 2, "'linear_conv_kernel_dim' must be at least 2, got {}", la.conv_kernel);
  const MoeConfig& moe = c.moe;
  checks.rule(moe.num_experts >= 0, "'num_experts' must not be negative, got {}", moe.num_experts);
  checks.rule(c.mtp_layers >= 0, "'mtp_num_hidden_layers' must not be negative, got {}", c.mtp_layers);
  if (moe.num_experts == 0) return;
  checks.rule(moe.top_k > 0 && moe.top_k <= moe.num_experts, "'num_experts_per_tok' {} must be between 1 and "
              "'num_experts' {}", moe.top_k, moe.num_experts);
  checks.positive("moe_intermediate_size", moe.expert_intermediate);
  checks.rule(moe.shared_intermediate >= 0, "'shared_expert_intermediate_size' must not be negative, got {}",
              moe.shared_intermediate);
  checks.positive("decoder_sparse_step", moe.sparse_step);
  for (int64_t layer : moe.mlp_only_layers)
    checks.rule(layer >= 0 && layer < c.num_layers, "'mlp_only_layers' names layer {} of {}", layer, c.num_layers);
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
  c.max_position_embeddings = get_or<int64_t>(cfg, "max_position_embeddings", 4096);
  c.rms_norm_eps = number_or(cfg, "rms_norm_eps", 1e-6);
  c.rope = parse_rope(cfg);
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
  validate_model_config(c);
  return c;
}

void merge_generation_config(const Json& generation_config, ModelConfig& cfg) {
  if (auto it = generation_config.find("eos_token_id"); it != generation_config.end()) add_ids(*it, cfg.eos_token_ids);
  if (!cfg.bos_token_id)
    if (auto it = generation_config.find("bos_token_id"); it != generation_config.end() && it->is_number_integer())
      cfg.bos_token_id = it->get<int32_t>();
  const Checks checks(ConfigSource{.file = "generation_config.json", .key_name = {}});
  check_token_ids(checks, cfg);
}

ConfigSource gguf_config_source(const std::string& path, const std::string& arch) {
  return {.file = path, .key_name = [arch](std::string_view key) -> std::string {
            // config_from_gguf (loader.cpp) reads each of these from the GGUF key named here.
            static const std::pair<const char*, const char*> kNames[] = {
                {"hidden_size", "{}.embedding_length"},
                {"num_hidden_layers", "{}.block_count"},
                {"intermediate_size", "{}.feed_forward_length"},
                {"num_attention_heads", "{}.attention.head_count"},
                {"num_key_value_heads", "{}.attention.head_count_kv"},
                {"head_dim", "{}.attention.key_length"},
                {"max_position_embeddings", "{}.context_length"},
                {"rms_norm_eps", "{}.attention.layer_norm_rms_epsilon"},
                {"rope_theta", "{}.rope.freq_base"},
                {"partial_rotary_factor", "{0}.rope.dimension_count / {0}.attention.key_length"},
                {"vocab_size", "rows of token_embd.weight"},
                {"bos_token_id", "tokenizer.ggml.bos_token_id"},
                {"eos_token_id", "tokenizer.ggml.eos_token_id"},
            };
            for (const auto& [json_key, gguf_key] : kNames)
              if (key == json_key) return fmt::format(fmt::runtime(gguf_key), arch);
            return std::string(key);
          }};
}

void validate_model_config(const ModelConfig& c, const ConfigSource& source) {
  const Checks checks(source);
  for (const auto& [key, value] :
       {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
        {"num_hidden_layers", c.num_layers}, {"num_attention_heads", c.num_heads},
        {"num_key_value_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
        {"max_position_embeddings", c.max_position_embeddings}})
    checks.positive(key, value);
  // Grouped-query attention shares each KV head among a whole number of query heads.
  checks.rule(c.num_heads % c.num_kv_heads == 0, "'{}' {} is not a multiple of '{}' {}",
              checks.name("num_attention_heads"), c.num_heads, checks.name("num_key_value_heads"),
              c.num_kv_heads);
  checks.rule(c.sliding_window >= 0, "'sliding_window' must not be negative, got {}", c.sliding_window);
  // The norms run in float: an epsilon that rounds to 0 there divides by zero on a zero row.
  checks.rule(std::isfinite(static_cast<float>(c.rms_norm_eps)) && static_cast<float>(c.rms_norm_eps) > 0.0f,
              "'{}' must be a positive finite number, got {}", checks.name("rms_norm_eps"), c.rms_norm_eps);
  check_rope(checks, c);
  check_token_ids(checks, c);
  if (c.family == Family::kQwen35) check_hybrid(checks, c);
  // Every dense FFN needs its size; a model whose every layer is MoE may have none.
  if (c.intermediate_size <= 0)
    for (int64_t l = 0; l < c.num_layers; ++l)
      checks.rule(c.is_moe_layer(l), "'{}' is missing or not positive (layer {} has a dense FFN)",
                  checks.name("intermediate_size"), l);
}

}  // namespace strata::model
