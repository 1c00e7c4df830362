// The tokenizer stages one by one, on small hand-made inputs whose expected outputs follow from
// Hugging Face `tokenizers` semantics: split behaviours, pre-tokenizers, added-token matching,
// normalizers, BPE options, decoders, post-processors, config files, UTF-8 repair, threads.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "text/added_tokens.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "tokenizer_fixtures.h"

namespace strata::text {
namespace {

std::vector<std::string> texts(const Pieces& pieces) {
  std::vector<std::string> out;
  for (const Piece& p : pieces) out.push_back(p.token >= 0 ? "#" + p.text : p.text);
  return out;
}

std::vector<std::string> split(const std::string& text, SplitBehavior behavior,
                               bool invert = false) {
  std::vector<std::string> out;
  auto collect = [&](std::string_view word, bool) { out.emplace_back(word); };
  SpanSplitter splitter(text, true, behavior, invert, collect);
  for (size_t at = text.find('-'); at != std::string::npos; at = text.find('-', at + 1)) {
    splitter.add_match(at, at + 1);
  }
  splitter.finish();
  return out;
}

using V = std::vector<std::string>;

TEST(SplitBehavior, MatchesHuggingFaceExamples) {
  // The examples of tokenizers' SplitDelimiterBehavior documentation: "the-final--countdown".
  const std::string s = "the-final--countdown";
  EXPECT_EQ(split(s, SplitBehavior::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split(s, SplitBehavior::kIsolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(s, SplitBehavior::kMergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(s, SplitBehavior::kMergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(s, SplitBehavior::kContiguous), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split(s, SplitBehavior::kRemoved, /*invert=*/true), (V{"-", "-", "-"}));
  EXPECT_EQ(split("", SplitBehavior::kIsolated), V{});
}

std::vector<std::string> pre_tokenize(const std::string& spec, const std::string& text,
                                      bool at_start = true) {
  const auto pre = make_pre_tokenizer(Json::parse(spec));
  std::vector<std::string> out;
  pre->pre_tokenize(text, at_start, [&](std::string_view word, bool) { out.emplace_back(word); });
  return out;
}

TEST(PreTokenizers, SplitRegexWithLookahead) {
  const std::string spec = R"({"type": "Split", "pattern": {"Regex": "\\s+(?!\\S)|\\s+|\\w+"},
                               "behavior": "Isolated", "invert": false})";
  EXPECT_EQ(pre_tokenize(spec, "a   b"), (V{"a", "  ", " ", "b"}));
  const std::string removed = R"({"type": "Split", "pattern": {"Regex": "\\d"},
                                  "behavior": "Removed", "invert": true})";
  EXPECT_EQ(pre_tokenize(removed, "a1b22"), (V{"1", "2", "2"}));
}

TEST(PreTokenizers, ByteLevelMapsBytesAndAddsPrefixSpace) {
  EXPECT_EQ(pre_tokenize(R"({"type": "ByteLevel", "add_prefix_space": true})", "Hi there\n"),
            (V{"\xC4\xA0Hi", "\xC4\xA0there", "\xC4\x8A"}));  // ĠHi Ġthere Ċ
  EXPECT_EQ(pre_tokenize(R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})",
                         "a b\xC3\xA9"),
            (V{"a\xC4\xA0"
               "b\xC3\x83\xC2\xA9"}));  // aĠbÃ©
}

TEST(PreTokenizers, MetaspacePrependSchemes) {
  const std::string always =
      R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"})";
  EXPECT_EQ(pre_tokenize(always, "Hey  friend"), (V{"▁Hey", "▁", "▁friend"}));
  const std::string never = R"({"type": "Metaspace", "prepend_scheme": "never", "split": false})";
  EXPECT_EQ(pre_tokenize(never, "Hey friend"), (V{"Hey▁friend"}));
  // "first": only the span at the start of the input gets the prefix.
  const std::string first = R"({"type": "Metaspace", "prepend_scheme": "first", "split": true})";
  EXPECT_EQ(pre_tokenize(first, "a b", /*at_start=*/true), (V{"▁a", "▁b"}));
  EXPECT_EQ(pre_tokenize(first, "c", /*at_start=*/false), (V{"c"}));
}

