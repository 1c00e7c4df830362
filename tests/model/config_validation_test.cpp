// Model config validation at load: each value the model code cannot run with (epsilons, thetas,
// factors, sizes, head counts, token ids, the hybrid's GDN and MoE shapes) is an Error naming the
// key, from config.json, generation_config.json and GGUF metadata alike.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/config.h"
#include "model/model.h"
#include "test_util.h"
#include "tiny_configs.h"

namespace strata::model {
namespace {

Json dense() {
  return Json::parse(R"({"model_type": "llama", "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2})");
}

Json hybrid(bool moe) { return test::tiny_hybrid_config(moe)["text_config"]; }

// Each case: a config made bad one way, and what the message must say.
struct Bad {
  std::function<void(Json&)> edit;
  std::vector<std::string> words;
};

void expect_refused(const Json& good, const std::vector<Bad>& cases) {
  ASSERT_NO_THROW(parse_model_config(good));
  for (const Bad& c : cases) {
    Json j = good;
    c.edit(j);
    try {
      parse_model_config(j);
      ADD_FAILURE() << "accepted: " << j.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
      for (const std::string& w : c.words)
        EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
            << "lacks '" << w << "': " << e.what();
    }
  }
}

TEST(ModelConfigValidation, NormEpsilonMustBePositiveAndFinite) {
  expect_refused(
      dense(),
      {
          {[](Json& j) { j["rms_norm_eps"] = -1e-6; },
           {"config.json: 'rms_norm_eps' must be a positive finite number, got -1e-06"}},
          {[](Json& j) { j["rms_norm_eps"] = 0; }, {"'rms_norm_eps'", "got 0"}},
          {[](Json& j) { j["rms_norm_eps"] = 1e-60; }, {"'rms_norm_eps'"}},  // 0 as a float
          {[](Json& j) { j["rms_norm_eps"] = 1e300; }, {"'rms_norm_eps'"}},  // inf as a float
      });
}

TEST(ModelConfigValidation, RopeValuesMustBeUsable) {
  auto scaling = [](Json params) { return [params](Json& j) { j["rope_scaling"] = params; }; };
  expect_refused(
      dense(),
      {
          {[](Json& j) { j["rope_theta"] = 0; }, {"'rope_theta' must be a positive finite number"}},
          {[](Json& j) { j["rope_theta"] = -10000.0; }, {"'rope_theta'"}},
          {[](Json& j) { j["partial_rotary_factor"] = 0; },
           {"'partial_rotary_factor' must be in (0, 1]"}},
          {[](Json& j) { j["partial_rotary_factor"] = 1.5; }, {"'partial_rotary_factor'", "1.5"}},
          {[](Json& j) { j["partial_rotary_factor"] = 0.1; },
           {"rotary dimension 1", "even"}},  // 16 × 0.1
          {scaling({{"rope_type", "linear"}, {"factor", 0}}), {"'factor'"}},
          {scaling({{"rope_type", "dynamic"}, {"factor", -2}}), {"'factor'"}},
          {scaling({{"rope_type", "llama3"},
                    {"factor", 8},
                    {"original_max_position_embeddings", 8192},
                    {"low_freq_factor", 4},
                    {"high_freq_factor", 4}}),
           {"'high_freq_factor'", "greater than 'low_freq_factor'"}},
          {scaling({{"rope_type", "llama3"},
                    {"factor", 8},
                    {"original_max_position_embeddings", 8192},
                    {"low_freq_factor", 0},
                    {"high_freq_factor", 4}}),
           {"'low_freq_factor'"}},
          {scaling({{"rope_type", "llama3"}, {"factor", 8}}), {"original_max_position_embeddings"}},
          {scaling({{"rope_type", "yarn"}, {"factor", 4}, {"beta_fast", 0}}), {"'beta_fast'"}},
          {scaling({{"rope_type", "yarn"}, {"factor", 4}, {"attention_factor", -1}}),
           {"'attention_factor'"}},
          {scaling({{"rope_type", "yarn"}, {"factor", 4}, {"rope_theta", 1}}), {"greater than 1"}},
      });
  // The default type reads none of the scaling fields, so their values do not matter there.
  Json j = dense();
  j["rope_scaling"] = {{"rope_type", "default"}, {"factor", 0}};
  EXPECT_NO_THROW(parse_model_config(j));
}

TEST(ModelConfigValidation, SizesAndHeadsMustBePositiveAndDivide) {
  expect_refused(
      dense(),
      {
          {[](Json& j) { j["head_dim"] = 0; }, {"'head_dim' must be positive, got 0"}},
          {[](Json& j) { j["hidden_size"] = 3; }, {"'head_dim' must be positive"}},  // 3 / 4 heads
          {[](Json& j) { j["max_position_embeddings"] = -5; }, {"'max_position_embeddings'"}},
          {[](Json& j) { j["num_key_value_heads"] = 3; },
           {"not a multiple of 'num_key_value_heads' 3"}},
          {[](Json& j) { j.erase("intermediate_size"); }, {"'intermediate_size' is missing"}},
          {[](Json& j) {
             j["use_sliding_window"] = true;
             j["sliding_window"] = -1;
           },
           {"'sliding_window'"}},
      });
}

TEST(ModelConfigValidation, TokenIdsMustLieInTheVocabulary) {
  expect_refused(dense(), {
                              {[](Json& j) { j["eos_token_id"] = 256; },
                               {"'eos_token_id' 256 is outside the vocabulary (size 256)"}},
                              {[](Json& j) {
                                 j["eos_token_id"] = {2, -1};
                               },
                               {"'eos_token_id' -1"}},
                              {[](Json& j) { j["bos_token_id"] = 1000; }, {"'bos_token_id' 1000"}},
                          });
  ModelConfig c = parse_model_config(dense());
  test::expect_error(
      [&] { merge_generation_config(Json::parse(R"({"eos_token_id": [2, 300]})"), c); },
      ErrorKind::kInvalidInput, {"generation_config.json: 'eos_token_id' 300"});
}

TEST(ModelConfigValidation, HybridShapesMustBeUsable) {
  expect_refused(
      hybrid(false),
      {
          {[](Json& j) { j["linear_conv_kernel_dim"] = 1; },
           {"'linear_conv_kernel_dim' must be at least 2"}},
          {[](Json& j) { j["linear_num_value_heads"] = 3; },
           {"'linear_num_value_heads' 3 is not a multiple"}},
          {[](Json& j) { j["linear_value_head_dim"] = 0; }, {"'linear_value_head_dim'"}},
          {[](Json& j) { j["full_attention_interval"] = 0; }, {"full_attention_interval"}},
          {[](Json& j) {
             j["partial_rotary_factor"] = 0;
             j["rope_parameters"].erase("partial_rotary_factor");
           },
           {"'partial_rotary_factor'"}},
      });
  expect_refused(hybrid(true),
                 {
                     {[](Json& j) { j["num_experts_per_tok"] = 9; },
                      {"'num_experts_per_tok' 9 must be between 1 and 'num_experts' 8"}},
                     {[](Json& j) { j["num_experts_per_tok"] = 0; }, {"'num_experts_per_tok'"}},
                     {[](Json& j) { j["moe_intermediate_size"] = 0; }, {"'moe_intermediate_size'"}},
                     {[](Json& j) {
                        j["model_type"] = "qwen3_next";
                        j["mlp_only_layers"] = {7};
                      },
                      {"'mlp_only_layers' names layer 7 of 4"}},
                 });
}

// --- GGUF metadata: the same rules, naming GGUF's keys ---

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

// A llama GGUF v3 file with a 16 x 8 F32 token_embd.weight, the required metadata, and one F32
// value for `float_key` (e.g. the norm epsilon).
std::string llama_gguf(const std::string& path, const std::string& float_key, float value) {
  std::string kvs;
  int count = 0;
  auto kv_u32 = [&](const std::string& key, uint32_t v) {
    put_str(kvs, key), put<uint32_t>(kvs, 4), put(kvs, v), ++count;
  };
  put_str(kvs, "general.architecture"), put<uint32_t>(kvs, 8), put_str(kvs, "llama"), ++count;
  kv_u32("llama.embedding_length", 8);
  kv_u32("llama.block_count", 1);
  kv_u32("llama.feed_forward_length", 16);
  kv_u32("llama.attention.head_count", 2);
  put_str(kvs, float_key), put<uint32_t>(kvs, 6), put(kvs, value), ++count;
  std::string out = "GGUF";
  put<uint32_t>(out, 3);
  put<uint64_t>(out, 1);  // tensors
  put<uint64_t>(out, static_cast<uint64_t>(count));
  out += kvs;
  put_str(out, "token_embd.weight");
  put<uint32_t>(out, 2);
  put<uint64_t>(out, 8);   // columns (GGUF lists the innermost dimension first)
  put<uint64_t>(out, 16);  // rows: the vocabulary
  put<uint32_t>(out, 0);   // F32
  put<uint64_t>(out, 0);   // offset in the data section
  out.resize((out.size() + 31) / 32 * 32, '\0');
  out += std::string(16 * 8 * sizeof(float), '\0');
  return test::write_bytes(path, out);
}

TEST(ModelConfigValidation, GgufMetadataIsValidatedByItsOwnKeyNames) {
  const std::string dir = test::scratch_dir("config_validation_gguf");
  const std::string bad_eps =
      llama_gguf(dir + "/eps.gguf", "llama.attention.layer_norm_rms_epsilon", -1e-6f);
  test::expect_error(
      [&] { load_model(bad_eps); }, ErrorKind::kInvalidInput,
      {"eps.gguf: 'llama.attention.layer_norm_rms_epsilon' must be a positive finite number"});
  const std::string bad_theta = llama_gguf(dir + "/theta.gguf", "llama.rope.freq_base", 0.0f);
  test::expect_error([&] { load_model(bad_theta); }, ErrorKind::kInvalidInput,
                     {"theta.gguf: 'llama.rope.freq_base' must be a positive finite number"});
}

}  // namespace
}  // namespace strata::model
