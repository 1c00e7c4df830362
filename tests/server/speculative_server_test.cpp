// Speculative decoding through the server: with the server's default on (n-gram), a greedy chat or
// completion answers exactly as with the request's "strata": {"speculative": "off"}, whole or
// streamed, with stop strings and max_tokens; the response's strata.speculative reports what it
// did; a bad value is a 400 naming the field. Self-speculation answers as plain too, and the
// Messages and Responses routes take the same choice.
#include <gtest/gtest.h>

#include "hybrid_server_model.h"
#include "test_server.h"

namespace strata {
namespace {

using test::hybrid_with_qwen3_vocab;

class ServerSpeculative : public ::testing::Test {
 protected:
  ServerSpeculative()
      : server_(hybrid_with_qwen3_vocab(checkpoint_), {},
                runtime::EngineOptions{.context_size = 512,
                                       .speculative = {runtime::SpeculativeParams::Method::kNgram, 5}}) {}

  static Json body(Json extra = Json::object()) {
    Json fields = {{"max_tokens", 40},
                   {"ignore_eos", true},
                   {"temperature", 0},
                   {"chat_template_kwargs", {{"enable_thinking", false}}}};
    fields.update(extra);
    return test::chat_body("Say a b c a b c a b c a b c again and again: a b c a b c", fields);
  }
  Json chat(const Json& b) {
    const test::HttpResult r = server_.post("/v1/chat/completions", b);
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body);
  }