TEST(PreTokenizers, DigitsWhitespaceAndSequence) {
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits", "individual_digits": true})", "ab123c"),
            (V{"ab", "1", "2", "3", "c"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits", "individual_digits": false})", "ab123c4"),
            (V{"ab", "123", "c", "4"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Whitespace"})", "Hey man!! How's it going?"),
            (V{"Hey", "man", "!!", "How", "'", "s", "it", "going", "?"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "WhitespaceSplit"})", " a\tb\n c "), (V{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Sequence", "pretokenizers": [
                            {"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": true}]})",
                         "x12 y"),
            (V{"x", "1", "2", "y"}));
}

std::vector<std::string> match_added(std::vector<AddedToken> tokens, const std::string& text) {
  std::vector<std::string> patterns;
  for (const auto& t : tokens) patterns.push_back(t.content);
  AddedTokenMatcher matcher(std::move(tokens), patterns);
  Pieces out;
  matcher.split(Piece{text, -1, true}, out);
  return texts(out);
}

TEST(AddedTokens, LongestMatchFirst) {
  std::vector<AddedToken> tokens = {{1, "<a>"}, {2, "<a><b>"}, {3, "<b>"}};
  EXPECT_EQ(match_added(tokens, "x<a><b>y<b><a>"), (V{"x", "#<a><b>", "y", "#<b>", "#<a>"}));
}

TEST(AddedTokens, LstripAndRstripSwallowWhitespace) {
  AddedToken mask{5, "<mask>"};
  mask.lstrip = true;
  EXPECT_EQ(match_added({mask}, "a  <mask> b"), (V{"a", "#  <mask>", " b"}));
  mask.lstrip = false;
  mask.rstrip = true;
  EXPECT_EQ(match_added({mask}, "a  <mask> \n b"), (V{"a  ", "#<mask> \n ", "b"}));
}

TEST(AddedTokens, SingleWordOnlyMatchesOutsideWords) {
  AddedToken word{9, "yes"};
  word.single_word = true;
  EXPECT_EQ(match_added({word}, "yes, eyes yesterday yes"),
            (V{"#yes", ", eyes yesterday ", "#yes"}));
}

TEST(AddedTokens, NormalizedTokensMatchAfterNormalization) {
  const auto tok = Tokenizer::from_json(Json::parse(R"({
    "added_tokens": [{"id": 2, "content": "hello", "special": false, "normalized": true},
                     {"id": 3, "content": "HI", "special": false, "normalized": false}],
    "normalizer": {"type": "Lowercase"},
    "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "hello": 2, "HI": 3}, "merges": []}})"));
  EXPECT_EQ(tok->encode("HELLO"), std::vector<int32_t>{2});          // lowercased, then matched
  EXPECT_EQ(tok->encode("HI hi"), (std::vector<int32_t>{3, 0, 1}));  // " " is not a token
}

std::string normalize(const std::string& spec, std::string text) {
  make_normalizer(Json::parse(spec))->normalize(text);
  return text;
}

TEST(Normalizers, UnicodeFormsCaseAndRewrites) {
  EXPECT_EQ(normalize(R"({"type": "NFC"})", "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(normalize(R"({"type": "NFD"})", "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalize(R"({"type": "NFKC"})", "\xEF\xAC\x81 \xE2\x91\xA0"), "fi 1");  // ﬁ ①
  EXPECT_EQ(normalize(R"({"type": "NFKD"})", "\xC2\xB2"), "2");
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "ÀB\xCE\xA3"), "àb\xCF\x83");
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": true, "strip_right": false})", " \t a b "),
            "a b ");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})",
                      "a   b  c d"),
            "a b c d");
  EXPECT_EQ(normalize(R"({"type": "Sequence", "normalizers": [
                         {"type": "Prepend", "prepend": "▁"},
                         {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})",
                      "a b"),
            "▁a▁b");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "▁"})", ""), "");
  EXPECT_EQ(normalize(R"({"type": "StripAccents"})", "e\xCC\x81t\xC3\xA9"), "et\xC3\xA9");
}

std::unique_ptr<Tokenizer> tiny_bpe(const std::string& model_fields) {
  return Tokenizer::from_json(Json::parse(
      R"({"decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
          "model": {"type": "BPE", )" +
      model_fields + "}}"));
}

