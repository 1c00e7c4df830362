// Admission and how a request ends: a client that waits for each answer is never refused, many
// clients at the limit are never refused spuriously, a refusal costs no rendering and says when
// to retry, and an engine failure is an error status (or an SSE error event), never a 200.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "test_server.h"

namespace strata {
namespace {

using test::chat_body;
using test::HttpConnection;
using test::HttpResult;
using test::read_stream;
using test::TestServer;

TEST(Admission, ASequentialClientIsNeverRefusedAtConcurrencyOne) {
  server::ServerOptions options;
  options.max_concurrency = 1;
  TestServer s("ok", options);
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    const HttpResult r = s.post("/v1/chat/completions", chat_body("Hi"));
    refused += r.status == 503;
    ASSERT_TRUE(r.status == 200 || r.status == 503) << r.body;
  }
  EXPECT_EQ(refused, 0);
}

TEST(Admission, SixtyFourClientsAtTheLimitAreNeverRefused) {
  server::ServerOptions options;
  options.max_concurrency = 64;
  TestServer s("ok", options);
  std::atomic<int> refused{0}, answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 64; ++c)
    clients.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        const HttpResult r = s.post("/v1/chat/completions", chat_body("Hi"));
        refused += r.status == 503;
        answered += r.status == 200;
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(answered, 64 * 5);
}

TEST(Admission, PastTheLimitA503WithRetryAfterCostsNoRendering) {
  server::ServerOptions options;
  options.max_concurrency = 1;
  test::ReplyModel::Script endless;
  endless.endless = true;
  endless.step_delay = std::chrono::milliseconds(2);
  TestServer s("", options, endless, /*context_size=*/4096);
  HttpConnection busy(s.port());
  Json body = chat_body("Go on", {{"stream", true}});
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  busy.send_request("POST", "/v1/chat/completions", body.dump());
  busy.read_until(" la");
  // Qwen3's template raises on a conversation with no user message: rendered, this would be a
  // 400. Refused before rendering, it is the 503.
  const HttpResult r =
      s.post("/v1/chat/completions",
             Json{{"messages", {{{"role", "system"}, {"content", "only a system prompt"}}}}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.headers.at("retry-after"), "1");
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "server_busy");
}

TEST(Admission, TopPZeroMeansGreedyAndIsAnswered) {
  TestServer s("ok");
  const HttpResult r = s.post("/v1/chat/completions", chat_body("Hi", {{"top_p", 0}}));
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(Admission, AnEngineFailureIsA500OrAnSseErrorEventNeverA200) {
  test::ReplyModel::Script failing;
  failing.fail = true;
  TestServer s("never", {}, failing);
  const HttpResult whole = s.post("/v1/chat/completions", chat_body("Hi"));
  EXPECT_EQ(whole.status, 500) << whole.body;
  EXPECT_EQ(Json::parse(whole.body)["error"]["type"], "server_error");

  const HttpResult streamed = s.post("/v1/chat/completions", chat_body("Hi", {{"stream", true}}));
  EXPECT_EQ(streamed.status, 200);  // the headers went before the failure
  const std::vector<std::string> events = test::sse_data(streamed.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(Json::parse(events[events.size() - 2])["error"]["type"], "server_error");
  EXPECT_EQ(s.health()["requests"]["failed"], 2);
}

}  // namespace
}  // namespace strata
