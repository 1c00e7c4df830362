// Qwen3.5 / Qwen3.5-MoE / Qwen3-Next forward pass (MODEL_SPEC.md §1):
//   x = embed(ids); per layer: x += Mixer(norm(x)); x += FFN(norm(x)); logits = head(norm(x)),
// where Mixer is a Gated DeltaNet (layer_kinds = linear) or gated attention, and FFN is SwiGLU or MoE.
// Checkpoint quirks are resolved at load: name prefixes (HF text, HF multimodal, MLX), the norm
// convention (raw HF (1 + w) vs MLX's shifted w), the conv layout, Qwen3-Next's fused projections
// and the three expert storages (per expert, fused gate_up_proj, MLX switch_mlp).
#include "model/qwen35.h"

#include <cmath>
#include <span>
#include <string>

#include "backend/gdn.h"
#include "backend/moe.h"
#include "backend/ops.h"
#include "core/error.h"
#include "model/rope_scaling.h"
#include "model/step.h"

namespace strata::model {

namespace {

namespace ops = backend;
using backend::Weight;

// Spans of up to this many tokens run the delta rule token by token, exactly as decode does (so a
// speculative verify pass matches plain decoding); longer spans use the chunked form.
constexpr int64_t kRecurrentMaxTokens = 8;
constexpr float kL2NormEps = 1e-6f;

struct AttentionMixer {
  Weight q, k, v, o;  // q: [Hq · 2D, H], query and gate interleaved per head
  Tensor q_norm, k_norm;
};

struct LinearMixer {
  Weight qkv, z, b, a, out;
  Tensor conv;  // [conv_dim, Kc]
  Tensor a_log, dt_bias, norm;
};

struct Ffn {
  bool moe = false;
  Weight gate, up, down;  // dense SwiGLU
  Weight router;
  std::vector<Weight> expert_gate, expert_up, expert_down;
  backend::Buffer expert_table;  // what moe_experts needs to find them (a GPU's address table)
  bool shared = false;
  // The shared expert folded in as expert E (the last of expert_*), its gate logit as row E of the
  // router, so that topk_softmax gives every token a last slot for it and moe_experts adds it with the
  // routed ones: four launches an MoE layer on a GPU instead of eight. Taken when the shared expert
  // has the routed experts' shape and format and its gate the router's format (Qwen3.5-MoE and
  // Qwen3-Next checkpoints) and LoadOptions::moe_fold_shared allows it.
  bool shared_folded = false;
  Weight shared_gate, shared_up, shared_down, shared_expert_gate;
};

struct Layer {
  LayerKind kind = LayerKind::kLinearAttention;
  Tensor input_norm, post_norm;
  AttentionMixer attn;
  LinearMixer linear;
  Ffn ffn;
  size_t state = 0;  // index of this layer's first state buffer
};

// The multi-token-prediction block, loaded when the checkpoint has one (speculative decoding).
struct Mtp {
  Weight fc;
  Tensor norm_embedding, norm_hidden, norm;
  Layer layer;
};

// How a checkpoint names and stores the text model.
struct Layout {
  std::string prefix;   // "model.", "model.language_model." or "language_model.model."
  std::string lm_head;  // "lm_head" or "language_model.lm_head"
  bool one_plus_norm = true;  // raw HF: norms are (1 + w); MLX stores w + 1 already
};

enum Slot : size_t {
  kX, kH, kProj, kLast,
  kAttnP, kAttnQ, kAttnGate, kAttnK, kAttnV, kAttnOut,
  kLinC, kLinZ, kLinA, kLinB, kLinQ, kLinK, kLinV, kLinG, kLinBeta, kLinO, kLinY,
  kFfnGate, kFfnUp, kFfnAct,
  kMoeLogits, kMoeIds, kMoeWeights, kMoeShared, kMoeSharedGate,
};

class Qwen35Model final : public Model {
 public:
  Qwen35Model(ModelConfig config, std::unique_ptr<WeightLoader> weights, std::string fingerprint)
      : Model(std::move(config), std::move(fingerprint), weights->device()),
        weights_(std::move(weights)),
        loader_(weights_.get()),
        // The body never reads device memory on the host (MoE routing included): steps may be captured.
        runner_(device_, weights_->options().cuda_graphs),
        s_(runner_.scratch()) {
    load();
  }
  // The first `layers` layers of `full` (Model::first_layers): its weights and layers, viewed, not
  // copied (an MoE layer's expert table included); no MTP block; a step runner of its own, since
  // its scratch and graphs are another function's.
  Qwen35Model(const Qwen35Model& full, int64_t layers)
      : Model(full.first_layers_config(layers), full.first_layers_fingerprint(layers),
              full.device_),
        loader_(full.loader_),
        layout_(full.layout_),
        eps_(full.eps_),
        embed_(full.embed_),
        lm_head_(full.lm_head_),
        final_norm_(full.final_norm_),
        layers_(full.layers_.first(static_cast<size_t>(layers))),
        state_buffers_(2 * layers_.size()),  // two per layer, in layer order (load())
        decode_batch_(full.decode_batch_),  // the full model's: its first layers run them alike
        rope_(full.rope_),
        runner_(device_, loader_->options().cuda_graphs),
        s_(runner_.scratch()) {}

