// GGUF vocabularies: the "llama" (SentencePiece, score-merged) tokenizer of the real stories260K
// GGUF against llama2.c's encode (tests/fixtures/tokenizers/stories260k.json, made by
// tools/make_stories_tokenizer_goldens.py from tok512.bin), and the "gpt2" (byte-level BPE) import
// fed with the tokens and merges of the shared tokenizer.json files, checked against their
// reference cases.
#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/unicode.h"
#include "tokenizer_fixtures.h"

namespace strata::text {
namespace {

using testing::escaped;
using testing::read_cases;

const Tokenizer& stories() {
  static const auto tok =
      Tokenizer::load(test::shared_fixture("models/stories260K/stories260K.gguf"));
  return *tok;
}

TEST(GgufLlamaTokenizer, MatchesLlama2cEncodeOnStories260K) {
  const auto cases = read_cases(test::test_fixture("tokenizers/stories260k.json"));
  ASSERT_GE(cases.size(), 20u);
  int passed = 0;
  for (const auto& c : cases) {
    const auto ids = stories().encode(c.text);
    EXPECT_EQ(ids, c.ids) << "text: \"" << escaped(c.text) << "\"";
    EXPECT_EQ(stories().decode(ids), c.decoded) << "text: \"" << escaped(c.text) << "\"";
    if (ids == c.ids && stories().decode(ids) == c.decoded) ++passed;
  }
  std::printf("[ stories260K ] %d/%zu cases match\n", passed, cases.size());
}

TEST(GgufLlamaTokenizer, ReadsSpecialTokensAndAddsBos) {
  const Tokenizer& tok = stories();
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_ids(), std::vector<int32_t>{2});
  EXPECT_TRUE(tok.adds_bos());
  EXPECT_TRUE(tok.is_special(1));
  EXPECT_FALSE(tok.is_special(403));
  EXPECT_EQ(tok.id_to_piece(403), "\xE2\x96\x81Once");
  EXPECT_EQ(tok.token_id("<0x0A>"), 13);
  // "Once upon a time": the first merges by score are "▁t" (rank 0) and so on; llama2.c gives
  // ▁Once ▁upon ▁a ▁time.
  EXPECT_EQ(tok.encode("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok.encode("", true), std::vector<int32_t>{1});
  EXPECT_EQ(tok.encode(""), std::vector<int32_t>{});
}

TEST(GgufLlamaTokenizer, FallsBackToByteTokensAndDecodesThem) {
  const Tokenizer& tok = stories();
  // "語" is not in the 512-token vocabulary: its three UTF-8 bytes become <0xE8> <0xAA> <0x9E>.
  const auto ids = tok.encode("\xE8\xAA\x9E");
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(tok.id_to_piece(ids[0]), "\xE2\x96\x81");
  EXPECT_EQ(ids[1], 0xE8 + 3);
  EXPECT_EQ(ids[2], 0xAA + 3);
  EXPECT_EQ(ids[3], 0x9E + 3);
  EXPECT_EQ(tok.decode(ids), "\xE8\xAA\x9E");
  // An incomplete byte sequence decodes to one U+FFFD per byte, as Hugging Face's ByteFallback.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0xE8 + 3, 0xAA + 3}), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(GgufLlamaTokenizer, RecognisesControlTokensInTextAndSkipsThemOnRequest) {
  const Tokenizer& tok = stories();
  // Each text span between special tokens gets its own dummy prefix, like llama.cpp.
  const auto ids = tok.encode("Lily<s>Tim");
  EXPECT_EQ(ids, (std::vector<int32_t>{317, 1, 326}));
  EXPECT_EQ(tok.decode(ids), "Lily<s> Tim");
  EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), "Lily Tim");
}

// GGUF "gpt2" metadata rebuilt from a tokenizer.json: tokens by id, merges as "a b", control
// type for special added tokens.
Json gguf_metadata_from_tokenizer_json(const std::string& name, const std::string& pre) {
  const Json tj = read_json_file(test::shared_fixture("tokenizers/" + name + "/tokenizer.json"));
  std::vector<std::string> tokens;
  for (const auto& [piece, id] : tj["model"]["vocab"].items()) {
    const auto i = id.get<size_t>();
    if (tokens.size() <= i) tokens.resize(i + 1);
    tokens[i] = piece;
  }
  std::vector<int32_t> types(tokens.size(), 1);
  for (const Json& added : tj["added_tokens"]) {
    const auto i = added["id"].get<size_t>();
    if (tokens.size() <= i) {
      tokens.resize(i + 1);
      types.resize(i + 1, 1);
    }
    tokens[i] = added["content"].get<std::string>();
    types[i] = added["special"].get<bool>() ? 3 : 4;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].empty()) {
      tokens[i] = "[PAD" + std::to_string(i) + "]";
      types[i] = 5;
    }
  }
  std::vector<std::string> merges;
  for (const Json& m : tj["model"]["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  Json meta = Json::object();
  meta["tokenizer.ggml.model"] = "gpt2";
  meta["tokenizer.ggml.pre"] = pre;
  meta["tokenizer.ggml.tokens"] = tokens;
  meta["tokenizer.ggml.token_type"] = types;
  meta["tokenizer.ggml.merges"] = merges;
  meta["tokenizer.ggml.bos_token_id"] = 0;
  meta["tokenizer.ggml.eos_token_id"] = 0;
  return meta;
}

class GgufGpt2Import : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(GgufGpt2Import, MatchesReferenceCases) {
  const auto [name, pre] = GetParam();
  const auto tok = Tokenizer::from_gguf_metadata(gguf_metadata_from_tokenizer_json(name, pre));
  const auto cases =
      read_cases(test::shared_fixture(std::string("tokenizers/") + name + "/cases.json"));
  int passed = 0;
  for (const auto& c : cases) {
    const auto ids = tok->encode(c.text);
    // See SharedCases in tokenizer_reference_test.cpp for why decoding is compared after NFC.
    const std::string decoded = normalize_unicode(tok->decode(c.ids), NormalForm::kNfc);
    EXPECT_EQ(ids, c.ids) << name << " text: \"" << escaped(c.text) << "\"";
    EXPECT_EQ(decoded, normalize_unicode(c.decoded, NormalForm::kNfc)) << name;
    if (ids == c.ids) ++passed;
  }
  EXPECT_FALSE(tok->adds_bos());
  std::printf("[ gguf %-9s ] %d/%zu cases match\n", name, passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GgufGpt2Import,
                         ::testing::Values(std::make_pair("qwen35", "qwen35"),
                                           std::make_pair("qwen2", "qwen2"),
                                           std::make_pair("llama-bpe", "llama-bpe"),
                                           std::make_pair("gpt-2", "gpt-2")));

TEST(GgufImport, RejectsMissingOrUnknownTokenizers) {
  Json meta = Json::object();
  try {
    Tokenizer::from_gguf_metadata(meta);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos);
  }
  meta["tokenizer.ggml.model"] = "bert";
  meta["tokenizer.ggml.tokens"] = {"a"};
  try {
    Tokenizer::from_gguf_metadata(meta);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  }
  meta["tokenizer.ggml.model"] = "gpt2";
  meta["tokenizer.ggml.pre"] = "no-such-pre";
  try {
    Tokenizer::from_gguf_metadata(meta);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("no-such-pre"), std::string::npos);
  }
  meta["tokenizer.ggml.pre"] = "gpt-2";
  try {
    Tokenizer::from_gguf_metadata(meta);  // a gpt2 vocabulary without merges
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.merges"), std::string::npos);
  }
  meta["tokenizer.ggml.merges"] = {"a a"};
  meta["tokenizer.ggml.token_type"] = {1, 1};  // two types for one token
  EXPECT_THROW(Tokenizer::from_gguf_metadata(meta), Error);
}

}  // namespace
}  // namespace strata::text