  model::SyntheticCheckpoint checkpoint_;
  test::TestServer server_;
};

const Json kOff = {{"strata", {{"speculative", "off"}}}};

TEST_F(ServerSpeculative, GreedyChatAnswersAsPlainAndReportsItsDrafts) {
  const Json plain = chat(body(kOff));
  const Json spec = chat(body());
  EXPECT_EQ(spec["choices"][0]["message"]["content"], plain["choices"][0]["message"]["content"]);
  EXPECT_EQ(spec["usage"]["completion_tokens"], 40);
  EXPECT_EQ(spec["choices"][0]["finish_reason"], plain["choices"][0]["finish_reason"]);
  EXPECT_FALSE(plain.contains("strata") && plain["strata"].contains("speculative")) << plain.dump();
  const Json& s = spec["strata"]["speculative"];
  ASSERT_TRUE(s.is_object()) << spec.dump();
  EXPECT_EQ(s["method"], "ngram");
  EXPECT_GT(s["drafted"].get<int64_t>(), 0);
  EXPECT_LE(s["accepted"].get<int64_t>(), s["drafted"].get<int64_t>());
  // The object form chooses the drafts per step and whether they adapt; a seeded sampled request
  // speculates too and answers as it does plainly.
  const Json object = chat(body({{"strata", {{"speculative", {{"method", "ngram"}, {"draft_max", 2}, {"adaptive", false}}}}}}));
  EXPECT_EQ(object["choices"][0]["message"]["content"], plain["choices"][0]["message"]["content"]);
  const Json sampled_plain = chat(body({{"temperature", 0.8}, {"seed", 3}, {"strata", {{"speculative", "off"}}}}));
  const Json sampled = chat(body({{"temperature", 0.8}, {"seed", 3}}));
  EXPECT_EQ(sampled["choices"][0]["message"]["content"], sampled_plain["choices"][0]["message"]["content"]);
  EXPECT_EQ(sampled["strata"]["speculative"]["method"], "ngram") << sampled.dump();
}

TEST_F(ServerSpeculative, StreamedChatAndStopStringsAnswerAsPlain) {
  const Json plain = chat(body(kOff));
  const std::string text = plain["choices"][0]["message"]["content"];
  ASSERT_GT(text.size(), 12u);
  // Streamed: the same text, the report on the last chunk.
  const test::HttpResult r = server_.post("/v1/chat/completions", body({{"stream", true}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const test::Streamed streamed = test::read_stream(r);
  EXPECT_TRUE(streamed.done);
  EXPECT_EQ(streamed.content, text);
  EXPECT_NE(r.body.find("\"speculative\":{\"method\":\"ngram\""), std::string::npos) << r.body;
  // A stop string from the middle of the answer ends both at the same place.
  const std::string stop = text.substr(text.size() / 2, 3);
  const Json plain_stop = chat(body({{"stop", stop}, {"strata", {{"speculative", "off"}}}}));
  const Json spec_stop = chat(body({{"stop", stop}}));
  EXPECT_EQ(spec_stop["choices"][0]["message"]["content"], plain_stop["choices"][0]["message"]["content"]);
  EXPECT_EQ(spec_stop["choices"][0]["finish_reason"], "stop");
  // max_tokens exactly.
  const Json short_spec = chat(body({{"max_tokens", 7}}));
  EXPECT_EQ(short_spec["usage"]["completion_tokens"], 7);
}

TEST_F(ServerSpeculative, CompletionsReportTooAndBadValuesAre400) {
  const Json b = {{"prompt", "a b c a b c a b c a b c a b c"}, {"max_tokens", 24}, {"temperature", 0}};
  Json off = b;
  off["strata"] = {{"speculative", "off"}};
  const Json plain = Json::parse(server_.post("/v1/completions", off).body);
  const Json spec = Json::parse(server_.post("/v1/completions", b).body);
  EXPECT_EQ(spec["choices"][0]["text"], plain["choices"][0]["text"]);
  EXPECT_EQ(spec["strata"]["speculative"]["method"], "ngram") << spec.dump();
  // ("draft" needs the server's draft model: this one has none.)
  for (const Json& bad : {Json{{"speculative", "draft-model"}}, Json{{"speculative", 3}},
                          Json{{"speculative", {{"draft_max", 0}}}}, Json{{"speculative", "draft"}}}) {
    Json request = b;
    request["strata"] = bad;
    const test::HttpResult r = server_.post("/v1/completions", request);
    EXPECT_EQ(r.status, 400) << bad.dump() << " " << r.body;
    EXPECT_NE(r.body.find("strata.speculative"), std::string::npos) << r.body;
  }
}

// Self-speculation: the model's own first layers draft; the answer is plain decoding's (drafting
// every step: adapting, a CPU's verify steps cost too much to draft at all). A layer count that
// leaves none of the model's layers out is a 400 naming the field.
TEST_F(ServerSpeculative, SelfDraftsAnswerAsPlainAndLayersMustBeFewerThanTheModels) {
  const Json plain = chat(body(kOff));
  for (const Json& self : {Json{{"method", "self"}, {"adaptive", false}},
                           Json{{"method", "self"}, {"layers", 3}, {"adaptive", false}}}) {
    const Json spec = chat(body({{"strata", {{"speculative", self}}}}));
    EXPECT_EQ(spec["choices"][0]["message"]["content"], plain["choices"][0]["message"]["content"])
        << self.dump();
    EXPECT_EQ(spec["strata"]["speculative"]["method"], "self") << spec.dump();
    EXPECT_GT(spec["strata"]["speculative"]["drafted"].get<int64_t>(), 0) << spec.dump();
  }
  const int64_t layers = 4;  // tiny_hybrid_config's
  for (const int64_t bad : {layers, layers + 1, int64_t{0}}) {
    const Json self = {{"method", "self"}, {"layers", bad}};
    const test::HttpResult r =
        server_.post("/v1/chat/completions", body({{"strata", {{"speculative", self}}}}));
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
    EXPECT_NE(r.body.find("strata.speculative.layers"), std::string::npos) << r.body;
  }
}

// The Anthropic Messages and OpenAI Responses routes take the same strata.speculative choice:
// drafting answers as "off" does, and a method that is none is a 400 naming the field.
TEST_F(ServerSpeculative, MessagesAndResponsesTakeTheChoiceToo) {
  const std::string prompt = "Say a b c a b c a b c a b c again and again: a b c a b c";
  const Json messages = {{"model", "qwen3-test"},
                         {"max_tokens", 40},
                         {"temperature", 0},
                         {"messages", {{{"role", "user"}, {"content", prompt}}}}};
  const Json responses = {{"model", "qwen3-test"}, {"max_output_tokens", 40}, {"temperature", 0}, {"input", prompt}};
  const Json drafting = {{"method", "ngram"}, {"draft_max", 3}, {"adaptive", false}};
  for (const auto& [path, base] : {std::pair{"/v1/messages", messages}, std::pair{"/v1/responses", responses}}) {
    auto with = [&](const Json& choice) {
      Json b = base;
      b["strata"] = {{"speculative", choice}};
      return b;
    };
    const test::HttpResult off = server_.post(path, with("off"));
    const test::HttpResult on = server_.post(path, with(drafting));
    ASSERT_EQ(off.status, 200) << path << ": " << off.body;
    ASSERT_EQ(on.status, 200) << path << ": " << on.body;
    const Json a = Json::parse(off.body), b = Json::parse(on.body);
    const char* answer = std::string(path) == "/v1/messages" ? "content" : "output";
    auto texts = [&](const Json& r) {
      std::string all;
      for (const Json& item : r[answer]) {
        if (item.contains("text")) all += item["text"].get<std::string>();
        if (item.contains("content"))
          for (const Json& part : item["content"])
            if (part.contains("text")) all += part["text"].get<std::string>();
      }
      return all;
    };
    EXPECT_FALSE(texts(b).empty()) << path << ": " << on.body;
    EXPECT_EQ(texts(b), texts(a)) << path;
    const test::HttpResult bad = server_.post(path, with("fast"));
    EXPECT_EQ(bad.status, 400) << path << ": " << bad.body;
    EXPECT_NE(bad.body.find("strata.speculative"), std::string::npos) << path << ": " << bad.body;
  }
}

}  // namespace
}  // namespace strata
