// Dense transformer forward pass:
//   x = embed(ids); per layer: x += o(attn(rope(q), rope(k), v)); x += down(silu(gate) ⊙ up);
//   logits = head(norm(x)).
#include "model/dense.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "backend/ops.h"
#include "core/error.h"
#include "model/rope_scaling.h"
#include "model/step.h"

namespace strata::model {

namespace {

namespace ops = backend;

struct Layer {
  Tensor input_norm, post_norm;
  backend::Weight q, k, v, o, gate, up, down;
  std::optional<Tensor> q_bias, k_bias, v_bias;
  std::optional<Tensor> q_norm, k_norm;
};

enum Slot : size_t { kX, kH, kQ, kK, kV, kAttn, kProj, kGate, kUp, kAct, kLast };

class DenseModel final : public Model {
 public:
  DenseModel(ModelConfig config, std::unique_ptr<WeightLoader> weights, std::string fingerprint)
      : Model(std::move(config), std::move(fingerprint), weights->device()),
        weights_(std::move(weights)),
        loader_(weights_.get()),
        // Dynamic NTK scaling changes the RoPE frequencies with the length: no fixed graph.
        runner_(device_, weights_->options().cuda_graphs && config_.rope.type != "dynamic") {
    load();
  }
  // The first `layers` layers of `full` (Model::first_layers): its weights and layers, viewed, not
  // copied; a step runner of its own, since its scratch and graphs are another function's.
  DenseModel(const DenseModel& full, int64_t layers)
      : Model(full.first_layers_config(layers), full.first_layers_fingerprint(layers),
              full.device_),
        loader_(full.loader_),
        embed_(full.embed_),
        lm_head_(full.lm_head_),
        final_norm_(full.final_norm_),
        layers_(full.layers_.first(static_cast<size_t>(layers))),
        rope_(full.rope_),
        decode_batch_(full.decode_batch_),  // the full model's: its first layers run them alike
        runner_(device_, loader_->options().cuda_graphs && config_.rope.type != "dynamic") {}

  ModelInfo info() const override {
    ModelInfo i;
    i.family = config_.model_type;
    i.layers = i.attention_layers = config_.num_layers;
    i.parameters = loader_->parameter_count();  // a view: the full model's, whose weights it shares
    i.weight_bytes = loader_->weight_bytes();
    i.state_bytes_per_token =
        static_cast<size_t>(2 * config_.num_layers * config_.num_kv_heads * config_.head_dim) *
        dtype_size(config_.kv_cache_dtype);
    i.kv_cache_dtype = config_.kv_cache_dtype;
    i.quantization = loader_->quantization();
    return i;
  }

  ModelState new_state(int64_t capacity) const override {
    check(capacity > 0, ErrorKind::kInvalidInput, "state capacity must be positive");
    ModelState s;
    s.capacity = capacity;
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      for (const char* kv : {"k", "v"}) {
        s.buffers.push_back({fmt::format("layers.{}.{}", l, kv),
                             backend::Buffer(device_, config_.kv_cache_dtype,
                                             {capacity, config_.num_kv_heads, config_.head_dim}),
                             true});
      }
    }
    return s;
  }

  void forward(std::span<const int32_t> tokens, ModelState& state, const Tensor& logits, bool all_logits) override {
    run(tokens, state, logits, all_logits);
  }
  void forward_device_token(const Tensor& token, ModelState& state, const Tensor& logits) override {
    run(StepTokens::on_device(token), state, logits, false);
  }
  void forward_decode(std::span<const DecodeItem> items) override {
    if (items.size() == 1) return Model::forward_decode(items);
    check(static_cast<int64_t>(items.size()) <= max_decode_batch(), ErrorKind::kInternal,
          "forward_decode: {} sequences, at most {}", items.size(), max_decode_batch());
    runner_.run_decode(items, config_.vocab_size, [&](const Step& step) { body(step, true); });
  }
  // Dynamic NTK scaling gives each length its own RoPE: one sequence a step.
  int64_t max_decode_batch() const override { return decode_batch_; }

  // Attention-only: nothing recurrent to keep per position; the rows are the batch's rows.
  void forward_verify(std::span<const int32_t> tokens, ModelState& state, std::span<const ModelState> after,
                      const Tensor& logits) override {
    check(static_cast<int64_t>(tokens.size()) <= max_verify_tokens(), ErrorKind::kInvalidInput,
          "a verify step of {} tokens; this model verifies at most {}", tokens.size(), max_verify_tokens());
    runner_.run_verify(tokens, state, after, config_.vocab_size, logits, [&](const Step& step) { body(step, true); });
  }
  // Rows the matmuls compute as alone (dynamic NTK scaling: one, so no speculation), within the
  // steps that are captured as graphs.
  int64_t max_verify_tokens() const override {
    return decode_batch_ > 1 ? std::min(decode_batch_, StepRunner::kGraphMaxTokens) : 0;
  }

  std::unique_ptr<Model> first_layers(int64_t layers) const override {
    return std::make_unique<DenseModel>(*this, layers);
  }

 private:
  // What max_decode_batch() answers: the rows every decode op of this model computes as alone.
  int64_t invariant_rows() const {
    if (config_.rope.type == "dynamic") return 1;
    std::vector<const backend::Weight*> ws{&lm_head_};
    for (const Layer& L : layers_)
      for (const backend::Weight* w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) ws.push_back(w);
    return backend::batch_invariant_rows(device_, ws);
  }

