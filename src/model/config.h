// ModelConfig: the typed view of a checkpoint's config.json (or GGUF metadata). Every dimension the
// model code uses comes from here; nothing is hard-coded.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"

namespace strata::model {

enum class Family { kDense, kQwen35 };

// Token mixer of one layer of a hybrid model.
enum class LayerKind { kFullAttention, kLinearAttention };

// Gated DeltaNet ("linear_attention") dimensions of Qwen3.5 / Qwen3-Next.
struct LinearAttentionConfig {
  int64_t key_heads = 0;    // Hk
  int64_t value_heads = 0;  // Hv, a multiple of Hk
  int64_t key_dim = 0;      // dk
  int64_t value_dim = 0;    // dv
  int64_t conv_kernel = 0;  // Kc
  int64_t conv_dim() const { return 2 * key_heads * key_dim + value_heads * value_dim; }
};

// Mixture-of-experts FFN (Qwen3.5-MoE on every layer; Qwen3-Next on the sparse-step layers).
struct MoeConfig {
  int64_t num_experts = 0;  // 0: dense FFN everywhere
  int64_t top_k = 0;
  int64_t expert_intermediate = 0;
  int64_t shared_intermediate = 0;  // 0: no shared expert
  bool norm_topk = true;
  int64_t sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
};

struct RopeConfig {
  std::string type = "default";  // default | linear | dynamic | yarn | llama3
  double theta = 10000.0;
  double factor = 1.0;
  double partial_rotary_factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 0;  // 0: not given
  // yarn
  std::optional<double> attention_factor;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
  bool truncate = true;
};

struct ModelConfig {
  std::string model_type;  // "llama", "qwen2", "qwen3", "mistral", "qwen3_5_text", ...
  Family family = Family::kDense;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  int64_t sliding_window = 0;  // 0: none
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool rope_interleaved = false;  // GGUF llama stores Q/K for adjacent-pair rotation
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool qk_norm = false;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;

  // Hybrid (Family::kQwen35) only.
  std::vector<LayerKind> layer_kinds;  // one per layer
  LinearAttentionConfig linear;
  MoeConfig moe;
  int64_t mtp_layers = 0;  // multi-token-prediction blocks in the checkpoint (used for drafting)

  // Not from config.json: the KV cache's element type, chosen at load (LoadOptions::kv_cache).
  DType kv_cache_dtype = DType::kF32;

  int64_t rotary_dim() const;
  bool is_moe_layer(int64_t layer) const;
};

// Parses config.json (the text part: a nested "text_config" wins over the top level), then
// validates it (validate_model_config).
ModelConfig parse_model_config(const Json& config);

// Reads eos ids from a generation_config.json object and adds them to cfg (union, no duplicates);
// an id outside cfg's vocabulary is an error.
void merge_generation_config(const Json& generation_config, ModelConfig& cfg);

// Where a config came from, for error messages: the file, and its name for each config.json key
// (GGUF metadata names them its own way).
struct ConfigSource {
  std::string file = "config.json";
  std::function<std::string(std::string_view key)> key_name;  // empty: config.json's names

  std::string name(std::string_view key) const {
    return key_name ? key_name(key) : std::string(key);
  }
};

// The source of a config read from a GGUF file's metadata (architecture `arch`).
ConfigSource gguf_config_source(const std::string& path, const std::string& arch);

// Refuses, as Error(kInvalidInput) naming the key and the value, every value the model code or its
// kernels cannot run with: sizes, head counts and dims that are not positive or do not divide as
// the kernels assume, epsilons, RoPE thetas and scaling factors that are not positive and finite,
// partial_rotary_factor outside (0, 1], token ids outside the vocabulary, and the hybrid's GDN and
// MoE shapes. Run on every config when it is built, so a bad file fails at load and not on every
// request after it.
void validate_model_config(const ModelConfig& c, const ConfigSource& source = {});

}  // namespace strata::model
