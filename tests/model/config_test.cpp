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

}  // namespace
}  // namespace strata::model
