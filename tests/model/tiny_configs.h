// Tiny configs for synthetic checkpoints (model/synthetic.h) that several suites load.
#pragma once

#include "core/json.h"

namespace strata::test {

// A Llama of 2 layers, 4 query heads and 2 KV heads of head_dim (hidden = 4 · head_dim).
inline Json tiny_llama_config(int64_t vocab, int64_t head_dim, int64_t intermediate) {
  Json c = Json::parse(R"({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 500000.0})");
  c["vocab_size"] = vocab;
  c["hidden_size"] = 4 * head_dim;
  c["head_dim"] = head_dim;
  c["intermediate_size"] = intermediate;
  return c;
}

// A Qwen3.5 hybrid (3 GDN + 1 attention layers; dense FFN, tied embeddings) or, with moe, a
// Qwen3.5-MoE (8 stacked experts, 2 a token, a shared expert of the routed experts' size, so that it
// folds into them; 8-bit routers in synthetic checkpoints).
inline Json tiny_hybrid_config(bool moe) {
  Json text = Json::parse(R"({"vocab_size": 256, "hidden_size": 128, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
    "full_attention_interval": 4, "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}})");
  if (moe) {
    text["model_type"] = "qwen3_5_moe_text";
    text["num_experts"] = 8;
    text["num_experts_per_tok"] = 2;
    text["moe_intermediate_size"] = 64;
    text["shared_expert_intermediate_size"] = 64;
  } else {
    text["model_type"] = "qwen3_5_text";
    text["intermediate_size"] = 192;
    text["tie_word_embeddings"] = true;
  }
  return {{"model_type", moe ? "qwen3_5_moe" : "qwen3_5"}, {"text_config", text}};
}

// tiny_hybrid_config widened so that every matrix is whole k-tiles of the tensor-core decode kernels
// (256 at 4 bits): hidden 256, head dims 64, a 512-token vocabulary, the FFN `intermediate` wide
// (the routed and shared experts' width with moe).
inline Json tiny_hybrid_tiles_config(bool moe, int64_t intermediate) {
  Json config = tiny_hybrid_config(moe);
  Json& t = config["text_config"];
  t["vocab_size"] = 512;
  t["hidden_size"] = 256;
  t["head_dim"] = 64;
  t["linear_key_head_dim"] = 64;
  t["linear_value_head_dim"] = 64;
  if (moe) {
    t["moe_intermediate_size"] = intermediate;
    t["shared_expert_intermediate_size"] = intermediate;
  } else {
    t["intermediate_size"] = intermediate;
  }
  return config;
}

}  // namespace strata::test
