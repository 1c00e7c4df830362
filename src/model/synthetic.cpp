// make_synthetic_checkpoint. Real shapes mean gigabytes of codes: they come from a counter-based
// generator (splitmix64 of the word index) split over OpenMP threads, which also spreads the first
// touch of the pages; nothing is zero-filled first.
#include "model/synthetic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/dtype.h"
#include "core/error.h"
#include "core/hash.h"
#include "model/config.h"

namespace strata::model {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The i-th number of the stream `seed`; any i in any order, so threads split the range freely.
uint64_t random_at(uint64_t seed, uint64_t i) { return splitmix64(seed + (i + 1) * kGolden); }

class Builder {
 public:
  Builder(SyntheticCheckpoint& out, const SyntheticOptions& options)
      : out_(out), options_(options) {}

  // An MLX-quantized matrix, or a stack of `experts` of them (switch_mlp): prefix.weight (random
  // codes), .scales and .biases (bf16, as conversions from bf16 checkpoints store them). The
  // weights come out uniform in ±0.02·sqrt(1024/cols): a product with a unit-RMS input has an RMS
  // near 0.37 whatever the width, so the residual stream stays finite through every layer.
  void matrix(const std::string& prefix, int64_t rows, int64_t cols, int64_t experts = 0,
              int bits = 0) {
    bits = bits != 0 ? bits : options_.bits;
    const int64_t gs = options_.group_size;
    check(cols % gs == 0 && (cols * bits) % 64 == 0, ErrorKind::kInvalidInput,
          "synthetic {}: {} columns do not fit group size {} at {} bits", prefix, cols, gs, bits);
    auto shape = [&](int64_t last) {
      return experts > 0 ? Shape{experts, rows, last} : Shape{rows, last};
    };
    fill_random(allocate(prefix + ".weight", DType::kU32, shape(cols * bits / 32)),
                seed_of(prefix));
    const float levels = static_cast<float>((1 << bits) - 1);
    const float step = 0.04f / levels / std::sqrt(static_cast<float>(cols) / 1024.0f);
    fill_bf16(allocate(prefix + ".scales", DType::kBF16, shape(cols / gs)), step);
    fill_bf16(allocate(prefix + ".biases", DType::kBF16, shape(cols / gs)), -step * levels / 2.0f);
  }

  // F32 values uniform in [lo, hi).
  void vector(const std::string& name, Shape shape, float lo, float hi) {
    const Tensor t = allocate(name, DType::kF32, shape);
    const uint64_t seed = seed_of(name);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float u =
          static_cast<float>(random_at(seed, static_cast<uint64_t>(i)) >> 40) / 16777216.0f;
      t.as<float>()[i] = lo + (hi - lo) * u;
    }
  }
  // Applied as x̂·w (the loaders see MLX-shifted or plain-HF norms): near 1.
  void norm(const std::string& name, int64_t n) { vector(name, {n}, 0.9f, 1.1f); }

 private:
  Tensor allocate(const std::string& name, DType dtype, Shape shape) {
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
    void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    check(p != nullptr, ErrorKind::kIo, "out of memory allocating {} bytes for synthetic tensor {}",
          bytes, name);
    out_.memory.emplace_back(p, std::free);
    const Tensor t{p, dtype, shape, Device::kCpu};
    check(out_.tensors.emplace(name, t).second, ErrorKind::kInternal,
          "synthetic tensor {} made twice", name);
    out_.nbytes += bytes;
    return t;
  }

  uint64_t seed_of(const std::string& name) const { return hash64(name, options_.seed); }

  // Whole 64-bit words: code rows hold cols·bits bits, a multiple of 64.
  static void fill_random(const Tensor& t, uint64_t seed) {
    auto* words = static_cast<uint64_t*>(t.data);
    const int64_t n = static_cast<int64_t>(t.nbytes() / sizeof(uint64_t));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) words[i] = random_at(seed, static_cast<uint64_t>(i));
  }

  static void fill_bf16(const Tensor& t, float value) {
    const uint16_t v = f32_to_bf16(value);
    auto* p = t.as<uint16_t>();
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  }

  SyntheticCheckpoint& out_;
  SyntheticOptions options_;
};

// llama, qwen2, qwen3, mistral: the Hugging Face names dense.cpp reads.
void build_dense(Builder& b, const ModelConfig& c) {
  const int64_t H = c.hidden_size, D = c.head_dim, q_rows = c.num_heads * D,
                kv_rows = c.num_kv_heads * D;
  b.matrix("model.embed_tokens", c.vocab_size, H);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    b.norm(p + "input_layernorm.weight", H);
    b.norm(p + "post_attention_layernorm.weight", H);
    b.matrix(p + "self_attn.q_proj", q_rows, H);
    b.matrix(p + "self_attn.k_proj", kv_rows, H);
    b.matrix(p + "self_attn.v_proj", kv_rows, H);
    b.matrix(p + "self_attn.o_proj", H, q_rows);
    if (c.attention_bias) {
      b.vector(p + "self_attn.q_proj.bias", {q_rows}, -0.1f, 0.1f);
      b.vector(p + "self_attn.k_proj.bias", {kv_rows}, -0.1f, 0.1f);
      b.vector(p + "self_attn.v_proj.bias", {kv_rows}, -0.1f, 0.1f);
    }
    if (c.qk_norm) {
      b.norm(p + "self_attn.q_norm.weight", D);
      b.norm(p + "self_attn.k_norm.weight", D);
    }
    b.matrix(p + "mlp.gate_proj", c.intermediate_size, H);
    b.matrix(p + "mlp.up_proj", c.intermediate_size, H);
    b.matrix(p + "mlp.down_proj", H, c.intermediate_size);
  }
  b.norm("model.norm.weight", H);
  if (!c.tie_word_embeddings) b.matrix("lm_head", c.vocab_size, H);
}