  ModelInfo info() const override {
    ModelInfo i;
    i.family = config_.model_type;
    i.layers = config_.num_layers;
    for (LayerKind k : config_.layer_kinds) (k == LayerKind::kFullAttention ? i.attention_layers : i.recurrent_layers)++;
    i.parameters = loader_->parameter_count();  // a view: the full model's, whose weights it shares
    i.weight_bytes = loader_->weight_bytes();
    i.state_bytes_per_token =
        static_cast<size_t>(2 * i.attention_layers * config_.num_kv_heads * config_.head_dim) *
        dtype_size(config_.kv_cache_dtype);
    i.kv_cache_dtype = config_.kv_cache_dtype;
    const LinearAttentionConfig& la = config_.linear;
    i.state_bytes_fixed = static_cast<size_t>(i.recurrent_layers) * sizeof(float) *
                          static_cast<size_t>((la.conv_kernel - 1) * la.conv_dim() +
                                              la.value_heads * la.value_dim * la.key_dim);
    i.quantization = loader_->quantization();
    i.mtp_layers = mtp_ ? 1 : 0;
    for (const Layer& l : layers_) i.moe_shared_folded += l.ffn.shared_folded ? 1 : 0;
    return i;
  }

  ModelState new_state(int64_t capacity) const override { return make_hybrid_state(config_, capacity, device_); }

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
    for (const DecodeItem& item : items)
      check(item.state->buffers.size() == state_buffers_, ErrorKind::kInvalidInput,
            "the state has {} buffers; this model needs {}", item.state->buffers.size(), state_buffers_);
    runner_.run_decode(items, config_.vocab_size, [&](const Step& step) { body(step, true); });
  }
  int64_t max_decode_batch() const override { return decode_batch_; }

  void forward_verify(std::span<const int32_t> tokens, ModelState& state, std::span<const ModelState> after,
                      const Tensor& logits) override {
    check(static_cast<int64_t>(tokens.size()) <= max_verify_tokens(), ErrorKind::kInvalidInput,
          "a verify step of {} tokens; this model verifies at most {}", tokens.size(), max_verify_tokens());
    check(state.buffers.size() == state_buffers_, ErrorKind::kInvalidInput,
          "the state has {} buffers; this model needs {}", state.buffers.size(), state_buffers_);
    runner_.run_verify(tokens, state, after, config_.vocab_size, logits, [&](const Step& step) { body(step, true); });
  }
  // Rows every op computes as alone (MoE included: its few-token path is batch-invariant where
  // batch_invariant_rows says so), within the steps that are captured as graphs.
  int64_t max_verify_tokens() const override {
    return decode_batch_ > 1 ? std::min(decode_batch_, StepRunner::kGraphMaxTokens) : 0;
  }

  std::unique_ptr<Model> first_layers(int64_t layers) const override {
    return std::make_unique<Qwen35Model>(*this, layers);
  }

 private:
  // What max_decode_batch() answers: the rows every decode op of this model computes as alone. The
  // routed experts run in the MoE op's own kernels; the float router and shared-expert gate run
  // kFloatInvariantRows rows at a time (route_matmul).
  int64_t invariant_rows() const {
    std::vector<const Weight*> ws{&lm_head_};
    for (const Layer& L : layers_) {
      if (L.kind == LayerKind::kFullAttention) {
        for (const Weight* w : {&L.attn.q, &L.attn.k, &L.attn.v, &L.attn.o}) ws.push_back(w);
      } else {
        for (const Weight* w : {&L.linear.qkv, &L.linear.z, &L.linear.b, &L.linear.a, &L.linear.out}) ws.push_back(w);
      }
      if (L.ffn.moe && device_ == Device::kCpu && !L.ffn.expert_gate.empty()) {
        // The CPU's expert matmuls are the plain matmul, bound by its rows (the GPU's MoE kernels
        // are not).
        for (const Weight* w : {&L.ffn.expert_gate[0], &L.ffn.expert_up[0], &L.ffn.expert_down[0]}) ws.push_back(w);
      }
      if (!L.ffn.moe) {
        for (const Weight* w : {&L.ffn.gate, &L.ffn.up, &L.ffn.down}) ws.push_back(w);
      } else if (L.ffn.shared && !L.ffn.shared_folded) {
        for (const Weight* w : {&L.ffn.shared_gate, &L.ffn.shared_up, &L.ffn.shared_down}) ws.push_back(w);
      }
    }
    return backend::batch_invariant_rows(device_, ws);
  }

