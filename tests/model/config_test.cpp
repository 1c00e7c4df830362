// config.json parsing: nested text_config, both rope layouts, generation_config eos union, and clear
// errors for bad configs.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/config.h"

namespace strata::model {
namespace {

Json base() {
  return Json::parse(R"({"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "eos_token_id": 2})");
}

void expect_error(const Json& j, ErrorKind kind, const std::string& needle) {
  try {
    parse_model_config(j);
    FAIL() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ReadsDenseFieldsAndDefaults) {
  const ModelConfig c = parse_model_config(base());
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.rope.type, "default");
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(ModelConfig, ReadsLegacyAndV5RopeLayouts) {
  Json legacy = base();
  legacy["rope_theta"] = 500000.0;
  legacy["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const ModelConfig a = parse_model_config(legacy);
  EXPECT_EQ(a.rope.type, "llama3");
  EXPECT_DOUBLE_EQ(a.rope.theta, 500000.0);
  EXPECT_EQ(a.rope.original_max_position, 8192);
  Json v5 = base();
  v5["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e6}};
  const ModelConfig b = parse_model_config(v5);
  EXPECT_EQ(b.rope.type, "linear");
  EXPECT_DOUBLE_EQ(b.rope.theta, 1e6);
}

TEST(ModelConfig, NestedTextConfigWinsAndWrapperTieFlagCounts) {
  Json wrapped = {{"model_type", "qwen3_5"}, {"tie_word_embeddings", true}, {"text_config", base()}};
  wrapped["text_config"]["model_type"] = "qwen3";
  const ModelConfig c = parse_model_config(wrapped);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
}

TEST(ModelConfig, GenerationConfigEosIdsAreUnited) {
  ModelConfig c = parse_model_config(base());
  merge_generation_config(Json::parse(R"({"eos_token_id": [2, 7]})"), c);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2, 7}));
}

TEST(ModelConfig, BadConfigsAreClearErrors) {
  expect_error(Json::array(), ErrorKind::kInvalidInput, "JSON object");
  Json j = base();
  j.erase("hidden_size");
  expect_error(j, ErrorKind::kInvalidInput, "hidden_size");
  j = base();
  j["vocab_size"] = "big";
  expect_error(j, ErrorKind::kInvalidInput, "vocab_size");
  j = base();
  j["num_hidden_layers"] = -1;
  expect_error(j, ErrorKind::kInvalidInput, "num_hidden_layers");
  j = base();
  j["model_type"] = "gpt_neox";
  expect_error(j, ErrorKind::kUnsupported, "gpt_neox");
  j = base();
  j["num_key_value_heads"] = 3;
  expect_error(j, ErrorKind::kInvalidInput, "multiple");
  j = base();
  j["rope_scaling"] = {{"rope_type", "longrope"}};
  expect_error(j, ErrorKind::kUnsupported, "longrope");
  j = base();
  j["rms_norm_eps"] = "tiny";
  expect_error(j, ErrorKind::kInvalidInput, "rms_norm_eps");
}

Json hybrid() {
  return Json::parse(R"({"model_type": "qwen3_5_text", "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": true}})");
}

TEST(ModelConfig, HybridLayerPatternFromIntervalOrLayerTypes) {
  const ModelConfig a = parse_model_config(hybrid());
  ASSERT_EQ(a.layer_kinds.size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(a.layer_kinds[i], (i + 1) % 4 == 0 ? LayerKind::kFullAttention : LayerKind::kLinearAttention);
  EXPECT_EQ(a.family, Family::kQwen35);
  EXPECT_TRUE(a.qk_norm);
  EXPECT_EQ(a.rotary_dim(), 8);
  EXPECT_DOUBLE_EQ(a.rope.theta, 1e7);
  EXPECT_EQ(a.linear.conv_dim(), 2 * 2 * 16 + 4 * 16);
  Json j = hybrid();
  j["layer_types"] = Json::array();
  for (int i = 0; i < 8; ++i) j["layer_types"].push_back(i % 2 ? "full_attention" : "linear_attention");
  const ModelConfig b = parse_model_config(j);
  EXPECT_EQ(b.layer_kinds[1], LayerKind::kFullAttention);
  EXPECT_EQ(b.layer_kinds[2], LayerKind::kLinearAttention);
  j["layer_types"].erase(0);
  expect_error(j, ErrorKind::kInvalidInput, "layer_types");
}

TEST(ModelConfig, HybridLegacyRopeLayoutAndWrapper) {
  Json text = hybrid();
  text.erase("rope_parameters");
  text["rope_theta"] = 5e6;
  text["partial_rotary_factor"] = 0.5;
  const ModelConfig c = parse_model_config({{"model_type", "qwen3_5"}, {"text_config", text}});
  EXPECT_DOUBLE_EQ(c.rope.theta, 5e6);
  EXPECT_EQ(c.rotary_dim(), 16);
}

TEST(ModelConfig, MoeLayersForQwen35MoeAndQwen3Next) {
  Json moe = hybrid();
  moe["model_type"] = "qwen3_5_moe_text";
  moe.erase("intermediate_size");
  moe["num_experts"] = 8;
  moe["num_experts_per_tok"] = 2;
  moe["moe_intermediate_size"] = 32;
  moe["shared_expert_intermediate_size"] = 48;
  moe["norm_topk_prob"] = false;  // ignored: Qwen3.5-MoE always renormalises
  const ModelConfig a = parse_model_config(moe);
  EXPECT_TRUE(a.moe.norm_topk);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(a.is_moe_layer(i));
  Json next = moe;
  next["model_type"] = "qwen3_next";
  next["intermediate_size"] = 128;
  next["decoder_sparse_step"] = 2;
  next["mlp_only_layers"] = {3};
  const ModelConfig b = parse_model_config(next);
  EXPECT_FALSE(b.moe.norm_topk);
  EXPECT_FALSE(b.is_moe_layer(0));
  EXPECT_TRUE(b.is_moe_layer(1));
  EXPECT_FALSE(b.is_moe_layer(3));
  EXPECT_TRUE(b.is_moe_layer(5));
  next.erase("intermediate_size");  // dense layers then lack their size
  expect_error(next, ErrorKind::kInvalidInput, "intermediate_size");
}

TEST(ModelConfig, HybridBadHeadCountsAreClearErrors) {
  Json j = hybrid();
  j["linear_num_value_heads"] = 3;
  expect_error(j, ErrorKind::kInvalidInput, "linear_num_value_heads");
  j = hybrid();
  j.erase("linear_key_head_dim");
  expect_error(j, ErrorKind::kInvalidInput, "linear_key_head_dim");
}

}  // namespace
}  // namespace strata::model
