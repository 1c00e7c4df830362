// Token masks against the brute-force check (every token's bytes walked through the automaton on
// its own), on a small hand-made vocabulary and on the real Qwen3.5 tokenizer at states reached by
// real JSON texts; and the special tokens a vocabulary lets a constraint write.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "test_util.h"
#include "text/structured/automaton.h"
#include "text/structured/json_schema.h"
#include "text/structured/token_mask.h"
#include "text/tokenizer.h"

namespace strata::text::structured {
namespace {

using OJ = nlohmann::ordered_json;

// Every token's bytes from `text`'s state, checked one by one with a fresh automaton.
std::vector<uint32_t> brute_force(const Grammar& g, const Vocabulary& v, std::string_view text) {
  Automaton a(g);
  const uint32_t s = a.walk(a.start(), text);
  std::vector<uint32_t> words(v.words(), 0);
  for (size_t id = 0; id < v.size(); ++id) {
    const auto i = static_cast<int32_t>(id);
    if (v.excluded(i) || v.bytes(i).empty()) continue;
    if (a.walk(s, v.bytes(i)) != Automaton::kDead) words[id / 32] |= 1u << (id % 32);
  }
  return words;
}

std::vector<uint32_t> masked(TokenConstraint& c, std::string_view text) {
  std::vector<uint32_t> words(c.vocabulary().words());
  c.mask(c.advance(c.start(), text), words);
  return words;
}

const char* kSchema = R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150},
    "tags":{"type":"array","items":{"enum":["a","bc","def"]},"maxItems":3},
    "when":{"type":"string","format":"date"}},"required":["name","age"]})";

TEST(TokenMask, EqualsTheBruteForceCheckOnASmallVocabulary) {
  std::vector<std::string> bytes = {"{",  "}",   "\"", "\"name", "\":", " ", "\"a", "bc\"",  "12",
                                    "1",  ",",   "[",  "]",      "\"age\":", "x\"", "\"\"",  "",
                                    "é", "\xC3", "\xA9", "2024-", "01-", "31\"}", "\\n", "null"};
  std::vector<bool> excluded(bytes.size(), false);
  excluded[3] = true;  // a special token: never allowed
  auto vocab = std::make_shared<const Vocabulary>(bytes, excluded);
  const Grammar g = compile_json_schema(OJ::parse(kSchema));
  TokenConstraint c(g, vocab);
  for (const char* text : {"", "{", "{\"name\":\"", "{\"name\":\"ab", "{\"name\":\"x\",\"age\":1",
                           "{\"name\":\"x\",\"age\":1,\"tags\":[", "{\"name\":\"\xC3",
                           "{\"name\":\"x\",\"age\":1,\"when\":\"2024-"}) {
    const std::vector<uint32_t> expected = brute_force(g, *vocab, text);
    EXPECT_EQ(masked(c, text), expected) << text;
    EXPECT_EQ(masked(c, text), expected) << text << " (cached)";
  }
  EXPECT_EQ(masked(c, "{")[0] & (1u << 3), 0u);  // the excluded token
}

TEST(TokenMask, EqualsTheBruteForceCheckOnTheQwen35Tokenizer) {
  const std::string path = test::shared_fixture("tokenizers/qwen35/tokenizer.json");
  auto tokenizer = Tokenizer::load(path);
  auto vocab = Vocabulary::from_tokenizer(*tokenizer);
  // Bytes the tokenizer itself decodes to (ids of real text round-trip through the vocabulary).
  const std::string sample = "{\"name\": \"Zoë\", \"age\": 42}";
  std::string joined;
  for (int32_t id : tokenizer->encode(sample)) joined += vocab->bytes(id);
  EXPECT_EQ(joined, sample);
  const Grammar g = compile_json_schema(OJ::parse(kSchema));
  TokenConstraint c(g, vocab);
  // States along a valid text: every prefix of it.
  const std::string text =
      "{\"name\": \"Zo\xC3\xAB k\", \"age\": 42, \"tags\": [\"bc\", \"a\"], \"when\": \"2024-02-29\"}";
  std::mt19937 rng(7);
  for (int k = 0; k < 8; ++k) {
    const size_t cut = std::uniform_int_distribution<size_t>(0, text.size())(rng);
    const std::string prefix = text.substr(0, cut);
    EXPECT_EQ(masked(c, prefix), brute_force(g, *vocab, prefix)) << prefix;
  }
}

// Special tokens are never written by a constraint, except those named writable (Mistral's [ARGS]
// inside a tool call), which keep their text.
TEST(Vocabulary, KeepsOnlyTheWritableSpecialTokens) {
  const auto tokenizer = Tokenizer::from_json(Json::parse(R"({
    "added_tokens": [{"id": 3, "content": "[TOOL_CALLS]", "special": true},
                     {"id": 4, "content": "[ARGS]", "special": true},
                     {"id": 5, "content": "</s>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "[": 2, "[TOOL_CALLS]": 3, "[ARGS]": 4,
                                       "</s>": 5}, "merges": []}})"));
  const auto plain = Vocabulary::from_tokenizer(*tokenizer);
  for (int32_t id : {3, 4, 5}) EXPECT_TRUE(plain->excluded(id)) << id;
  EXPECT_FALSE(plain->excluded(0));
  const auto mistral = Vocabulary::from_tokenizer(*tokenizer, {"[ARGS]", "[CALL_ID]"});
  EXPECT_FALSE(mistral->excluded(4));
  EXPECT_EQ(mistral->bytes(4), "[ARGS]");
  EXPECT_TRUE(mistral->excluded(3));
  EXPECT_TRUE(mistral->excluded(5));
  // A grammar that writes "[ARGS]" may then take the token.
  Grammar g;
  g.set_root(g.literal("a[ARGS]b"));
  TokenConstraint c(g, mistral);
  std::vector<uint32_t> words(c.vocabulary().words());
  c.mask(c.advance(c.start(), "a"), words);
  EXPECT_EQ(words[0], (1u << 2) | (1u << 4));  // "[" or "[ARGS]"
}

}  // namespace
}  // namespace strata::text::structured