  // A float router's (or shared-expert gate's) matmul of a decode batch: kFloatInvariantRows rows at
  // a time, so each row's logits are those it gets alone. Prompt chunks wider than any decode batch
  // take it whole.
  void route_matmul(const Tensor& h, const Weight& w, const Tensor& out) const {
    const int64_t T = h.dim(0);
    if (T <= backend::kFloatInvariantRows || T > decode_batch_) {
      ops::matmul(h, w, out);
      return;
    }
    for (int64_t r = 0; r < T; r += backend::kFloatInvariantRows) {
      const int64_t e = std::min(T, r + backend::kFloatInvariantRows);
      ops::matmul(h.rows(r, e), w, out.rows(r, e));
    }
  }

  void run(const StepTokens& tokens, ModelState& state, const Tensor& logits, bool all_logits) {
    check(state.buffers.size() == state_buffers_, ErrorKind::kInvalidInput,
          "the state has {} buffers; this model needs {}", state.buffers.size(), state_buffers_);
    runner_.run(tokens, state, config_.vocab_size, logits, all_logits,
                [&](const Step& step) { body(step, all_logits); });
  }

  // all_logits: every row's (a batch's rows are each a sequence's last).
  void body(const Step& step, bool all_logits) {
    const int64_t T = step.tokens, H = config_.hidden_size;
    Tensor x = s_.get(kX, {T, H}), h = s_.get(kH, {T, H}), proj = s_.get(kProj, {T, H});
    ops::embedding(embed_, step.ids, x);
    // Each residual add (x += proj) runs inside the RMSNorm that follows it: the FFN's, the next
    // layer's, or the final one. Each norm hands its output to the matmul after it as a feed.
    ops::MatmulFeed mixer_feed{first_weight(layers_.front())};
    ops::rms_norm(x, layers_.front().input_norm, eps_, layout_.one_plus_norm, h, &mixer_feed);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& L = layers_[l];
      if (L.kind == LayerKind::kFullAttention) {
        attention(L, h, step, proj, mixer_feed);
      } else {
        linear_attention(L, h, step, proj, mixer_feed);
      }
      ops::MatmulFeed ffn_feed{L.ffn.moe ? nullptr : &L.ffn.gate};
      ops::add_rms_norm(x, proj, L.post_norm, eps_, layout_.one_plus_norm, h, &ffn_feed);
      ffn(L.ffn, h, proj, ffn_feed);
      if (l + 1 < layers_.size()) {
        mixer_feed = ops::MatmulFeed{first_weight(layers_[l + 1])};
        ops::add_rms_norm(x, proj, layers_[l + 1].input_norm, eps_, layout_.one_plus_norm, h,
                          &mixer_feed);
      }
    }
    // Every row of x gets the last add; only the last row is normed when only its logits are wanted.
    const Tensor normed = all_logits ? h : s_.get(kLast, {1, H});
    ops::MatmulFeed head_feed{&lm_head_};
    ops::add_rms_norm(x, proj, final_norm_, eps_, layout_.one_plus_norm, normed, &head_feed);
    ops::matmul(normed, lm_head_, step.logits, &head_feed);
  }

  // The first matmul of a layer's mixer: the one its input norm feeds.
  static const Weight* first_weight(const Layer& L) {
    return L.kind == LayerKind::kFullAttention ? &L.attn.q : &L.linear.qkv;
  }

  // Gated attention (§1.4): q and its output gate interleaved per head in q_proj, q/k norm, partial
  // NeoX RoPE, causal GQA, o ⊙ sigmoid(gate).
  void attention(const Layer& L, const Tensor& h, const Step& step, const Tensor& out, const ops::MatmulFeed& feed) {
    const int64_t T = h.dim(0), Hq = config_.num_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
    const AttentionMixer& A = L.attn;
    Tensor p = s_.get(kAttnP, {T, Hq * 2 * D});
    Tensor q = s_.get(kAttnQ, {T * Hq, D}), gate = s_.get(kAttnGate, {T * Hq, D});
    Tensor k = s_.get(kAttnK, {T, Hkv * D}), v = s_.get(kAttnV, {T, Hkv * D});
    Tensor o = s_.get(kAttnOut, {T, Hq * D});
    const Weight* qkv[] = {&A.q, &A.k, &A.v};
    const Tensor qkv_out[] = {p, k, v};
    ops::matmul_group(h, qkv, qkv_out, &feed);
    const ops::QkNorm norm{A.q_norm, A.k_norm, eps_, layout_.one_plus_norm};
    const Tensor p3 = p.reshaped({T, Hq, 2 * D}), k3 = k.reshaped({T, Hkv, D}), v3 = v.reshaped({T, Hkv, D});
    const Tensor q3 = q.reshaped({T, Hq, D}), gate3 = gate.reshaped({T, Hq, D}), o3 = o.reshaped({T, Hq, D});
    attend(step, L.state,
           LayerAttention{.q = p3, .k = k3, .v = v3, .q_out = q3, .gate_out = gate3, .out = o3, .norm = norm,
                          .rope = &rope_, .scale = 1.0f / std::sqrt(static_cast<float>(D))});
    ops::MatmulFeed o_feed{&A.o};
    ops::sigmoid_mul(o, gate.reshaped({T, Hq * D}), o, &o_feed);
    ops::matmul(o, A.o, out, &o_feed);
  }

