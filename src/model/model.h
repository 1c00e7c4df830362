// Model: the interface every family implements (dense transformer, Qwen3.5 hybrid, ...), the
// per-sequence state buffers a model declares, and load_model(), which picks the family from the
// checkpoint. The runtime owns states and calls forward(); the model only computes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/memory.h"
#include "backend/ops.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/weights.h"

namespace strata::model {

// One buffer of a sequence's state. Token-indexed buffers (attention KV: row i belongs to token i)
// can be truncated; recurrent buffers (GDN conv window and SSM matrix) can only be restored.
struct StateBuffer {
  std::string name;  // e.g. "layers.3.k"
  backend::Buffer tensor;  // on the model's device
  bool token_indexed = false;
};

struct ModelState {
  std::vector<StateBuffer> buffers;
  int64_t n_tokens = 0;  // tokens already processed (the next token's position)
  int64_t capacity = 0;  // tokens the token-indexed buffers can hold
  // Paged (a runtime::StatePool's state): the token-indexed buffers are pools of KV blocks that
  // many states share; `kv` says where this state's tokens lie in them, and `blocks` is its table
  // on the host: the blocks it holds now, in token order (kv.table has room for capacity tokens).
  // Plain (kv.table empty): the state owns rows [0, capacity) of its buffers.
  backend::KvBlocks kv;
  std::vector<int32_t> blocks;

  bool paged() const { return kv.paged(); }
  // The tokens it can hold without more blocks.
  int64_t rows_held() const {
    return paged() ? static_cast<int64_t>(blocks.size()) * kv.block_tokens : capacity;
  }
};

struct ModelInfo {
  std::string family;  // "llama", "qwen2", ...
  int64_t layers = 0;
  int64_t attention_layers = 0;
  int64_t recurrent_layers = 0;
  int64_t parameters = 0;
  size_t weight_bytes = 0;
  size_t state_bytes_per_token = 0;  // KV cache growth
  DType kv_cache_dtype = DType::kF32;  // the KV cache's element type
  size_t state_bytes_fixed = 0;      // recurrent state per sequence
  std::string quantization;
  int64_t mtp_layers = 0;  // multi-token-prediction blocks loaded (for speculative decoding)
  // MoE FFNs whose shared expert runs as one more routed expert (no launches of its own on a GPU).
  int64_t moe_shared_folded = 0;
};

// One sequence's token in a batched decode step (Model::forward_decode): its id on the host, or
// (device_id not empty) an I32 [1] tensor holding it where a pick wrote it; the sequence's state;
// where its logits ([vocab], any device) go.
struct DecodeItem {
  int32_t id = 0;
  Tensor device_id;
  ModelState* state = nullptr;
  Tensor logits;
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelConfig& config() const { return config_; }
  // Stable identity of the weights and config (hash of config, tensor names/shapes/dtypes and a
  // sample of the contents); the state cache keys on it.
  const std::string& fingerprint() const { return fingerprint_; }
  // Where the weights live and forward() computes; states are made there too.
  Device device() const { return device_; }
  virtual ModelInfo info() const = 0;

  virtual ModelState new_state(int64_t capacity) const = 0;
  // Processes `tokens` at positions [state.n_tokens, state.n_tokens + T) and advances the state.
  // logits: [vocab] for the last token, or [T, vocab] when all_logits, on any device (the model
  // copies its result there).
  virtual void forward(std::span<const int32_t> tokens, ModelState& state, const Tensor& logits,
                       bool all_logits) = 0;
  // forward() of one token whose id lies in memory (an I32 [1] tensor on any device, such as the
  // token a GPU just picked), read where it lies, so that the step can be queued before the host
  // knows the id. The id is not checked before the step is queued: outside the vocabulary, a GPU
  // embeds it as zeros and the CPU backend refuses it.
  // This default reads the id back first (and so waits for it); the families override it.
  virtual void forward_device_token(const Tensor& token, ModelState& state, const Tensor& logits);
  // One token for each item, at most max_decode_batch() of them, run as one step: the weights are
  // read once for all. Each item's state and logits are exactly those of forward() (or
  // forward_device_token()) of its token alone: the model runs a batch only where the device's
  // ops are batch-invariant (backend::batch_invariant_rows). This default runs them one by one.
  virtual void forward_decode(std::span<const DecodeItem> items);
  virtual int64_t max_decode_batch() const { return 1; }

  // A speculative verify step: `tokens` (a sequence's last token and the drafts after it) at
  // positions [state.n_tokens, state.n_tokens + T), every row computed exactly as a one-token
  // forward() at its position computes it, so a greedy pick from row i is the pick plain decoding
  // makes there. logits: [T, vocab], every row's. Recurrent layers write their state after each
  // position t < T - 1 into after[t] (states whose recurrent buffers match this model's; their
  // token-indexed buffers may be empty), and the state itself holds the state after the last, so
  // keeping the first j tokens is one copy of after[j - 1] (runtime::VerifySlots), with no replay.
  // T is at most max_verify_tokens(); 0 there means this model cannot verify (the default).
  virtual void forward_verify(std::span<const int32_t> tokens, ModelState& state, std::span<const ModelState> after,
                              const Tensor& logits);
  virtual int64_t max_verify_tokens() const { return 0; }

  // This model's first `layers` layers, then its final norm and LM head, as a model of its own:
  // a self-speculation drafter (runtime::ModelDrafter over it drafts, this model verifies). It
  // shares this model's weights (nothing is copied or loaded) and computes layers [0, layers)
  // exactly as this model does; its states hold only those layers' buffers, and its fingerprint is
  // its own (it is another function). It reads this model's weights and layers, so it must not
  // outlive this model. 1 <= layers < config().num_layers. This default refuses (kUnsupported).
  virtual std::unique_ptr<Model> first_layers(int64_t layers) const;

 protected:
  Model() = default;
  Model(ModelConfig config, std::string fingerprint, Device device = Device::kCpu)
      : config_(std::move(config)), fingerprint_(std::move(fingerprint)), device_(device) {}

  // For first_layers(): checks the count, and gives this config cut to the first `layers` layers
  // (no MTP block) and the fingerprint of a view of them.
  ModelConfig first_layers_config(int64_t layers) const;
  std::string first_layers_fingerprint(int64_t layers) const;

  ModelConfig config_;
  std::string fingerprint_;
  Device device_ = Device::kCpu;
};

// path: a checkpoint directory (config.json + safetensors), or a .gguf file.
std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options = {});
// A checkpoint without files: config is what config.json would hold (a quantization section for
// MLX-quantized tensors included) and store its tensors (WeightStore::from_tensors; their memory
// must outlive the model). Loads exactly as the directory holding the same would, fingerprint
// included when that config.json is config.dump(2).
std::unique_ptr<Model> load_model(const Json& config, formats::WeightStore store,
                                  const LoadOptions& options = {});

}  // namespace strata::model
