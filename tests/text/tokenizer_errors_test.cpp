// Malformed or unsupported tokenizer files fail with a strata::Error that says what is wrong,
// never with a crash or a silently wrong tokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/mmap.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace strata::text {
namespace {

// A minimal valid tokenizer.json; tests break one part of it.
Json minimal() {
  return Json::parse(R"({
    "version": "1.0",
    "added_tokens": [{"id": 3, "content": "<s>", "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3}, "merges": ["a b"]}
  })");
}

// Expects from_json(j) to throw Error of `kind` whose message contains `needle`.
void expect_error(const Json& j, ErrorKind kind, const std::string& needle,
                  const Json& config = nullptr) {
  try {
    Tokenizer::from_json(j, config);
    ADD_FAILURE() << "no error for " << j.dump().substr(0, 200);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' lacks '" << needle << "'";
  }
}

TEST(TokenizerErrors, MinimalTokenizerLoads) {
  const auto tok = Tokenizer::from_json(minimal());
  EXPECT_EQ(tok->encode("ab"), std::vector<int32_t>{2});
  EXPECT_EQ(tok->encode("ba<s>"), (std::vector<int32_t>{1, 0, 3}));
}

TEST(TokenizerErrors, RejectsBadTopLevel) {
  expect_error(Json::array({1, 2}), ErrorKind::kInvalidInput, "object");
  Json j = minimal();
  j.erase("model");
  expect_error(j, ErrorKind::kInvalidInput, "model");
}

TEST(TokenizerErrors, RejectsBadModels) {
  Json j = minimal();
  j["model"]["type"] = "Unigram";
  expect_error(j, ErrorKind::kUnsupported, "Unigram");
  j = minimal();
  j["model"]["vocab"] = Json::array();
  expect_error(j, ErrorKind::kInvalidInput, "vocab");
  j = minimal();
  j["model"]["vocab"]["c"] = -4;
  expect_error(j, ErrorKind::kInvalidInput, "'c'");
  j = minimal();
  j["model"]["merges"] = Json::array({"ab"});
  expect_error(j, ErrorKind::kInvalidInput, "merge 'ab'");
  j = minimal();
  j["model"]["merges"] = Json::array({Json::array({"a"})});
  expect_error(j, ErrorKind::kInvalidInput, "merge");
  j = minimal();
  j["model"]["merges"] = "a b";
  expect_error(j, ErrorKind::kInvalidInput, "merges");
  j = minimal();
  j["model"]["unk_token"] = "<unk>";
  expect_error(j, ErrorKind::kInvalidInput, "<unk>");
  j = minimal();
  j["model"]["byte_fallback"] = "yes";
  expect_error(j, ErrorKind::kInvalidInput, "byte_fallback");
}

TEST(TokenizerErrors, RejectsBadAddedTokens) {
  Json j = minimal();
  j["added_tokens"][0].erase("content");
  expect_error(j, ErrorKind::kInvalidInput, "content");
  j = minimal();
  j["added_tokens"][0]["id"] = "3";
  expect_error(j, ErrorKind::kInvalidInput, "id");
  j = minimal();
  j["added_tokens"] = Json::object();
  expect_error(j, ErrorKind::kInvalidInput, "added_tokens");
}

TEST(TokenizerErrors, RejectsBadPipelineStages) {
  Json j = minimal();
  j["normalizer"] = {{"type", "Precompiled"}};
  expect_error(j, ErrorKind::kUnsupported, "Precompiled");
  j = minimal();
  j["normalizer"] = {{"kind", "NFC"}};
  expect_error(j, ErrorKind::kInvalidInput, "type");
  j = minimal();
  j["pre_tokenizer"] = Json::parse(
      R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"})");
  expect_error(j, ErrorKind::kInvalidInput, "(unclosed");
  j = minimal();
  j["pre_tokenizer"] =
      Json::parse(R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})");
  expect_error(j, ErrorKind::kInvalidInput, "Sideways");
  j = minimal();
  j["pre_tokenizer"] = Json::parse(R"({"type": "Split", "pattern": " ", "behavior": "Isolated"})");
  expect_error(j, ErrorKind::kInvalidInput, "pattern");
  j = minimal();
  j["decoder"] = Json::parse(R"({"type": "Strip", "content": "ab", "start": 1, "stop": 0})");
  expect_error(j, ErrorKind::kInvalidInput, "single character");
  j = minimal();
  j["decoder"] = Json::parse(R"({"type": "Sequence", "decoders": {"type": "Fuse"}})");
  expect_error(j, ErrorKind::kInvalidInput, "decoders");
  j = minimal();
  j["post_processor"] = Json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A"}}],
      "special_tokens": {}})");
  expect_error(j, ErrorKind::kInvalidInput, "<bos>");
  j = minimal();
  j["post_processor"] = {{"type", "Magic"}};
  expect_error(j, ErrorKind::kUnsupported, "Magic");
}

TEST(TokenizerErrors, RejectsConfigNamingUnknownTokens) {
  expect_error(minimal(), ErrorKind::kInvalidInput, "<bos>", Json{{"bos_token", "<bos>"}});
  expect_error(minimal(), ErrorKind::kInvalidInput, "bos_token",
               Json{{"bos_token", Json::array()}});
}

TEST(TokenizerErrors, LoadReportsMissingAndTruncatedFiles) {
  const std::string dir = test::scratch_dir("tokenizer_errors");
  try {
    Tokenizer::load(dir + "/nope.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
  try {
    Tokenizer::load(dir);  // a directory without tokenizer.json
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos);
  }
  // The first 100 kB of a real tokenizer.json.
  const std::string real =
      read_file(test::shared_fixture("tokenizers/gpt-2/tokenizer.json")).substr(0, 100000);
  write_file_atomic(dir + "/tokenizer.json", real);
  try {
    Tokenizer::load(dir);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos);
  }
  write_file_atomic(dir + "/tokenizer.json", minimal().dump());
  write_file_atomic(dir + "/tokenizer_config.json", "{\"bos_token\": ");
  EXPECT_THROW(Tokenizer::load(dir), Error);
  // A GGUF file that is not one.
  write_file_atomic(dir + "/broken.gguf", "GGUF\x03");
  EXPECT_THROW(Tokenizer::load(dir + "/broken.gguf"), Error);
}

TEST(TokenizerErrors, IdToPieceRejectsOutOfRangeIds) {
  const auto tok = Tokenizer::from_json(minimal());
  EXPECT_EQ(tok->id_to_piece(2), "ab");
  EXPECT_THROW(tok->id_to_piece(4), Error);
  EXPECT_THROW(tok->id_to_piece(-1), Error);
  // decode skips ids that name no token, as Hugging Face does.
  EXPECT_EQ(tok->decode(std::vector<int32_t>{0, 99, -5, 1}), "ab");
}

}  // namespace
}  // namespace strata::text