  // Gated DeltaNet (§1.5): projections, then one op for the core (causal conv + SiLU, L2-normalised
  // q/k and the gates, the delta rule on the fp32 state, gated RMSNorm × SiLU(z)), out projection.
  void linear_attention(const Layer& L, const Tensor& h, const Step& step, const Tensor& out,
                        const ops::MatmulFeed& feed) {
    const LinearAttentionConfig& c = config_.linear;
    const int64_t T = h.dim(0), Ck = c.key_heads * c.key_dim, Cv = c.value_heads * c.value_dim;
    const LinearMixer& M = L.linear;
    Tensor cq = s_.get(kLinC, {T, c.conv_dim()});
    Tensor z = s_.get(kLinZ, {T, Cv}), a = s_.get(kLinA, {T, c.value_heads}), b = s_.get(kLinB, {T, c.value_heads});
    Tensor q = s_.get(kLinQ, {T, Ck}), k = s_.get(kLinK, {T, Ck}), v = s_.get(kLinV, {T, Cv});
    Tensor g = s_.get(kLinG, {T, c.value_heads}), beta = s_.get(kLinBeta, {T, c.value_heads});
    Tensor o = s_.get(kLinO, {T, Cv}), y = s_.get(kLinY, {T, Cv});
    const Weight* in[] = {&M.qkv, &M.z, &M.b, &M.a};
    const Tensor in_out[] = {cq, z, b, a};
    ops::matmul_group(h, in, in_out, &feed);
    ops::MatmulFeed y_feed{&M.out};
    // The core of rows [r0, r1) against a recurrent state (none for a batch's rows: gdn_core_rows).
    auto core_of = [&](int64_t r0, int64_t r1, const Tensor& window, const Tensor& state) {
      const int64_t n = r1 - r0;
      return ops::GdnCore{.qkv = cq.rows(r0, r1),
                          .z = z.rows(r0, r1),
                          .a = a.rows(r0, r1),
                          .b = b.rows(r0, r1),
                          .conv_weight = M.conv,
                          .a_log = M.a_log,
                          .dt_bias = M.dt_bias,
                          .norm = M.norm,
                          .window = window,
                          .state = state,
                          .q = q.rows(r0, r1).reshaped({n, c.key_heads, c.key_dim}),
                          .k = k.rows(r0, r1).reshaped({n, c.key_heads, c.key_dim}),
                          .v = v.rows(r0, r1).reshaped({n, c.value_heads, c.value_dim}),
                          .g = g.rows(r0, r1),
                          .beta = beta.rows(r0, r1),
                          .o = o.rows(r0, r1).reshaped({n, c.value_heads, c.value_dim}),
                          .l2_eps = kL2NormEps,
                          .q_scale = 1.0f / std::sqrt(static_cast<float>(c.key_dim)),
                          .norm_eps = eps_,
                          .form = n <= kRecurrentMaxTokens ? ops::DeltaRuleForm::kRecurrent
                                                           : ops::DeltaRuleForm::kChunked};
    };
    if (step.batch() && step.tokens == static_cast<int64_t>(step.parts.size())) {
      // A decode step of several sequences, a token each: one op over their rows and states.
      windows_.clear(), states_.clear();
      for (const StepPart& part : step.parts) {
        windows_.push_back(part.state->buffers[L.state].tensor.view());
        states_.push_back(part.state->buffers[L.state + 1].tensor.view());
      }
      ops::GdnCore core = core_of(0, T, Tensor{}, Tensor{});
      core.form = ops::DeltaRuleForm::kRecurrent;  // each row is one token, as alone
      ops::gdn_core_rows(core, windows_, states_, y);
    } else if (step.verify) {
      // A verify step: the decode recurrence one position at a time, exactly as one-token steps
      // run it, the state after each position but the last also left in that position's slot (the
      // sequence's own buffers hold the last), so keeping any prefix of the drafts is one copy.
      const StepPart& part = step.parts[0];
      windows_.clear(), states_.clear();
      for (int64_t t = 0; t + 1 < T; ++t) {
        const ModelState& after = step.after[static_cast<size_t>(t)];
        windows_.push_back(after.buffers[L.state].tensor.view());
        states_.push_back(after.buffers[L.state + 1].tensor.view());
      }
      ops::gdn_core_positions(core_of(0, T, part.state->buffers[L.state].tensor.view(),
                                      part.state->buffers[L.state + 1].tensor.view()),
                              windows_, states_, y);
    } else {
      // The core writes the out projection's input in its form only when it writes every row at once.
      for (const StepPart& part : step.parts) {  // each sequence's rows through its own state
        const int64_t r0 = part.row0, r1 = part.row0 + part.rows;
        ops::gdn_core(core_of(r0, r1, part.state->buffers[L.state].tensor.view(),
                              part.state->buffers[L.state + 1].tensor.view()),
                      y.rows(r0, r1), step.batch() ? nullptr : &y_feed);
      }
    }
    ops::matmul(y, M.out, out, step.batch() || step.verify ? nullptr : &y_feed);
  }

