// Dense transformer forward pass:
//   x = embed(ids); per layer: x += o(attn(rope(q), rope(k), v)); x += down(silu(gate) ⊙ up);
//   logits = head(norm(x)).
#include "model/dense.h"

#include <cmath>

#include "backend/ops.h"
#include "core/error.h"
#include "model/rope_scaling.h"

namespace strata::model {

namespace {

namespace ops = backend;

struct Layer {
  Tensor input_norm, post_norm;
  backend::Weight q, k, v, o, gate, up, down;
  std::optional<Tensor> q_bias, k_bias, v_bias;
  std::optional<Tensor> q_norm, k_norm;
};

// Activation buffers, grown on demand and reused across calls.
struct Scratch {
  HostTensor x, h, q, k, v, attn, proj, gate, up, act, last;
  int64_t rows = 0;
};

class DenseModel final : public Model {
 public:
  DenseModel(ModelConfig config, std::unique_ptr<WeightLoader> weights, std::string fingerprint)
      : Model(std::move(config), std::move(fingerprint)), weights_(std::move(weights)) {
    load();
  }

  ModelInfo info() const override {
    ModelInfo i;
    i.family = config_.model_type;
    i.layers = i.attention_layers = config_.num_layers;
    i.parameters = weights_->parameter_count();
    i.weight_bytes = weights_->weight_bytes();
    i.state_bytes_per_token = static_cast<size_t>(2 * config_.num_layers * config_.num_kv_heads * config_.head_dim) * 4;
    i.quantization = weights_->quantization();
    return i;
  }

  ModelState new_state(int64_t capacity) const override {
    check(capacity > 0, ErrorKind::kInvalidInput, "state capacity must be positive");
    ModelState s;
    s.capacity = capacity;
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      for (const char* kv : {"k", "v"}) {
        s.buffers.push_back({fmt::format("layers.{}.{}", l, kv),
                             HostTensor(DType::kF32, {capacity, config_.num_kv_heads, config_.head_dim}), true});
      }
    }
    return s;
  }

  void forward(std::span<const int32_t> tokens, ModelState& state, const Tensor& logits, bool all_logits) override {
    const int64_t T = static_cast<int64_t>(tokens.size());
    check(T > 0, ErrorKind::kInvalidInput, "forward needs at least one token");
    const int64_t start = state.n_tokens;
    check(start + T <= state.capacity, ErrorKind::kInvalidInput,
          "context overflow: {} tokens do not fit the state's capacity of {}", start + T, state.capacity);
    const int64_t V = config_.vocab_size;
    check(logits.numel() == (all_logits ? T * V : V), ErrorKind::kInternal, "forward: logits shape {}",
          logits.shape.str());
    ensure_scratch(T);
    const int64_t D = config_.head_dim;
    const int64_t Hq = config_.num_heads, Hkv = config_.num_kv_heads;
    positions_.resize(T);
    for (int64_t t = 0; t < T; ++t) positions_[t] = static_cast<int32_t>(start + t);
    if (config_.rope.type == "dynamic") rope_ = make_rope_params(config_, start + T);
    const float eps = static_cast<float>(config_.rms_norm_eps);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));

    Tensor x = rows(s_.x, T), h = rows(s_.h, T);
    Tensor q2 = rows(s_.q, T), k2 = rows(s_.k, T), v2 = rows(s_.v, T);  // [T, heads * D] for matmul
    Tensor q = q2.reshaped({T, Hq, D}), k = k2.reshaped({T, Hkv, D}), v = v2.reshaped({T, Hkv, D});
    Tensor attn = rows(s_.attn, T), proj = rows(s_.proj, T);
    Tensor gate = rows(s_.gate, T), up = rows(s_.up, T), act = rows(s_.act, T);

