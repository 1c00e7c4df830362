// StreamingDetokenizer: pushing ids one at a time yields valid UTF-8 pieces whose concatenation
// equals decode() of all ids, for byte-level BPE (characters split across tokens), SentencePiece
// byte fallback (<0xNN> tokens arriving one per step) and Metaspace-style leading spaces.
#include <gtest/gtest.h>

#include "text/unicode.h"
#include "tokenizer_fixtures.h"

namespace strata::text {
namespace {

using testing::escaped;
using testing::shared_tokenizer;

// Streams `ids`, checks that every piece is valid UTF-8, returns the pieces.
std::vector<std::string> stream(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                bool skip_special = false) {
  StreamingDetokenizer detok(tok, skip_special);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(detok.push(id));
  pieces.push_back(detok.flush());
  for (const std::string& p : pieces) EXPECT_TRUE(is_valid_utf8(p)) << escaped(p);
  return pieces;
}

std::string join(const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += p;
  return out;
}

TEST(StreamingDetokenizer, HoldsBackCharactersSplitAcrossByteLevelTokens) {
  const Tokenizer& tok = shared_tokenizer("qwen35");
  // Rare characters (an Egyptian hieroglyph, U+A66E, U+2000B) take two or three tokens each.
  const std::string text =
      "ok \xF0\x93\x80\x80 and \xEA\x99\xAE\xF0\xA0\x80\x8B \xE4\xB8\xAD\xF0\x9F\x99\x82";
  const auto ids = tok.encode(text);
  // Find a token boundary inside a character, so the test proves what it claims.
  bool split_inside_char = false;
  for (size_t i = 1; i < ids.size() && !split_inside_char; ++i) {
    const std::span<const int32_t> head(ids.data(), i);
    split_inside_char = tok.decode(head).ends_with("\xEF\xBF\xBD");
  }
  ASSERT_TRUE(split_inside_char) << "no token boundary falls inside a character";
  const auto pieces = stream(tok, ids);
  EXPECT_EQ(join(pieces), text);
  EXPECT_EQ(join(pieces), tok.decode(ids));
  for (const auto& p : pieces) EXPECT_EQ(p.find("\xEF\xBF\xBD"), std::string::npos);
}

TEST(StreamingDetokenizer, HoldsBackByteFallbackTokensUntilTheCharacterIsComplete) {
  const Tokenizer& tok = shared_tokenizer("gemma3");
  const auto b = [&](int byte) { return *tok.token_id(fmt::format("<0x{:02X}>", byte)); };
  // "あ" = E3 81 82 as three byte tokens, then a normal token.
  const std::vector<int32_t> ids = {*tok.token_id("Hello"), b(0xE3), b(0x81), b(0x82),
                                    *tok.token_id("\xE2\x96\x81world")};
  StreamingDetokenizer detok(tok);
  EXPECT_EQ(detok.push(ids[0]), "Hello");
  EXPECT_EQ(detok.push(ids[1]), "");
  EXPECT_EQ(detok.push(ids[2]), "");
  EXPECT_EQ(detok.push(ids[3]), "\xE3\x81\x82");
  EXPECT_EQ(detok.push(ids[4]), " world");
  EXPECT_EQ(detok.flush(), "");
  EXPECT_EQ(tok.decode(ids), "Hello\xE3\x81\x82 world");
}

TEST(StreamingDetokenizer, FlushReleasesAnIncompleteTail) {
  const Tokenizer& tok = shared_tokenizer("gemma3");
  StreamingDetokenizer detok(tok);
  EXPECT_EQ(detok.push(*tok.token_id("<0xE3>")), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
}

TEST(StreamingDetokenizer, KeepsSpacesThatDependOnThePreviousToken) {
  const auto stories = Tokenizer::load(test::shared_fixture("models/stories260K/stories260K.gguf"));
  const std::string text = "Once upon a time, Lily said \"hi\".\n  Then \xE8\xAA\x9E!";
  const auto ids = stories->encode(text, /*add_special_tokens=*/true);  // BOS first
  const auto pieces = stream(*stories, ids, /*skip_special=*/true);
  EXPECT_EQ(join(pieces), stories->decode(ids, /*skip_special_tokens=*/true));
  EXPECT_EQ(join(pieces), text);
  EXPECT_EQ(pieces[0], "");       // BOS, skipped
  EXPECT_EQ(pieces[1], "Once");   // the dummy-prefix space of the first word is dropped
  EXPECT_EQ(pieces[2], " upon");  // later words keep theirs
}

TEST(StreamingDetokenizer, SkipsSpecialTokensWhenAsked) {
  const Tokenizer& tok = shared_tokenizer("qwen3");
  const auto ids = tok.encode("<|im_start|>assistant\nSure.<|im_end|>");
  EXPECT_EQ(join(stream(tok, ids, /*skip_special=*/true)), "assistant\nSure.");
  EXPECT_EQ(join(stream(tok, ids)), "<|im_start|>assistant\nSure.<|im_end|>");
}

TEST(StreamingDetokenizer, ConcatenationEqualsFullDecodeOnGoldenStrings) {
  for (const char* name : {"qwen3", "llama3", "gemma3"}) {
    const Tokenizer& tok = shared_tokenizer(name);
    const auto cases =
        testing::read_cases(test::test_fixture(std::string("tokenizers/") + name + ".json"));
    for (const auto& c : cases) {
      EXPECT_EQ(join(stream(tok, c.ids)), tok.decode(c.ids))
          << name << " text: \"" << escaped(c.text) << "\"";
    }
  }
}

}  // namespace
}  // namespace strata::text