  // feed: h's, for the dense MLP's gate/up.
  void ffn(const Ffn& F, const Tensor& h, const Tensor& out, const ops::MatmulFeed& feed) {
    const int64_t T = h.dim(0);
    if (!F.moe) {
      swiglu(F.gate, F.up, F.down, h, out, &feed);
      return;
    }
    // Router (fp32 softmax, top-k); the experts take their routing from its output where it lies,
    // so no step waits on the host for it.
    // A folded shared expert is one more column of logits and one more slot a token.
    const int64_t E = config_.moe.num_experts, K = config_.moe.top_k, extra = F.shared_folded ? 1 : 0;
    Tensor logits = s_.get(kMoeLogits, {T, E + extra}), weights = s_.get(kMoeWeights, {T, K + extra});
    Tensor ids = s_.get(kMoeIds, {T, K + extra});
    ids.dtype = DType::kI32;  // same 4-byte slots
    route_matmul(h, F.router, logits);
    ops::topk_softmax(logits, K, config_.moe.norm_topk, ids, weights, F.shared_folded);
    ops::moe_experts(h, ids, weights, F.expert_gate, F.expert_up, F.expert_down, F.expert_table, out);
    if (F.shared && !F.shared_folded) {
      Tensor ys = s_.get(kMoeShared, {T, h.dim(1)}), sg = s_.get(kMoeSharedGate, {T, 1});
      swiglu(F.shared_gate, F.shared_up, F.shared_down, h, ys);
      route_matmul(h, F.shared_expert_gate, sg);
      ops::add_sigmoid_gated(out, ys, sg);
    }
  }

  // out = down(SiLU(gate · x) ⊙ (up · x)); x_feed: x's, where its producer wrote one. The product
  // reaches the down projection as a feed of its own (slot 1: x's may still be alive).
  void swiglu(const Weight& gate, const Weight& up, const Weight& down, const Tensor& x,
              const Tensor& out, const ops::MatmulFeed* x_feed = nullptr) {
    const int64_t T = x.dim(0), I = gate.rows();
    Tensor g = s_.get(kFfnGate, {T, I}), u = s_.get(kFfnUp, {T, I}), act = s_.get(kFfnAct, {T, I});
    const Weight* gate_up[] = {&gate, &up};
    const Tensor gate_up_out[] = {g, u};
    ops::MatmulFeed act_feed{&down, 1};
    ops::matmul_group(x, gate_up, gate_up_out, x_feed, &act_feed);
    ops::silu_mul_matmul(g, u, down, act, out, &act_feed);
  }

  // ---- loading ----