    ops::embedding(embed_, tokens, x);
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      const Layer& L = layers_[l];
      ops::rms_norm(x, L.input_norm, eps, false, h);
      ops::matmul(h, L.q, q2);
      ops::matmul(h, L.k, k2);
      ops::matmul(h, L.v, v2);
      if (L.q_bias) ops::add_bias(q2, *L.q_bias);
      if (L.k_bias) ops::add_bias(k2, *L.k_bias);
      if (L.v_bias) ops::add_bias(v2, *L.v_bias);
      if (L.q_norm) ops::rms_norm(q, *L.q_norm, eps, false, q);
      if (L.k_norm) ops::rms_norm(k, *L.k_norm, eps, false, k);
      ops::rope(q, positions_, rope_);
      ops::rope(k, positions_, rope_);
      const Tensor& k_cache = state.buffers[2 * l].tensor.view();
      const Tensor& v_cache = state.buffers[2 * l + 1].tensor.view();
      ops::copy_rows(k, k_cache, start);
      ops::copy_rows(v, v_cache, start);
      ops::attention(q, k_cache, v_cache, start, scale, config_.sliding_window, attn.reshaped({T, Hq, D}));
      ops::matmul(attn, L.o, proj);
      ops::add(x, proj);
      ops::rms_norm(x, L.post_norm, eps, false, h);
      ops::matmul(h, L.gate, gate);
      ops::matmul(h, L.up, up);
      ops::silu_mul(gate, up, act);
      ops::matmul(act, L.down, proj);
      ops::add(x, proj);
    }
    state.n_tokens = start + T;
    if (all_logits) {
      ops::rms_norm(x, final_norm_, eps, false, h);
      ops::matmul(h, lm_head_, logits.reshaped({T, V}));
    } else {
      Tensor last = rows(s_.last, 1);
      ops::rms_norm(x.rows(T - 1, T), final_norm_, eps, false, last);
      ops::matmul(last, lm_head_, logits.reshaped({1, V}));
    }
  }

 private:
  static Tensor rows(const HostTensor& t, int64_t n) { return t.view().rows(0, n); }

  void ensure_scratch(int64_t T) {
    if (T <= s_.rows) return;
    const int64_t H = config_.hidden_size, D = config_.head_dim;
    const int64_t I = config_.intermediate_size;
    s_.x = HostTensor(DType::kF32, {T, H});
    s_.h = HostTensor(DType::kF32, {T, H});
    s_.q = HostTensor(DType::kF32, {T, config_.num_heads * D});
    s_.k = HostTensor(DType::kF32, {T, config_.num_kv_heads * D});
    s_.v = HostTensor(DType::kF32, {T, config_.num_kv_heads * D});
    s_.attn = HostTensor(DType::kF32, {T, config_.num_heads * D});
    s_.proj = HostTensor(DType::kF32, {T, H});
    s_.gate = HostTensor(DType::kF32, {T, I});
    s_.up = HostTensor(DType::kF32, {T, I});
    s_.act = HostTensor(DType::kF32, {T, I});
    s_.last = HostTensor(DType::kF32, {1, H});
    s_.rows = T;
  }

  void load() {
    WeightLoader& w = *weights_;
    const bool gguf = w.is_gguf();
    const ModelConfig& c = config_;
    auto expect = [&](const backend::Weight& m, int64_t rows, int64_t cols, const std::string& name) {
      check(m.rows() == rows && m.cols() == cols, ErrorKind::kInvalidInput,
            "{}: shape [{}, {}] does not match the config ([{}, {}])", name, m.rows(), m.cols(), rows, cols);
    };
    const std::string embed_name = gguf ? "token_embd" : "model.embed_tokens";
    embed_ = w.matrix(embed_name);
    expect(embed_, c.vocab_size, c.hidden_size, embed_name);
    const int64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      Layer L;
      const std::string p = gguf ? fmt::format("blk.{}.", l) : fmt::format("model.layers.{}.", l);
      auto name = [&](const char* hf, const char* gg) { return p + (gguf ? gg : hf); };
      L.input_norm = w.vector(name("input_layernorm.weight", "attn_norm.weight"));
      L.post_norm = w.vector(name("post_attention_layernorm.weight", "ffn_norm.weight"));
      L.q = w.matrix(name("self_attn.q_proj", "attn_q"));
      L.k = w.matrix(name("self_attn.k_proj", "attn_k"));
      L.v = w.matrix(name("self_attn.v_proj", "attn_v"));
      L.o = w.matrix(name("self_attn.o_proj", "attn_output"));
      L.gate = w.matrix(name("mlp.gate_proj", "ffn_gate"));
      L.up = w.matrix(name("mlp.up_proj", "ffn_up"));
      L.down = w.matrix(name("mlp.down_proj", "ffn_down"));
      expect(L.q, qd, c.hidden_size, "q_proj");
      expect(L.k, kvd, c.hidden_size, "k_proj");
      expect(L.v, kvd, c.hidden_size, "v_proj");
      expect(L.o, c.hidden_size, qd, "o_proj");
      expect(L.gate, c.intermediate_size, c.hidden_size, "gate_proj");
      expect(L.up, c.intermediate_size, c.hidden_size, "up_proj");
      expect(L.down, c.hidden_size, c.intermediate_size, "down_proj");
      L.q_bias = w.optional_vector(name("self_attn.q_proj.bias", "attn_q.bias"));
      L.k_bias = w.optional_vector(name("self_attn.k_proj.bias", "attn_k.bias"));
      L.v_bias = w.optional_vector(name("self_attn.v_proj.bias", "attn_v.bias"));
      if (c.qk_norm) {
        L.q_norm = w.vector(name("self_attn.q_norm.weight", "attn_q_norm.weight"));
        L.k_norm = w.vector(name("self_attn.k_norm.weight", "attn_k_norm.weight"));
      }
      layers_.push_back(std::move(L));
    }
    final_norm_ = w.vector(gguf ? "output_norm.weight" : "model.norm.weight");
    const std::string head_name = gguf ? "output" : "lm_head";
    if (!c.tie_word_embeddings && w.has(head_name + ".weight")) {
      lm_head_ = w.matrix(head_name);
      expect(lm_head_, c.vocab_size, c.hidden_size, head_name);
    } else {
      check(c.tie_word_embeddings || gguf, ErrorKind::kInvalidInput, "lm_head.weight is missing (and embeddings are not tied)");
      lm_head_ = embed_;
    }
    rope_ = make_rope_params(c, c.max_position_embeddings);
  }

  std::unique_ptr<WeightLoader> weights_;
  backend::Weight embed_, lm_head_;
  Tensor final_norm_;
  std::vector<Layer> layers_;
  backend::RopeParams rope_;
  std::vector<int32_t> positions_;
  Scratch s_;
};

}  // namespace

std::unique_ptr<Model> make_dense_model(ModelConfig config, std::unique_ptr<WeightLoader> weights,
                                        std::string fingerprint) {
  return std::make_unique<DenseModel>(std::move(config), std::move(weights), std::move(fingerprint));
}

}  // namespace strata::model
