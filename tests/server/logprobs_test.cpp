// Log-probabilities through the server, with the ReplyModel: its logits are one-hot (100 at the
// scripted token, 0 elsewhere), so every value is exact: the sampled token has log-probability 0
// (log-softmax: 100 - log(e^100 + (V-1)·e^0) rounds to 100 in float), every other token -100, and
// the best alternatives after the sampled one are the lowest other ids.
#include <gtest/gtest.h>

#include "test_server.h"

namespace strata {
namespace {

using test::chat_body;
using test::qwen3_tokenizer;
using test::read_stream;
using test::Streamed;
using test::TestServer;

std::string piece(int32_t id) { return qwen3_tokenizer().decode(std::span<const int32_t>(&id, 1)); }

Json bytes_of(const std::string& s) {
  Json bytes = Json::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

int32_t best_other(int32_t id) { return id == 0 ? 1 : 0; }  // ties go to the lowest id

// The chat entry for a sampled token with `top` alternatives.
Json chat_entry(int32_t id, int top) {
  auto token = [](int32_t t, double logprob) {
    return Json{{"token", piece(t)}, {"logprob", logprob}, {"bytes", bytes_of(piece(t))}};
  };
  Json entry = token(id, 0.0);
  entry["top_logprobs"] = Json::array();
  if (top >= 1) entry["top_logprobs"].push_back(token(id, 0.0));
  if (top >= 2) entry["top_logprobs"].push_back(token(best_other(id), -100.0));
  return entry;
}

TEST(ServerLogprobs, ChatReportsEveryTokenWithItsAlternatives) {
  const std::string reply = "<think>\nHmm.\n</think>\n\nHello there!";
  const std::vector<int32_t> ids = qwen3_tokenizer().encode(reply);
  TestServer s(reply);
  const Json j = Json::parse(
      s.post("/v1/chat/completions", chat_body("Hi", {{"logprobs", true}, {"top_logprobs", 2}}))
          .body);
  const Json& logprobs = j["choices"][0]["logprobs"];
  ASSERT_TRUE(logprobs.is_object()) << j.dump();
  EXPECT_TRUE(logprobs["refusal"].is_null());
  const Json& content = logprobs["content"];
  ASSERT_EQ(content.size(), ids.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(content[i], chat_entry(ids[i], 2)) << i;

  // logprobs without top_logprobs: no alternatives; without logprobs: null.
  const Json plain =
      Json::parse(s.post("/v1/chat/completions", chat_body("Hi", {{"logprobs", true}})).body);
  ASSERT_EQ(plain["choices"][0]["logprobs"]["content"].size(), ids.size());
  EXPECT_EQ(plain["choices"][0]["logprobs"]["content"][0], chat_entry(ids[0], 0));
  const Json none = Json::parse(s.post("/v1/chat/completions", chat_body("Hi")).body);
  EXPECT_TRUE(none["choices"][0]["logprobs"].is_null());
}

TEST(ServerLogprobs, StreamedChunksCarryTheSameEntriesOnceEachInOrder) {
  // Reasoning tags and a stop string hold text back; their tokens' entries come with the next
  // text, and the tokens wholly past the stop ("END is") are dropped.
  const std::string reply = "<think>\nHmm.\n</think>\n\nHello there! The END is near.";
  const std::vector<int32_t> ids = qwen3_tokenizer().encode(reply);
  TestServer s(reply);
  const Json body =
      chat_body("Hi", {{"logprobs", true}, {"top_logprobs", 1}, {"stop", {"END is"}}});
  const Json whole = Json::parse(s.post("/v1/chat/completions", body).body);
  Json streaming = body;
  streaming["stream"] = true;
  const Streamed st = read_stream(s.post("/v1/chat/completions", streaming));

  const Json& entries = whole["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(st.logprobs, entries);
  EXPECT_EQ(st.content, whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(st.content, "Hello there! The ");
  // The entries are the tokens that start before the stop string, in order.
  const size_t cut = reply.find("END is");
  size_t kept = 0;
  while (kept < ids.size() &&
         qwen3_tokenizer().decode(std::span<const int32_t>(ids.data(), kept)).size() < cut)
    ++kept;
  ASSERT_EQ(entries.size(), kept) << entries.dump() << " ids " << Json(ids).dump();
  EXPECT_LT(kept, static_cast<size_t>(whole["usage"]["completion_tokens"].get<int>()));
  for (size_t i = 0; i < kept; ++i) EXPECT_EQ(entries[i], chat_entry(ids[i], 1)) << i;
  // Each chunk that brings text brings the entries of its tokens; none is empty.
  for (const Json& chunk : st.chunks) {
    if (chunk["choices"].empty()) continue;
    const Json& lp = chunk["choices"][0]["logprobs"];
    if (!lp.is_null()) {
      EXPECT_FALSE(lp["content"].empty());
    }
  }
}

TEST(ServerLogprobs, CompletionsListTokensLogprobsAlternativesAndOffsets) {
  TestServer s("one two three");
  const std::vector<int32_t> ids = qwen3_tokenizer().encode("one two three");
  ASSERT_EQ(ids.size(), 3u);
  const Json j = Json::parse(
      s.post("/v1/completions", {{"prompt", "Count:"}, {"max_tokens", 3}, {"logprobs", 2}}).body);
  const Json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({"one", " two", " three"}));
  EXPECT_EQ(lp["token_logprobs"], Json({0.0, 0.0, 0.0}));
  ASSERT_EQ(lp["top_logprobs"].size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(lp["top_logprobs"][i],
              Json({{piece(ids[i]), 0.0}, {piece(best_other(ids[i])), -100.0}}));
  EXPECT_EQ(lp["text_offset"], Json({0, 3, 7}));

  // Streamed: each chunk's logprobs cover its text.
  const Streamed st = read_stream(
      s.post("/v1/completions",
             {{"prompt", "Count:"}, {"max_tokens", 3}, {"logprobs", 0}, {"stream", true}}));
  Json tokens = Json::array(), offsets = Json::array();
  for (const Json& chunk : st.chunks) {
    const Json& l = chunk["choices"][0]["logprobs"];
    if (l.is_null()) continue;
    EXPECT_EQ(l["tokens"].size(), l["top_logprobs"].size());
    for (const auto& t : l["tokens"]) tokens.push_back(t);
    for (const auto& o : l["text_offset"]) offsets.push_back(o);
  }
  EXPECT_EQ(tokens, Json({"one", " two", " three"}));
  EXPECT_EQ(offsets, Json({0, 3, 7}));

  const auto error = [&](const Json& body) {
    const test::HttpResult r = s.post("/v1/completions", body);
    EXPECT_EQ(r.status, 400) << r.body;
    return Json::parse(r.body)["error"]["param"];
  };
  EXPECT_EQ(error({{"prompt", "x"}, {"logprobs", 6}}), "logprobs");
  EXPECT_EQ(error({{"prompt", "x"}, {"logprobs", 1}, {"echo", true}}), "logprobs");
}

}  // namespace
}  // namespace strata
