// load_model: reads the config (config.json + generation_config.json, or GGUF metadata), opens the
// weights (files, or tensors already in memory), computes the fingerprint and builds the model of
// the right family.
#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "core/hash.h"
#include "core/mmap.h"
#include "model/dense.h"
#include "model/model.h"
#include "model/qwen35.h"

namespace strata::model {

void Model::forward_decode(std::span<const DecodeItem> items) {
  for (const DecodeItem& item : items) {
    if (item.device_id.empty()) {
      forward(std::span<const int32_t>(&item.id, 1), *item.state, item.logits, false);
    } else {
      forward_device_token(item.device_id, *item.state, item.logits);
    }
  }
}

void Model::forward_verify(std::span<const int32_t> tokens, ModelState& state, std::span<const ModelState> after,
                           const Tensor& logits) {
  (void)tokens, (void)state, (void)after, (void)logits;
  fail(ErrorKind::kUnsupported, "{} models cannot verify speculative drafts", config_.model_type);
}

std::unique_ptr<Model> Model::first_layers(int64_t layers) const {
  (void)layers;
  fail(ErrorKind::kUnsupported, "{} models cannot run their first layers alone (self-speculation)",
       config_.model_type);
}

ModelConfig Model::first_layers_config(int64_t layers) const {
  check(layers >= 1 && layers < config_.num_layers, ErrorKind::kInvalidInput,
        "the first {} layers of a model of {}: a view needs at least 1 and fewer than all", layers,
        config_.num_layers);
  ModelConfig c = config_;
  c.num_layers = layers;
  if (!c.layer_kinds.empty()) c.layer_kinds.resize(static_cast<size_t>(layers));
  std::erase_if(c.moe.mlp_only_layers, [&](int64_t l) { return l >= layers; });
  c.mtp_layers = 0;
  return c;
}

std::string Model::first_layers_fingerprint(int64_t layers) const {
  Hasher h;
  h.update(fingerprint_);
  h.update(fmt::format("|first_layers:{}", layers));
  return h.hex_digest();
}

void Model::forward_device_token(const Tensor& token, ModelState& state, const Tensor& logits) {
  check(token.dtype == DType::kI32 && token.numel() == 1, ErrorKind::kInternal, "forward: a device token must be one I32");
  int32_t id = 0;
  backend::copy_to_host(token, &id);
  forward(std::span<const int32_t>(&id, 1), state, logits, false);
}

namespace {

namespace fs = std::filesystem;

// Hash of the config text, every tensor's name, dtype and shape, and 64 bytes from the start and
// the end of each tensor's data.
template <typename ForEachTensor>
std::string fingerprint_of(const std::string& config_text, ForEachTensor&& for_each) {
  Hasher h;
  h.update(config_text);
  for_each([&](const std::string& name, std::string_view dtype, const std::string& shape, const uint8_t* data,
               size_t nbytes) {
    h.update(name);
    h.update(dtype);
    h.update(shape);
    const size_t n = std::min<size_t>(64, nbytes);
    h.update(data, n);
    h.update(data + nbytes - n, n);
  });
  return h.hex_digest();
}

int64_t gguf_int(const Json& meta, const std::string& key, int64_t fallback = -1) {
  auto it = meta.find(key);
  if (it == meta.end()) {
    check(fallback >= 0, ErrorKind::kInvalidInput, "GGUF metadata lacks '{}'", key);
    return fallback;
  }
  check(it->is_number_integer(), ErrorKind::kInvalidInput, "GGUF metadata '{}' is not an integer", key);
  return it->get<int64_t>();
}

ModelConfig config_from_gguf(const formats::GgufFile& gguf) {
  const Json& m = gguf.metadata();
  const std::string arch = get_or<std::string>(m, "general.architecture", "");
  check(arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "mistral", ErrorKind::kUnsupported,
        "{}: GGUF architecture '{}' is not supported", gguf.path(), arch);
  ModelConfig c;
  c.model_type = arch;
  c.family = Family::kDense;
  c.hidden_size = gguf_int(m, arch + ".embedding_length");
  c.num_layers = gguf_int(m, arch + ".block_count");
  c.intermediate_size = gguf_int(m, arch + ".feed_forward_length");
  c.num_heads = gguf_int(m, arch + ".attention.head_count");
  c.num_kv_heads = gguf_int(m, arch + ".attention.head_count_kv", c.num_heads);
  check(c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0 && c.hidden_size > 0,
        ErrorKind::kInvalidInput, "{}: inconsistent head counts", gguf.path());
  c.head_dim = gguf_int(m, arch + ".attention.key_length", c.hidden_size / c.num_heads);
  c.max_position_embeddings = gguf_int(m, arch + ".context_length", 2048);
  c.rms_norm_eps = m.value(arch + ".attention.layer_norm_rms_epsilon", 1e-5);
  c.rope.theta = m.value(arch + ".rope.freq_base", 10000.0);
  const int64_t rot = gguf_int(m, arch + ".rope.dimension_count", c.head_dim);
  c.rope.partial_rotary_factor = static_cast<double>(rot) / static_cast<double>(c.head_dim);
  // llama.cpp's converter permutes llama Q/K rows for adjacent-pair rotation; qwen2/3 keep NeoX order.
  c.rope_interleaved = arch == "llama" || arch == "mistral";
  c.qk_norm = arch == "qwen3";
  const auto* embd = gguf.find("token_embd.weight");
  check(embd != nullptr, ErrorKind::kInvalidInput, "{}: token_embd.weight is missing", gguf.path());
  c.vocab_size = embd->shape()[0];
  c.tie_word_embeddings = gguf.find("output.weight") == nullptr;
  if (auto it = m.find("tokenizer.ggml.bos_token_id"); it != m.end() && it->is_number_integer())
    c.bos_token_id = it->get<int32_t>();
  if (auto it = m.find("tokenizer.ggml.eos_token_id"); it != m.end() && it->is_number_integer())
    c.eos_token_ids.push_back(it->get<int32_t>());
  return c;
}

// The KV cache's element type: as asked, or for kAuto BF16 when the checkpoint holds 16-bit floats.
DType kv_cache_dtype(KvCacheType type, bool sixteen_bit_checkpoint) {
  switch (type) {
    case KvCacheType::kF32:
      return DType::kF32;
    case KvCacheType::kBF16:
      return DType::kBF16;
    case KvCacheType::kAuto:
      break;
  }
  return sixteen_bit_checkpoint ? DType::kBF16 : DType::kF32;
}

// Whether a safetensors checkpoint computes in 16-bit floats: config.json's "dtype" ("torch_dtype"
// before transformers 4.56; a nested text_config's first) where it names one, as vLLM's "auto"
// follows it, else whether any stored tensor is BF16/F16 (MLX-quantized checkpoints: the scales).
bool sixteen_bit_checkpoint(const Json& config, const formats::WeightStore& store) {
  for (const Json* level :
       {config.contains("text_config") ? &config["text_config"] : nullptr, &config}) {
    if (level == nullptr || !level->is_object()) continue;
    for (const char* key : {"dtype", "torch_dtype"}) {
      const auto it = level->find(key);
      if (it == level->end() || !it->is_string()) continue;
      const std::string name = it->get<std::string>();
      if (name == "bfloat16" || name == "float16") return true;
      if (name == "float32") return false;
    }
  }
  for (const auto& name : store.names()) {
    const DType t = store.get(name).dtype;
    if (t == DType::kBF16 || t == DType::kF16) return true;
  }
  return false;
}

// Weights quantized on load differ from the checkpoint's, so the options are part of the identity.
std::string load_variant(const LoadOptions& options) {
  return options.quantize ? fmt::format("|quantize:q{}g{}", options.quantize->bits, options.quantize->group_size) : "";
}

std::unique_ptr<Model> build(ModelConfig config, std::unique_ptr<WeightLoader> weights, std::string fingerprint) {
  switch (config.family) {
    case Family::kDense:
      return make_dense_model(std::move(config), std::move(weights), std::move(fingerprint));
    case Family::kQwen35:
      return make_qwen35_model(std::move(config), std::move(weights), std::move(fingerprint));
  }
  fail(ErrorKind::kInternal, "unknown model family for '{}'", config.model_type);
}

// A safetensors checkpoint from a directory or from memory: config_text is what the fingerprint
// hashes (the config.json bytes, or the in-memory config serialized).
std::unique_ptr<Model> build_from_store(const std::string& config_text, const Json& config_json,
                                        ModelConfig config, formats::WeightStore store,
                                        const LoadOptions& options) {
  std::string fp = fingerprint_of(config_text + load_variant(options), [&](auto&& add) {
    for (const auto& name : store.names()) {
      const Tensor& t = store.get(name);
      add(name, dtype_name(t.dtype), t.shape.str(), static_cast<const uint8_t*>(t.data),
          t.nbytes());
    }
  });
  config.kv_cache_dtype =
      kv_cache_dtype(options.kv_cache, sixteen_bit_checkpoint(config_json, store));
  auto weights = std::make_unique<WeightLoader>(std::move(store), config_json, options);
  return build(std::move(config), std::move(weights), std::move(fp));
}

}  // namespace

KvCacheType parse_kv_cache_type(std::string_view text, std::string_view what) {
  if (text == "auto") return KvCacheType::kAuto;
  if (text == "f32") return KvCacheType::kF32;
  if (text == "bf16") return KvCacheType::kBF16;
  fail(ErrorKind::kInvalidInput, "{} must be auto, f32 or bf16, got '{}'", what, text);
}

std::string_view kv_cache_type_name(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "f32"; }

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options) {
  check(fs::exists(path), ErrorKind::kNotFound, "model path {} does not exist", path);
  if (!fs::is_directory(path)) {
    check(path.ends_with(".gguf"), ErrorKind::kInvalidInput,
          "{}: expected a model directory (config.json + *.safetensors) or a .gguf file", path);
    auto gguf = std::make_shared<formats::GgufFile>(path);
    ModelConfig config = config_from_gguf(*gguf);
    validate_model_config(config, gguf_config_source(path, config.model_type));
    bool sixteen_bit = false;  // any tensor not F32 (llama.cpp's own cache is f16)
    for (const auto& t : gguf->tensors())
      sixteen_bit = sixteen_bit || formats::ggml_type_name(t.type) != "F32";
    config.kv_cache_dtype = kv_cache_dtype(options.kv_cache, sixteen_bit);
    std::string fp = fingerprint_of(gguf->metadata().dump(-1, ' ', false, Json::error_handler_t::replace) + load_variant(options), [&](auto&& add) {
      for (const auto& t : gguf->tensors())
        add(t.name, formats::ggml_type_name(t.type), t.shape().str(), t.data, t.nbytes);
    });
    auto weights = std::make_unique<WeightLoader>(gguf, options);
    return build(std::move(config), std::move(weights), std::move(fp));
  }
  const std::string config_path = path + "/config.json";
  const std::string config_text = options.config_override.empty() ? read_file(config_path) : options.config_override;
  const Json config_json = parse_json(config_text, config_path);
  ModelConfig config = parse_model_config(config_json);
  if (file_exists(path + "/generation_config.json")) {
    merge_generation_config(read_json_file(path + "/generation_config.json"), config);
  }
  return build_from_store(config_text, config_json, std::move(config),
                          formats::WeightStore::open(path), options);
}

std::unique_ptr<Model> load_model(const Json& config, formats::WeightStore store,
                                  const LoadOptions& options) {
  check(options.config_override.empty(), ErrorKind::kInvalidInput,
        "load_model: config_override applies to checkpoint directories; pass the config itself "
        "instead");
  // The same text a config.json holding this JSON would have, so both ways share a fingerprint.
  const std::string config_text = config.dump(2);
  ModelConfig parsed = parse_model_config(config);
  return build_from_store(config_text, config, std::move(parsed), std::move(store), options);
}

}  // namespace strata::model
