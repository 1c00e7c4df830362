// strata generate / info / tokenize on a Qwen3.5 hybrid: the qwen35 golden checkpoint with a
// byte-level tokenizer of exactly its 256-token vocabulary, as HF and MLX layouts. The greedy ids
// printed by the binary must be those of the engine run in-process on the same prompt.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/json.h"
#include "core/mmap.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "cli_util.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::string run_cli(const std::string& args, int* exit_code, const std::string& env = "") {
  const test::CliResult r = test::strata_cli(args, true, env);
  *exit_code = r.exit_code;
  return r.out;
}

// A byte-level BPE tokenizer.json with no merges: token i is byte i.
std::string byte_tokenizer_json() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(text::byte_level_char(static_cast<uint8_t>(b)))] = b;
  Json tok = {{"version", "1.0"},
              {"added_tokens", Json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                                 {"use_regex", true}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", true}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array()}}}};
  return tok.dump();
}

// A fresh checkpoint folder per test: ctest runs the tests of this file in parallel processes, and
// one of them corrupts its copy on purpose.
std::string hybrid_model_dir() {
  const std::string dir =
      test::scratch_dir(std::string("cli-qwen35-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
    fs::copy_file(test::test_fixture(std::string("models/qwen35/") + f), dir + "/" + f);
  write_file_atomic(dir + "/tokenizer.json", byte_tokenizer_json());
  return dir;
}

TEST(HybridCli, GenerateGreedyIdsMatchTheEngine) {
  const std::string dir = hybrid_model_dir();
  const std::string prompt = "The state of a hybrid model";
  int code = 0;
  const std::string out =
      run_cli("generate -m " + dir + " -t 0 -n 16 --ignore-eos --json --prompt '" + prompt + "'", &code);
  ASSERT_EQ(code, 0) << out;
  const Json j = Json::parse(out);
  auto tok = text::Tokenizer::load(dir);
  runtime::Engine engine(model::load_model(dir), runtime::EngineOptions{});
  runtime::GenerationRequest req;
  req.prompt = tok->encode(prompt);
  req.max_tokens = 16;
  req.sampling.temperature = 0.0f;
  const runtime::GenerationResult r = engine.generate(req);
  EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), req.prompt);
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), r.tokens);
  EXPECT_EQ(r.tokens.size(), 16u);
}

// --speculative ngram and draft (strata-demo with --draft-model strata-demo-draft): the plain ids,
// and what speculation did in the JSON.
TEST(HybridCli, GenerateSpeculativeGivesThePlainIds) {
  const std::string demo = test::test_fixture("../../models/strata-demo");
  const std::string args = " -t 0 -n 24 --ignore-eos --json --prompt 'a b c a b c a b c'";
  int code = 0;
  const Json plain = Json::parse(run_cli("generate -m " + demo + args, &code));
  ASSERT_EQ(code, 0);
  EXPECT_FALSE(plain.contains("speculative"));
  for (const std::string& flags : {std::string(" --speculative ngram --draft-max 3"),
                                  " --speculative draft --draft-model " + demo + "-draft"}) {
    const std::string out = run_cli("generate -m " + demo + flags + args, &code);
    ASSERT_EQ(code, 0) << flags << ": " << out;
    const Json j = Json::parse(out);
    EXPECT_EQ(j["ids"], plain["ids"]) << flags;
    EXPECT_TRUE(j["speculative"]["drafted"].is_number()) << flags << ": " << out;
  }
  // Method draft without a draft model is a clear error.
  const std::string out = run_cli("generate -m " + demo + " --speculative draft" + args, &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--draft-model"), std::string::npos) << out;
}

TEST(HybridCli, GenerateQuantizedOnLoadRuns) {
  int code = 0;
  const std::string out = run_cli("generate -m " + hybrid_model_dir() + " --quantize q4 -t 0 -n 8 --ignore-eos --json", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(Json::parse(out)["ids"].size(), 8u);
}

TEST(HybridCli, InfoReportsTheLayerMixAndRecurrentState) {
  int code = 0;
  const std::string out = run_cli("info -m " + hybrid_model_dir() + " --json -c 1000", &code);
  ASSERT_EQ(code, 0) << out;
  const Json j = Json::parse(out);
  EXPECT_EQ(j["family"], "qwen3_5_text");
  EXPECT_EQ(j["attention_layers"], 2);
  EXPECT_EQ(j["recurrent_layers"], 6);
  // 6 GDN layers × (conv 3 × 128 + state 4 × 16 × 16) + 1000 tokens × 2 layers × K and V × 2 × 32, fp32.
  EXPECT_EQ(j["state_bytes"], 4 * (6 * (3 * 128 + 4 * 16 * 16) + 1000 * 2 * 2 * 2 * 32));
}

TEST(HybridCli, TokenizeRoundTripsThroughTheModelDirectory) {
  int code = 0;
  const std::string out = run_cli("tokenize --model " + hybrid_model_dir() + " --text 'héllo' --json", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(Json::parse(out)["ids"], Json::parse("[104, 195, 169, 108, 108, 111]"));
}

TEST(HybridCli, WithoutModelTheDefaultModelIsUsed) {
  int code = 0;
  const std::string out = run_cli("info --json", &code, "STRATA_MODEL=" + hybrid_model_dir() + " ");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(Json::parse(out)["recurrent_layers"], 6);
  const std::string missing = run_cli("generate -n 1 --model /nonexistent/model", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
}

TEST(HybridCli, CorruptCheckpointIsAClearErrorNotACrash) {
  const std::string dir = hybrid_model_dir();
  write_file_atomic(dir + "/model.safetensors", "garbage");
  int code = 0;
  const std::string out = run_cli("generate -m " + dir + " -n 4", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("safetensors"), std::string::npos) << out;
}

}  // namespace
}  // namespace strata