  void run(const StepTokens& tokens, ModelState& state, const Tensor& logits, bool all_logits) {
    if (config_.rope.type == "dynamic") rope_ = make_rope_params(config_, state.n_tokens + tokens.count());
    runner_.run(tokens, state, config_.vocab_size, logits, all_logits,
                [&](const Step& step) { body(step, all_logits); });
  }

  // all_logits: every row's (a batch's rows are each a sequence's last).
  void body(const Step& step, bool all_logits) {
    const int64_t T = step.tokens, D = config_.head_dim, H = config_.hidden_size, I = config_.intermediate_size;
    const int64_t Hq = config_.num_heads, Hkv = config_.num_kv_heads;
    const float eps = static_cast<float>(config_.rms_norm_eps);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    Scratch& s = runner_.scratch();
    Tensor x = s.get(kX, {T, H}), h = s.get(kH, {T, H});
    Tensor q2 = s.get(kQ, {T, Hq * D}), k2 = s.get(kK, {T, Hkv * D}), v2 = s.get(kV, {T, Hkv * D});  // for matmul
    Tensor q = q2.reshaped({T, Hq, D}), k = k2.reshaped({T, Hkv, D}), v = v2.reshaped({T, Hkv, D});
    Tensor attn = s.get(kAttn, {T, Hq * D}), proj = s.get(kProj, {T, H});
    Tensor gate = s.get(kGate, {T, I}), up = s.get(kUp, {T, I}), act = s.get(kAct, {T, I});

    ops::embedding(embed_, step.ids, x);
    // Each residual add (x += proj) runs inside the RMSNorm that follows it: the FFN's, the next
    // layer's, or the final one. Each norm hands its output to the matmul after it as a feed, and
    // gate/up hand SiLU(gate) ⊙ up to the down projection (slot 1: h's feed is still alive then).
    ops::MatmulFeed qkv_feed{&layers_.front().q};
    ops::rms_norm(x, layers_.front().input_norm, eps, false, h, &qkv_feed);
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      const Layer& L = layers_[l];
      const backend::Weight* qkv[] = {&L.q, &L.k, &L.v};
      const Tensor qkv_out[] = {q2, k2, v2};
      ops::matmul_group(h, qkv, qkv_out, &qkv_feed);
      if (L.q_bias) ops::add_bias(q2, *L.q_bias);
      if (L.k_bias) ops::add_bias(k2, *L.k_bias);
      if (L.v_bias) ops::add_bias(v2, *L.v_bias);
      ops::QkNorm norm;  // Qwen3's per-head q/k norms; none for Llama, Mistral, Qwen2
      if (L.q_norm) norm = {*L.q_norm, *L.k_norm, eps, false};
      attend(step, static_cast<size_t>(2 * l),
             LayerAttention{.q = q, .k = k, .v = v, .q_out = q, .gate_out = {}, .out = attn.reshaped({T, Hq, D}), .norm = norm,
                            .rope = &rope_, .scale = scale, .window = config_.sliding_window});
      ops::matmul(attn, L.o, proj);
      ops::MatmulFeed gate_feed{&L.gate}, act_feed{&L.down, 1};
      ops::add_rms_norm(x, proj, L.post_norm, eps, false, h, &gate_feed);
      const backend::Weight* gate_up[] = {&L.gate, &L.up};
      const Tensor gate_up_out[] = {gate, up};
      ops::matmul_group(h, gate_up, gate_up_out, &gate_feed, &act_feed);
      ops::silu_mul_matmul(gate, up, L.down, act, proj, &act_feed);
      if (l + 1 < config_.num_layers) {
        qkv_feed = ops::MatmulFeed{&layers_[l + 1].q};
        ops::add_rms_norm(x, proj, layers_[l + 1].input_norm, eps, false, h, &qkv_feed);
      }
    }
    // Every row of x gets the last add; only the last row is normed when only its logits are wanted.
    const Tensor normed = all_logits ? h : s.get(kLast, {1, H});
    ops::MatmulFeed head_feed{&lm_head_};
    ops::add_rms_norm(x, proj, final_norm_, eps, false, normed, &head_feed);
    ops::matmul(normed, lm_head_, step.logits, &head_feed);
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
      own_layers_.push_back(std::move(L));
    }
    layers_ = own_layers_;
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
    decode_batch_ = invariant_rows();
  }

  std::unique_ptr<WeightLoader> weights_;  // empty in a view of another model's first layers
  const WeightLoader* loader_ = nullptr;   // weights_, or the full model's
  backend::Weight embed_, lm_head_;
  Tensor final_norm_;
  std::vector<Layer> own_layers_;  // empty in a view
  std::span<const Layer> layers_;  // own_layers_, or the first of the full model's
  backend::RopeParams rope_;
  int64_t decode_batch_ = 1;
  StepRunner runner_;
};

}  // namespace

std::unique_ptr<Model> make_dense_model(ModelConfig config, std::unique_ptr<WeightLoader> weights,
                                        std::string fingerprint) {
  return std::make_unique<DenseModel>(std::move(config), std::move(weights), std::move(fingerprint));
}

}  // namespace strata::model