  Layout detect_layout() const {
    const WeightLoader& w = *weights_;
    Layout lay;
    for (const char* p : {"model.language_model.", "language_model.model.", "model."})
      if (w.has(std::string(p) + "embed_tokens.weight")) {
        lay.prefix = p;
        break;
      }
    check(!lay.prefix.empty(), ErrorKind::kInvalidInput,
          "no embed_tokens.weight under model., model.language_model. or language_model.model.: not a Qwen3.5 "
          "checkpoint");
    lay.lm_head = lay.prefix == "language_model.model." ? "language_model.lm_head" : "lm_head";
    // §1.9: the conv layout tells a raw HF checkpoint ([C, 1, K], norms 1-centred) from an MLX
    // conversion ([C, K, 1], norms already shifted).
    lay.one_plus_norm = lay.prefix != "language_model.model.";
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      if (config_.layer_kinds[l] != LayerKind::kLinearAttention) continue;
      const std::string name = fmt::format("{}layers.{}.linear_attn.conv1d.weight", lay.prefix, l);
      check(w.has(name), ErrorKind::kInvalidInput, "tensor '{}' is missing", name);
      const Shape& s = w.store()->get(name).shape;
      check(s.rank() == 3 && (s[1] == 1 || s[2] == 1), ErrorKind::kInvalidInput,
            "{}: expected [C, 1, K] (HF) or [C, K, 1] (MLX), got {}", name, s.str());
      lay.one_plus_norm = s[1] == 1 && s[2] != 1;
      break;
    }
    return lay;
  }

  static void expect(const Weight& m, int64_t rows, int64_t cols, const std::string& name) {
    check(m.rows() == rows && m.cols() == cols, ErrorKind::kInvalidInput,
          "{}: shape [{}, {}] does not match the config ([{}, {}])", name, m.rows(), m.cols(), rows, cols);
  }

  Tensor vector_of(const std::string& name, int64_t n) {
    Tensor t = weights_->vector(name);
    check(t.numel() == n, ErrorKind::kInvalidInput, "{}: {} values, the config needs {}", name, t.numel(), n);
    return t.reshaped({n});
  }

  void load() {
    const ModelConfig& c = config_;
    check(!weights_->is_gguf(), ErrorKind::kUnsupported, "Qwen3.5 GGUF files are not supported yet");
    check(static_cast<int64_t>(c.layer_kinds.size()) == c.num_layers, ErrorKind::kInternal, "layer kinds missing");
    layout_ = detect_layout();
    eps_ = static_cast<float>(c.rms_norm_eps);
    WeightLoader& w = *weights_;
    const std::string& P = layout_.prefix;
    embed_ = w.matrix(P + "embed_tokens");
    expect(embed_, c.vocab_size, c.hidden_size, P + "embed_tokens");
    for (int64_t l = 0; l < c.num_layers; ++l) {
      Layer L = load_layer(fmt::format("{}layers.{}.", P, l), c.layer_kinds[l], c.is_moe_layer(l));
      own_layers_.push_back(std::move(L));
    }
    // State buffers follow layer order: two per layer (k, v or conv, ssm).
    for (size_t i = 0; i < own_layers_.size(); ++i) own_layers_[i].state = 2 * i;
    layers_ = own_layers_;
    state_buffers_ = 2 * layers_.size();
    final_norm_ = vector_of(P + "norm.weight", c.hidden_size);
    if (!c.tie_word_embeddings && w.has(layout_.lm_head + ".weight")) {
      lm_head_ = w.matrix(layout_.lm_head);
      expect(lm_head_, c.vocab_size, c.hidden_size, layout_.lm_head);
    } else {
      check(c.tie_word_embeddings, ErrorKind::kInvalidInput, "{}.weight is missing (and embeddings are not tied)",
            layout_.lm_head);
      lm_head_ = embed_;
    }
    if (w.has("mtp.fc.weight")) load_mtp();
    rope_ = make_rope_params(c, c.max_position_embeddings);
    decode_batch_ = invariant_rows();
  }

  Layer load_layer(const std::string& p, LayerKind kind, bool moe) {
    const ModelConfig& c = config_;
    Layer L;
    L.kind = kind;
    L.input_norm = vector_of(p + "input_layernorm.weight", c.hidden_size);
    L.post_norm = vector_of(p + "post_attention_layernorm.weight", c.hidden_size);
    if (kind == LayerKind::kFullAttention) {
      L.attn = load_attention(p + "self_attn.");
    } else {
      L.linear = load_linear(p + "linear_attn.");
    }
    L.ffn = load_ffn(p + "mlp.", moe);
    return L;
  }

  AttentionMixer load_attention(const std::string& p) {
    const ModelConfig& c = config_;
    WeightLoader& w = *weights_;
    AttentionMixer A;
    const int64_t D = c.head_dim, H = c.hidden_size;
    A.q = w.matrix(p + "q_proj");
    A.k = w.matrix(p + "k_proj");
    A.v = w.matrix(p + "v_proj");
    A.o = w.matrix(p + "o_proj");
    expect(A.q, c.num_heads * 2 * D, H, p + "q_proj");
    expect(A.k, c.num_kv_heads * D, H, p + "k_proj");
    expect(A.v, c.num_kv_heads * D, H, p + "v_proj");
    expect(A.o, H, c.num_heads * D, p + "o_proj");
    A.q_norm = vector_of(p + "q_norm.weight", D);
    A.k_norm = vector_of(p + "k_norm.weight", D);
    return A;
  }

  LinearMixer load_linear(const std::string& p) {
    const LinearAttentionConfig& c = config_.linear;
    WeightLoader& w = *weights_;
    const int64_t H = config_.hidden_size, Ck = c.key_heads * c.key_dim, Cv = c.value_heads * c.value_dim;
    LinearMixer M;
    if (w.has(p + "in_proj_qkvz.weight")) {
      // Qwen3-Next groups rows by key head: [q_g, k_g, v_g (r·dv), z_g (r·dv)] and [b_g (r), a_g (r)].
      const Weight qkvz = w.matrix(p + "in_proj_qkvz", true, WeightLoader::Placement::kHost);
      const Weight ba = w.matrix(p + "in_proj_ba", true, WeightLoader::Placement::kHost);
      expect(qkvz, 2 * Ck + 2 * Cv, H, p + "in_proj_qkvz");
      expect(ba, 2 * c.value_heads, H, p + "in_proj_ba");
      const int64_t r = c.value_heads / c.key_heads, rv = r * c.value_dim, block = 2 * c.key_dim + 2 * rv;
      std::vector<int64_t> qkv_rows, z_rows, b_rows, a_rows;
      auto add_range = [](std::vector<int64_t>& rows, int64_t begin, int64_t n) {
        for (int64_t i = 0; i < n; ++i) rows.push_back(begin + i);
      };
      for (int64_t g = 0; g < c.key_heads; ++g) add_range(qkv_rows, g * block, c.key_dim);
      for (int64_t g = 0; g < c.key_heads; ++g) add_range(qkv_rows, g * block + c.key_dim, c.key_dim);
      for (int64_t g = 0; g < c.key_heads; ++g) add_range(qkv_rows, g * block + 2 * c.key_dim, rv);
      for (int64_t g = 0; g < c.key_heads; ++g) add_range(z_rows, g * block + 2 * c.key_dim + rv, rv);
      for (int64_t g = 0; g < c.key_heads; ++g) add_range(b_rows, g * 2 * r, r);
      for (int64_t g = 0; g < c.key_heads; ++g) add_range(a_rows, g * 2 * r + r, r);
      M.qkv = w.select_rows(qkvz, qkv_rows);
      M.z = w.select_rows(qkvz, z_rows);
      M.b = w.select_rows(ba, b_rows);
      M.a = w.select_rows(ba, a_rows);
    } else {
      M.qkv = w.matrix(p + "in_proj_qkv");
      M.z = w.matrix(p + "in_proj_z");
      M.b = w.matrix(p + "in_proj_b");
      M.a = w.matrix(p + "in_proj_a");
      expect(M.qkv, c.conv_dim(), H, p + "in_proj_qkv");
      expect(M.z, Cv, H, p + "in_proj_z");
      expect(M.b, c.value_heads, H, p + "in_proj_b");
      expect(M.a, c.value_heads, H, p + "in_proj_a");
    }
    M.out = w.matrix(p + "out_proj");
    expect(M.out, H, Cv, p + "out_proj");
    // [C, 1, K] (HF) and [C, K, 1] (MLX) hold the same numbers in the same order.
    M.conv = vector_of(p + "conv1d.weight", c.conv_dim() * c.conv_kernel).reshaped({c.conv_dim(), c.conv_kernel});
    M.a_log = vector_of(p + "A_log", c.value_heads);
    M.dt_bias = vector_of(p + "dt_bias", c.value_heads);
    M.norm = vector_of(p + "norm.weight", c.value_dim);
    return M;
  }

  Ffn load_ffn(const std::string& p, bool moe) {
    const ModelConfig& c = config_;
    WeightLoader& w = *weights_;
    const int64_t H = c.hidden_size;
    Ffn F;
    F.moe = moe;
    if (!moe) {
      F.gate = w.matrix(p + "gate_proj");
      F.up = w.matrix(p + "up_proj");
      F.down = w.matrix(p + "down_proj");
      expect(F.gate, c.intermediate_size, H, p + "gate_proj");
      expect(F.up, c.intermediate_size, H, p + "up_proj");
      expect(F.down, H, c.intermediate_size, p + "down_proj");
      return F;
    }
    const int64_t E = c.moe.num_experts, I = c.moe.expert_intermediate;
    // Routing decides which weights run at all: the router (and the shared-expert gate) stay float
    // when quantizing on load. Both stay on the host until it is known whether they are stacked.
    const Weight router = w.matrix(p + "gate", false, WeightLoader::Placement::kHost);
    expect(router, E, H, p + "gate");
    if (w.has(p + "experts.gate_up_proj")) {  // HF fused: [E, 2I, H] (gate rows, then up rows)
      for (const Weight& gu : w.stacked(p + "experts.gate_up_proj", p + "experts.gate_up_proj")) {
        expect(gu, 2 * I, H, p + "experts.gate_up_proj[e]");
        Weight g = gu, u = gu;
        g.w = gu.w.rows(0, I);
        u.w = gu.w.rows(I, 2 * I);
        if (gu.quantized()) {
          g.scales = gu.scales.rows(0, I);
          g.biases = gu.biases.rows(0, I);
          u.scales = gu.scales.rows(I, 2 * I);
          u.biases = gu.biases.rows(I, 2 * I);
        }
        F.expert_gate.push_back(g);
        F.expert_up.push_back(u);
      }
      F.expert_down = w.stacked(p + "experts.down_proj", p + "experts.down_proj");
    } else if (w.has(p + "switch_mlp.gate_proj.weight")) {  // MLX: stacked [E, ., .] per projection
      F.expert_gate = w.stacked(p + "switch_mlp.gate_proj.weight", p + "switch_mlp.gate_proj");
      F.expert_up = w.stacked(p + "switch_mlp.up_proj.weight", p + "switch_mlp.up_proj");
      F.expert_down = w.stacked(p + "switch_mlp.down_proj.weight", p + "switch_mlp.down_proj");
    } else {  // one tensor per expert
      for (int64_t e = 0; e < E; ++e) {
        const std::string q = fmt::format("{}experts.{}.", p, e);
        F.expert_gate.push_back(w.matrix(q + "gate_proj"));
        F.expert_up.push_back(w.matrix(q + "up_proj"));
        F.expert_down.push_back(w.matrix(q + "down_proj"));
      }
    }
    check(static_cast<int64_t>(F.expert_gate.size()) == E && static_cast<int64_t>(F.expert_down.size()) == E &&
              static_cast<int64_t>(F.expert_up.size()) == E,
          ErrorKind::kInvalidInput, "{}: expected {} experts", p, E);
    for (int64_t e = 0; e < E; ++e) {
      expect(F.expert_gate[e], I, H, fmt::format("{} expert {} gate", p, e));
      expect(F.expert_up[e], I, H, fmt::format("{} expert {} up", p, e));
      expect(F.expert_down[e], H, I, fmt::format("{} expert {} down", p, e));
    }
    F.shared = w.has(p + "shared_expert.gate_proj.weight");
    Weight shared_expert_gate;
    if (F.shared) {
      const int64_t S = c.moe.shared_intermediate;
      F.shared_gate = w.matrix(p + "shared_expert.gate_proj");
      F.shared_up = w.matrix(p + "shared_expert.up_proj");
      F.shared_down = w.matrix(p + "shared_expert.down_proj");
      shared_expert_gate = w.matrix(p + "shared_expert_gate", false, WeightLoader::Placement::kHost);
      expect(F.shared_gate, S, H, p + "shared_expert.gate_proj");
      expect(F.shared_up, S, H, p + "shared_expert.up_proj");
      expect(F.shared_down, H, S, p + "shared_expert.down_proj");
      expect(shared_expert_gate, 1, H, p + "shared_expert_gate");
      const Weight& e0 = F.expert_gate[0];
      F.shared_folded = w.options().moe_fold_shared && S == I && backend::same_format(F.shared_gate, e0) &&
                        backend::same_format(F.shared_up, e0) && backend::same_format(F.shared_down, e0) &&
                        backend::same_format(shared_expert_gate, router);
    }
    if (F.shared_folded) {
      const Weight rows[] = {router, shared_expert_gate};
      F.router = w.stack_rows(rows);
      F.expert_gate.push_back(F.shared_gate);
      F.expert_up.push_back(F.shared_up);
      F.expert_down.push_back(F.shared_down);
    } else {
      F.router = w.place(router);
      if (F.shared) F.shared_expert_gate = w.place(shared_expert_gate);
    }
    F.expert_table = backend::expert_table(device_, F.expert_gate, F.expert_up, F.expert_down);
    return F;
  }

  void load_mtp() {
    const int64_t H = config_.hidden_size;
    Mtp m;
    m.fc = weights_->matrix("mtp.fc");
    expect(m.fc, H, 2 * H, "mtp.fc");
    m.norm_embedding = vector_of("mtp.pre_fc_norm_embedding.weight", H);
    m.norm_hidden = vector_of("mtp.pre_fc_norm_hidden.weight", H);
    m.norm = vector_of("mtp.norm.weight", H);
    m.layer = load_layer("mtp.layers.0.", LayerKind::kFullAttention, config_.moe.num_experts > 0);
    mtp_ = std::move(m);
  }

  std::unique_ptr<WeightLoader> weights_;  // empty in a view of another model's first layers
  const WeightLoader* loader_ = nullptr;   // weights_, or the full model's
  Layout layout_;
  float eps_ = 1e-6f;
  Weight embed_, lm_head_;
  Tensor final_norm_;
  std::vector<Layer> own_layers_;  // empty in a view
  std::span<const Layer> layers_;  // own_layers_, or the first of the full model's
  std::optional<Mtp> mtp_;
  size_t state_buffers_ = 0;
  int64_t decode_batch_ = 1;
  std::vector<Tensor> windows_, states_;  // a batched step's, per sequence (reused: no allocation)
  backend::RopeParams rope_;
  StepRunner runner_;
  Scratch& s_;
};

}  // namespace

