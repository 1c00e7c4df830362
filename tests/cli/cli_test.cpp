// The strata binary end to end: stories260K greedy text, --json output, tokenize, info, and clear
// errors with a non-zero exit for bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sys/wait.h>

#include "core/json.h"
#include "core/mmap.h"
#include "cli_util.h"
#include "test_util.h"

namespace strata {
namespace {

using test::CliResult;
using test::strata_cli;

std::string stories() { return test::shared_fixture("models/stories260K/stories260K.gguf"); }

TEST(Cli, Stories260KGreedyTextMatchesLlama2cByteForByte) {
  const std::string expected = read_file(test::shared_fixture("models/stories260K/expected_greedy.txt"));
  const std::string out_path = test::scratch_dir("cli_stories") + "/out.txt";
  const std::string cmd = std::string(STRATA_BINARY_DIR) + "/strata generate -m " + stories() +
                          " --temperature 0 --max-tokens 256 > " + out_path + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(read_file(out_path), expected);
}

TEST(Cli, GenerateJsonReportsIdsTextAndFinishReason) {
  const CliResult r = strata_cli("generate -m " + stories() + " -t 0 -n 12 --json --prompt 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["ids"].size(), 12u);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["prompt_ids"][0], 1);  // BOS added by the llama vocabulary
  EXPECT_FALSE(j["text"].get<std::string>().empty());
}

TEST(Cli, SeededSamplingIsReproducible) {
  const std::string args = "generate -m " + stories() + " -t 1.0 -n 20 --seed 7 --json";
  const CliResult a = strata_cli(args), b = strata_cli(args);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(Json::parse(a.out)["ids"], Json::parse(b.out)["ids"]);
  const CliResult c = strata_cli("generate -m " + stories() + " -t 1.0 -n 20 --seed 8 --json");
  EXPECT_NE(Json::parse(a.out)["ids"], Json::parse(c.out)["ids"]);
}

TEST(Cli, TokenizeRoundTrips) {
  const CliResult enc = strata_cli("tokenize --tokenizer " + stories() + " --text 'Lily saw a ball.' --json");
  ASSERT_EQ(enc.exit_code, 0) << enc.out;
  const Json ids = Json::parse(enc.out)["ids"];
  ASSERT_FALSE(ids.empty());
  std::string list;
  for (const auto& id : ids) list += std::to_string(id.get<int>()) + ",";
  const CliResult dec = strata_cli("tokenize --tokenizer " + stories() + " --decode '" + list + "'");
  ASSERT_EQ(dec.exit_code, 0) << dec.out;
  EXPECT_EQ(dec.out, "Lily saw a ball.\n");
}

TEST(Cli, InfoDescribesTheModel) {
  const CliResult r = strata_cli("info -m " + stories() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["family"], "llama");
  EXPECT_EQ(j["layers"], 5);
  EXPECT_EQ(j["vocab_size"], 512);
  EXPECT_EQ(j["kv_cache_type"], "f32");  // auto, for a checkpoint of F32 tensors
  const CliResult b = strata_cli("info -m " + stories() + " --json --kv-cache-type bf16");
  ASSERT_EQ(b.exit_code, 0) << b.out;
  const Json jb = Json::parse(b.out);
  EXPECT_EQ(jb["kv_cache_type"], "bf16");
  EXPECT_LT(jb["state_bytes"].get<int64_t>(), j["state_bytes"].get<int64_t>());
}

// The settings come from a flag, else the environment, else the default, and info --json says
// which for each; a bad value in the environment stops the command, naming the variable.
TEST(Cli, InfoShowsTheSettingsAndWhereEachCameFrom) {
  const CliResult r = strata_cli("info --json -c 2048", true,
                                 "STRATA_MODEL=" + stories() +
                                     " STRATA_CTX_SIZE=1024 STRATA_KV_CACHE_TYPE=bf16 "
                                     "STRATA_CUDA_GRAPHS=off ");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["family"], "llama");  // the model the environment names
  EXPECT_EQ(j["context_size"], 2048);
  EXPECT_EQ(j["kv_cache_type"], "bf16");
  const Json& s = j["settings"];
  EXPECT_EQ(s["model"], (Json{{"value", stories()}, {"source", "env"}}));
  EXPECT_EQ(s["ctx_size"], (Json{{"value", 2048}, {"source", "flag"}}));
  EXPECT_EQ(s["kv_cache_type"], (Json{{"value", "bf16"}, {"source", "env"}}));
  EXPECT_EQ(s["cuda_graphs"], (Json{{"value", false}, {"source", "env"}}));
  EXPECT_EQ(s["device"], (Json{{"value", "auto"}, {"source", "default"}}));

  const CliResult bad = strata_cli("info -m " + stories(), true, "STRATA_CUDA_FEEDS=all ");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("error: STRATA_CUDA_FEEDS: 'all' is not an integer"), std::string::npos)
      << bad.out;
}

TEST(Cli, MissingModelIsAClearError) {
  const CliResult r = strata_cli("generate -m /nonexistent/model --prompt hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("error:"), std::string::npos);
  EXPECT_NE(r.out.find("/nonexistent/model"), std::string::npos);
}

TEST(Cli, CorruptModelIsAClearError) {
  const std::string dir = test::scratch_dir("cli_corrupt");
  { std::ofstream(dir + "/config.json") << "{\"model_type\": \"llama\", \"vocab_size\": "; }
  const CliResult r = strata_cli("info -m " + dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("invalid JSON"), std::string::npos) << r.out;

  const std::string bad_gguf = dir + "/bad.gguf";
  { std::ofstream(bad_gguf) << "GGUF\x03\x00\x00\x00garbage"; }
  const CliResult g = strata_cli("generate -m " + bad_gguf + " --prompt hi");
  EXPECT_EQ(g.exit_code, 1);
  EXPECT_NE(g.out.find("error:"), std::string::npos) << g.out;
}

TEST(Cli, BadUsageExitsWithTwo) {
  EXPECT_EQ(strata_cli("generate --max-tokens lots").exit_code, 2);  // not a number
  EXPECT_EQ(strata_cli("generate -m x --quantize q5").exit_code, 2);  // not q4/q8
  EXPECT_EQ(strata_cli("generate -m x --kv-cache-type fp8").exit_code, 2);  // not auto/f32/bf16
  EXPECT_EQ(strata_cli("frobnicate").exit_code, 2);
}

}  // namespace
}  // namespace strata