// Qwen3.5 / Qwen3.5-MoE / Qwen3-Next as mlx-lm converts them (the names qwen35.cpp reads).
// `quantization` gets the per-module 8-bit entries of the MoE routers.
void build_hybrid(Builder& b, const ModelConfig& c, int group_size, Json& quantization) {
  const std::string P = "language_model.model.";
  const int64_t H = c.hidden_size, D = c.head_dim;
  const LinearAttentionConfig& la = c.linear;
  const MoeConfig& moe = c.moe;
  auto router = [&](const std::string& prefix, int64_t rows) {
    b.matrix(prefix, rows, H, 0, 8);
    quantization[prefix] = {{"group_size", group_size}, {"bits", 8}};
  };
  b.matrix(P + "embed_tokens", c.vocab_size, H);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("{}layers.{}.", P, l);
    b.norm(p + "input_layernorm.weight", H);
    b.norm(p + "post_attention_layernorm.weight", H);
    if (c.layer_kinds[l] == LayerKind::kFullAttention) {
      b.matrix(p + "self_attn.q_proj", c.num_heads * 2 * D, H);  // query and output gate per head
      b.matrix(p + "self_attn.k_proj", c.num_kv_heads * D, H);
      b.matrix(p + "self_attn.v_proj", c.num_kv_heads * D, H);
      b.matrix(p + "self_attn.o_proj", H, c.num_heads * D);
      b.norm(p + "self_attn.q_norm.weight", D);
      b.norm(p + "self_attn.k_norm.weight", D);
    } else {
      const std::string a = p + "linear_attn.";
      b.matrix(a + "in_proj_qkv", la.conv_dim(), H);
      b.matrix(a + "in_proj_z", la.value_heads * la.value_dim, H);
      b.matrix(a + "in_proj_b", la.value_heads, H);
      b.matrix(a + "in_proj_a", la.value_heads, H);
      b.matrix(a + "out_proj", H, la.value_heads * la.value_dim);
      b.vector(a + "conv1d.weight", {la.conv_dim(), la.conv_kernel, 1}, -0.5f,
               0.5f);  // MLX [C, K, 1]
      // Decay exp(-exp(A_log)·softplus(a + dt_bias)) well inside (0, 1), as in trained models.
      b.vector(a + "A_log", {la.value_heads}, -3.0f, 0.0f);
      b.vector(a + "dt_bias", {la.value_heads}, -1.0f, 1.0f);
      b.norm(a + "norm.weight", la.value_dim);
    }
    const std::string m = p + "mlp.";
    if (!c.is_moe_layer(l)) {
      b.matrix(m + "gate_proj", c.intermediate_size, H);
      b.matrix(m + "up_proj", c.intermediate_size, H);
      b.matrix(m + "down_proj", H, c.intermediate_size);
      continue;
    }
    router(m + "gate", moe.num_experts);
    b.matrix(m + "switch_mlp.gate_proj", moe.expert_intermediate, H, moe.num_experts);
    b.matrix(m + "switch_mlp.up_proj", moe.expert_intermediate, H, moe.num_experts);
    b.matrix(m + "switch_mlp.down_proj", H, moe.expert_intermediate, moe.num_experts);
    if (moe.shared_intermediate > 0) {
      b.matrix(m + "shared_expert.gate_proj", moe.shared_intermediate, H);
      b.matrix(m + "shared_expert.up_proj", moe.shared_intermediate, H);
      b.matrix(m + "shared_expert.down_proj", H, moe.shared_intermediate);
      router(m + "shared_expert_gate", 1);
    }
  }
  b.norm(P + "norm.weight", H);
  if (!c.tie_word_embeddings) b.matrix("language_model.lm_head", c.vocab_size, H);
}

}  // namespace

SyntheticCheckpoint make_synthetic_checkpoint(const Json& config, const SyntheticOptions& options) {
  check(options.bits >= 2 && options.bits <= 8 && 32 % options.bits == 0, ErrorKind::kInvalidInput,
        "synthetic checkpoints pack whole uint32 words: bits must be 2, 4 or 8, got {}",
        options.bits);
  check(options.group_size > 0, ErrorKind::kInvalidInput, "group size must be positive");
  const ModelConfig c = parse_model_config(config);
  SyntheticCheckpoint out;
  out.config = config;
  Json quantization = {{"group_size", options.group_size}, {"bits", options.bits}};
  Builder b(out, options);
  if (c.family == Family::kDense) {
    build_dense(b, c);
  } else {
    build_hybrid(b, c, options.group_size, quantization);
  }
  out.config["quantization"] = std::move(quantization);
  return out;
}

}  // namespace strata::model