TEST(BpeModel, MergesAsStringsOrPairsAgree) {
  const std::string vocab = R"("vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5})";
  const auto strings = tiny_bpe(vocab + R"(, "merges": ["b c", "a b", "ab c"])");
  const auto pairs = tiny_bpe(vocab + R"(, "merges": [["b", "c"], ["a", "b"], ["ab", "c"]])");
  // "b c" has the better rank, so "abc" is a + bc (there is no "a bc" merge).
  EXPECT_EQ(strings->encode("abc"), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(pairs->encode("abc"), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(strings->encode("abab"), (std::vector<int32_t>{3, 3}));
}

TEST(BpeModel, IgnoreMergesEmitsVocabularyWordsWhole) {
  const std::string vocab = R"("vocab": {"a": 0, "b": 1, "c": 2, "bc": 3, "abc": 4})";
  EXPECT_EQ(tiny_bpe(vocab + R"(, "merges": ["b c"])")->encode("abc"),
            (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(tiny_bpe(vocab + R"(, "merges": ["b c"], "ignore_merges": true)")->encode("abc"),
            std::vector<int32_t>{4});
}

TEST(BpeModel, ByteFallbackUnkAndFuseUnk) {
  const std::string vocab =
      R"("vocab": {"<unk>": 0, "a": 1, "<0xC3>": 2, "<0xA9>": 3}, "merges": [])";
  const auto fallback = tiny_bpe(vocab + R"(, "unk_token": "<unk>", "byte_fallback": true)");
  EXPECT_EQ(fallback->encode("a\xC3\xA9"), (std::vector<int32_t>{1, 2, 3}));  // é -> C3 A9
  EXPECT_EQ(fallback->decode(fallback->encode("a\xC3\xA9")), "a\xC3\xA9");
  EXPECT_EQ(fallback->encode("\xC3\xB1"), std::vector<int32_t>{0});  // ñ: no <0xB1> -> unk
  const auto unk = tiny_bpe(vocab + R"(, "unk_token": "<unk>")");
  EXPECT_EQ(unk->encode("xya"), (std::vector<int32_t>{0, 0, 1}));
  const auto fused = tiny_bpe(vocab + R"(, "unk_token": "<unk>", "fuse_unk": true)");
  EXPECT_EQ(fused->encode("xyaz"), (std::vector<int32_t>{0, 1, 0}));
  const auto dropped = tiny_bpe(vocab);  // no unk token: unknown characters vanish
  EXPECT_EQ(dropped->encode("xay"), std::vector<int32_t>{1});
}

TEST(BpeModel, ContinuingSubwordPrefixAndSuffix) {
  const auto tok = Tokenizer::from_json(Json::parse(R"({
    "model": {"type": "BPE", "continuing_subword_prefix": "##",
              "vocab": {"a": 0, "##b": 1, "##c": 2, "ab": 3, "abc": 4},
              "merges": ["a ##b", "ab ##c"]}})"));
  EXPECT_EQ(tok->encode("abc"), std::vector<int32_t>{4});
  EXPECT_EQ(tok->encode("ac"), (std::vector<int32_t>{0, 2}));
}

std::string decode_with(const std::string& spec, std::vector<std::string> tokens) {
  make_decoder(Json::parse(spec))->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

TEST(Decoders, FollowHuggingFaceSemantics) {
  // Invalid byte runs: one U+FFFD per byte.
  EXPECT_EQ(decode_with(R"({"type": "ByteFallback"})", {"<0xE3>", "<0x81>", "x", "<0x61>"}),
            "\xEF\xBF\xBD\xEF\xBF\xBDxa");
  EXPECT_EQ(decode_with(R"({"type": "ByteFallback"})", {"<0xE3>", "<0x81>", "<0x82>"}),
            "\xE3\x81\x82");
  // ByteLevel reads the bytes as lossy UTF-8 (one U+FFFD per maximal invalid subpart).
  // "ãģ" stands for the bytes E3 81, an incomplete character.
  EXPECT_EQ(decode_with(R"({"type": "ByteLevel"})", {"\xC4\xA0hi", "\xC3\xA3\xC4\xA3"}),
            " hi\xEF\xBF\xBD");
  // A token with characters outside the byte table (an added token) passes through.
  EXPECT_EQ(decode_with(R"({"type": "ByteLevel"})", {"a", "<\xE2\x96\x81>"}), "a<\xE2\x96\x81>");
  EXPECT_EQ(
      decode_with(R"({"type": "Strip", "content": " ", "start": 1, "stop": 1})", {"  a ", " b"}),
      " ab");
  EXPECT_EQ(decode_with(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"})",
                        {"▁Hey", "▁friend"}),
            "Hey friend");
  EXPECT_EQ(decode_with(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never"})",
                        {"▁Hey", "▁friend"}),
            " Hey friend");
  EXPECT_EQ(decode_with(R"({"type": "Replace", "pattern": {"String": "▁"}, "content": " "})",
                        {"▁a▁", "b"}),
            " a b");
  EXPECT_EQ(decode_with(R"({"type": "BPEDecoder", "suffix": "</w>"})", {"hel", "lo</w>", "x</w>"}),
            "hello x");
}

TEST(PostProcessors, TemplateAddsBosAndEos) {
  const auto tok = Tokenizer::from_json(Json::parse(R"({
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                         "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
    "added_tokens": [{"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1, "</s>": 2}, "merges": []}})"),
                                        Json{{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  EXPECT_EQ(tok->encode("a", true), (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(tok->encode("a", false), std::vector<int32_t>{0});
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 0, 2}, /*skip_special_tokens=*/true), "a");
}

TEST(TokenizerConfig, AddBosTokenAndGenerationConfigEos) {
  const Json tj = Json::parse(R"({
    "added_tokens": [{"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true},
                     {"id": 3, "content": "<eot>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  const Json config = Json::parse(R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>",
      "add_bos_token": true,
      "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  const auto tok = Tokenizer::from_json(tj, config, Json{{"eos_token_id", {3, 2}}});
  EXPECT_EQ(tok->encode("a", true), (std::vector<int32_t>{1, 0}));
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->eos_ids(), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tok->chat_template(), "D");
  EXPECT_EQ(tok->token_id("<eot>"), 3);
  EXPECT_FALSE(tok->token_id("<nope>").has_value());
  EXPECT_EQ(tok->vocab_size(), 4);
}

TEST(TokenizerConfig, ModelDirectoriesReadTheirConfigFiles) {
  const auto qwen3 = Tokenizer::load(test::shared_fixture("tokenizers/qwen3"));
  EXPECT_EQ(qwen3->token_id("<|im_end|>"), 151645);
  EXPECT_EQ(qwen3->token_id("<think>"), 151667);
  EXPECT_TRUE(qwen3->is_special(151645));
  EXPECT_FALSE(qwen3->is_special(151667));  // <think> stays visible to the reasoning parser
  EXPECT_FALSE(qwen3->bos_id().has_value());
  EXPECT_FALSE(qwen3->adds_bos());
  const auto eos = qwen3->eos_ids();  // tokenizer_config + generation_config
  EXPECT_NE(std::find(eos.begin(), eos.end(), 151645), eos.end());
  EXPECT_NE(std::find(eos.begin(), eos.end(), 151643), eos.end());
  EXPECT_NE(qwen3->chat_template().find("<|im_start|>"), std::string::npos);

  const auto gemma = Tokenizer::load(test::shared_fixture("tokenizers/gemma3/tokenizer.json"));
  EXPECT_EQ(gemma->bos_id(), 2);
  EXPECT_TRUE(gemma->adds_bos());
  EXPECT_EQ(gemma->encode("Hello", true), (std::vector<int32_t>{2, 9259}));
}

TEST(Utf8, LossyRepairMatchesPythonReplace) {
  // Expected values: bytes.decode("utf-8", errors="replace") in Python.
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_lossy("a\xE3\x81"), "a" + r);  // truncated: one replacement
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x99z"), r + "z");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), r + r + r);          // surrogate: three
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), r + r);                  // overlong
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(utf8_lossy("\xE2\x82\xAC\xFF"), "\xE2\x82\xAC" + r);
  EXPECT_TRUE(is_valid_utf8("\xF0\x9F\x99\x82"));
  EXPECT_FALSE(is_valid_utf8("\xF0\x9F\x99"));
}

TEST(Tokenizer, InvalidUtf8InputIsReadAsReplacementCharacters) {
  const Tokenizer& tok = testing::shared_tokenizer("qwen3");
  EXPECT_EQ(tok.encode("a\xFF"
                       "b"),
            tok.encode("a\xEF\xBF\xBD"
                       "b"));
}

TEST(Tokenizer, EncodesConcurrentlyWithTheSameResults) {
  const Tokenizer& tok = testing::shared_tokenizer("llama3");
  const auto cases = testing::read_cases(test::test_fixture("tokenizers/llama3.json"));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = t; i < cases.size(); i += 2) {
          const auto& c = cases[i];
          if (tok.encode(c.text, c.add_special_tokens) != c.ids) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace strata::text