ModelState make_hybrid_state(const ModelConfig& c, int64_t capacity, Device device) {
  check(capacity > 0, ErrorKind::kInvalidInput, "state capacity must be positive");
  const LinearAttentionConfig& la = c.linear;
  ModelState s;
  s.capacity = capacity;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.layer_kinds[l] == LayerKind::kFullAttention) {
      for (const char* kv : {"k", "v"})
        s.buffers.push_back(
            {fmt::format("layers.{}.{}", l, kv),
             backend::Buffer(device, c.kv_cache_dtype, {capacity, c.num_kv_heads, c.head_dim}),
             true});
    } else {
      s.buffers.push_back(
          {fmt::format("layers.{}.conv", l), backend::Buffer(device, DType::kF32, {la.conv_kernel - 1, la.conv_dim()}),
           false});
      s.buffers.push_back({fmt::format("layers.{}.ssm", l),
                           backend::Buffer(device, DType::kF32, {la.value_heads, la.value_dim, la.key_dim}), false});
    }
  }
  return s;
}

std::unique_ptr<Model> make_qwen35_model(ModelConfig config, std::unique_ptr<WeightLoader> weights,
                                         std::string fingerprint) {
  return std::make_unique<Qwen35Model>(std::move(config), std::move(weights), std::move(fingerprint));
}

}  // namespace strata::model
