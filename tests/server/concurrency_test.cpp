// Many clients at once (a CPU-sized version of the 64-client load): streaming clients that arrive
// together run together, each gets exactly the answer it gets alone, and none waits for another's
// whole generation before its first token; with too few KV blocks, clients are preempted and
// still get their solo answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "../model/tiny_configs.h"
#include "formats/safetensors.h"
#include "model/synthetic.h"
#include "hybrid_server_model.h"
#include "serve_process.h"
#include "test_server.h"

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

using test::hybrid_with_qwen3_vocab;

Json request_body(int i) {
  return test::chat_body(fmt::format("Client {} asks: what comes after {}?", i, i * 37),
                         {{"max_tokens", 24},
                          {"ignore_eos", true},  // every answer runs its 24 tokens
                          {"temperature", 0},
                          {"stream", true},
                          {"chat_template_kwargs", {{"enable_thinking", false}}}});
}

struct ClientRun {
  std::string content;
  Clock::time_point first_token, end;
};

ClientRun stream_one(int port, const Json& body) {
  ClientRun run;
  test::HttpConnection c(port);
  EXPECT_TRUE(c.send_request("POST", "/v1/chat/completions", body.dump()));
  (void)c.read_until("\"content\":\"");  // the first token's text (or the end)
  run.first_token = Clock::now();
  const test::HttpResult r = c.read_response();
  run.end = Clock::now();
  EXPECT_EQ(r.status, 200) << r.body;
  const test::Streamed s = test::read_stream(r);
  EXPECT_TRUE(s.done);
  run.content = s.content;
  return run;
}

// Each client's answer alone, one after another.
std::vector<std::string> solo_answers(int port, int clients) {
  std::vector<std::string> solo;
  for (int i = 0; i < clients; ++i) solo.push_back(stream_one(port, request_body(i)).content);
  return solo;
}

// Every client at once, each on its own thread.
std::vector<ClientRun> stream_together(int port, int clients) {
  std::vector<ClientRun> together(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] { together[static_cast<size_t>(i)] = stream_one(port, request_body(i)); });
  for (std::thread& t : threads) t.join();
  return together;
}

TEST(ServerConcurrency, ClientsArrivingTogetherRunTogetherAndGetTheirSoloAnswers) {
  constexpr int kClients = 8;
  model::SyntheticCheckpoint weights;
  test::TestServer s(hybrid_with_qwen3_vocab(weights), {},
                     runtime::EngineOptions{.context_size = 256, .parallel = kClients});
  const std::vector<std::string> solo = solo_answers(s.port(), kClients);
  const Json before = s.health()["engine"];
  EXPECT_EQ(before["parallel"], kClients);

  const std::vector<ClientRun> together = stream_together(s.port(), kClients);

  for (int i = 0; i < kClients; ++i) EXPECT_EQ(together[i].content, solo[i]) << "client " << i;
  // One at a time, the last client's first token would come after seven whole answers; together,
  // every client has its first token before any answer is complete.
  Clock::time_point last_first = together[0].first_token, first_end = together[0].end;
  for (const ClientRun& r : together) {
    last_first = std::max(last_first, r.first_token);
    first_end = std::min(first_end, r.end);
  }
  EXPECT_LT(last_first, first_end);
  const Json after = s.health();
  EXPECT_GT(after["engine"]["requests_per_step"].get<double>(), 1.0);  // steps served several
  EXPECT_EQ(after["engine"]["slots_free"], kClients);
  EXPECT_EQ(after["requests"]["finished"], 2 * kClients);
}

// KV blocks for a little more than one client's tokens, for 8 slots: clients are preempted (their
// KV swapped to host memory and back) and still get exactly their solo answers; /health and
// /metrics count the preemptions, and every block comes back.
TEST(ServerConcurrency, ClientsBeyondTheKvBlocksArePreemptedAndGetTheirSoloAnswers) {
  constexpr int kClients = 8;
  model::SyntheticCheckpoint weights;
  test::TestServer s(hybrid_with_qwen3_vocab(weights), {},
                     runtime::EngineOptions{.context_size = 256,
                                            .parallel = kClients,
                                            .kv_blocks = 16,
                                            .kv_block_tokens = 16});
  const std::vector<std::string> solo = solo_answers(s.port(), kClients);
  const std::vector<ClientRun> together = stream_together(s.port(), kClients);
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(together[i].content, solo[i]) << "client " << i;
  const Json engine = s.health()["engine"];
  EXPECT_GT(engine["preemptions"].get<int64_t>(), 0) << engine.dump();
  EXPECT_EQ(engine["swapped"], 0);
  EXPECT_EQ(engine["kv_blocks"], 16);
  EXPECT_EQ(engine["kv_blocks_free"], 16);
  EXPECT_EQ(engine["kv_block_tokens"], 16);
  const std::string metrics = test::http_request(s.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("strata_kv_blocks{state=\"free\"} 16"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("strata_preemptions_total " + engine["preemptions"].dump()), std::string::npos);
}

// The prefix cache through the API: the same conversation again, and one that adds a turn, start
// from the cached prompt prefix (usage.prompt_tokens_details.cached_tokens counts those tokens, in
// whole chunks, and the strata extension names the tier) and answer exactly as they do cold;
// cache_prompt: false runs cold.
TEST(ServerConcurrency, CachedPromptPrefixesAnswerAsColdAndAreCounted) {
  model::SyntheticCheckpoint cold_weights, warm_weights;
  // The cold server caches too (so that it cuts prompts where messages begin, as the warm one
  // does), but is asked with cache_prompt: false, so that every prompt runs cold.
  test::TestServer cold(hybrid_with_qwen3_vocab(cold_weights), {},
                        runtime::EngineOptions{
                            .context_size = 256, .prefill_chunk = 8, .kv_block_tokens = 8, .prefix_cache = 8});
  test::TestServer warm(hybrid_with_qwen3_vocab(warm_weights), {},
                        runtime::EngineOptions{.context_size = 256,
                                               .prefill_chunk = 8,
                                               .kv_block_tokens = 8,
                                               .prefix_cache = 8});
  const Json first = {{"role", "user"}, {"content", "Name three colours of the sea at night."}};
  auto body = [](const Json& messages) {
    return Json{{"messages", messages},
                {"max_tokens", 12},
                {"temperature", 0},
                {"chat_template_kwargs", {{"enable_thinking", false}}}};
  };
  auto ask = [](test::TestServer& s, const Json& b) {
    const test::HttpResult r = test::http_request(s.port(), "POST", "/v1/chat/completions", b.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body);
  };
  auto ask_cold = [&](const Json& b) {
    Json bypass = b;
    bypass["cache_prompt"] = false;
    return ask(cold, bypass);
  };
  const Json one = Json::array({first});
  const Json a_cold = ask_cold(body(one)), a1 = ask(warm, body(one)), a2 = ask(warm, body(one));
  // The warm server cuts chat prompts where messages begin (and every 8 tokens from there): the
  // second ask resumes where the generation prompt's message begins, its last <|im_start|>.
  Json tokenize = body(one);
  tokenize["with_pieces"] = true;
  const Json pieces = Json::parse(test::http_request(warm.port(), "POST", "/tokenize", tokenize.dump()).body)["pieces"];
  int64_t last_start = -1;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i] == "<|im_start|>") last_start = static_cast<int64_t>(i);
  ASSERT_GT(last_start, 0) << pieces.dump();
  EXPECT_EQ(a1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(a2["usage"]["prompt_tokens_details"]["cached_tokens"], last_start);
  EXPECT_EQ(a1["choices"][0]["message"]["content"], a_cold["choices"][0]["message"]["content"]);
  EXPECT_EQ(a2["choices"][0]["message"]["content"], a_cold["choices"][0]["message"]["content"]);
  EXPECT_FALSE(a1.contains("strata")) << a1.dump();
  EXPECT_EQ(a2["strata"]["prefix_cache"]["cached_tokens"], last_start) << a2.dump();
  EXPECT_EQ(a2["strata"]["prefix_cache"]["tier"], "device");
  // llama.cpp's cache_prompt: false runs the prompt cold (and counts no lookup).
  Json bypass = body(one);
  bypass["cache_prompt"] = false;
  const Json a3 = ask(warm, bypass);
  EXPECT_EQ(a3["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(a3["choices"][0]["message"]["content"], a_cold["choices"][0]["message"]["content"]);
  Json two = one;
  two.push_back({{"role", "assistant"}, {"content", a1["choices"][0]["message"]["content"]}});
  two.push_back({{"role", "user"}, {"content", "And by day?"}});
  const Json b_cold = ask_cold(body(two)), b_warm = ask(warm, body(two));
  EXPECT_GT(b_warm["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(b_warm["choices"][0]["message"]["content"], b_cold["choices"][0]["message"]["content"]);
  const Json cache = warm.health()["engine"]["prefix_cache"];
  EXPECT_EQ(cache["hits"], 2) << cache.dump();
  EXPECT_EQ(cache["misses"], 1);
  const std::string metrics = test::http_request(warm.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("strata_prefix_cache_lookups_total{outcome=\"hit\"} 2"), std::string::npos);
}

// After a chat answer the server prefills the next turn while idle: the conversation with the
// answer in its history form, up to where the next message begins. The next turn then resumes
// exactly there (at its new user message), and answers as a cold run does.
TEST(ServerConcurrency, TheNextTurnIsPrefilledAheadAndAnswersAsCold) {
  model::SyntheticCheckpoint cold_weights, warm_weights;
  const runtime::EngineOptions options{
      .context_size = 256, .prefill_chunk = 8, .kv_block_tokens = 8, .prefix_cache = 16};
  test::TestServer cold(hybrid_with_qwen3_vocab(cold_weights), {}, options);
  test::TestServer warm(hybrid_with_qwen3_vocab(warm_weights), {}, options);
  auto body = [](const Json& messages, bool cache) {
    return Json{{"messages", messages}, {"max_tokens", 10}, {"temperature", 0}, {"cache_prompt", cache},
                {"chat_template_kwargs", {{"enable_thinking", false}}}};
  };
  auto ask = [](test::TestServer& s, const Json& b) {
    const test::HttpResult r = test::http_request(s.port(), "POST", "/v1/chat/completions", b.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body);
  };
  auto wait_idle = [](test::TestServer& s) {
    for (int i = 0; i < 500; ++i) {
      const Json r = s.health()["requests"];
      if (r["running"] == 0 && r["waiting"] == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "the engine did not go idle";
  };
  Json messages = Json::array({{{"role", "system"}, {"content", "You answer in one short line."}},
                               {{"role", "user"}, {"content", "Name a colour of the sea."}}});
  const Json first = ask(warm, body(messages, true));
  wait_idle(warm);  // the next turn prefilled
  messages.push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "And of the sky?"}});
  const Json second = ask(warm, body(messages, true));
  Json tokenize = body(messages, true);
  tokenize["with_pieces"] = true;
  const Json pieces = Json::parse(test::http_request(warm.port(), "POST", "/tokenize", tokenize.dump()).body)["pieces"];
  std::vector<int64_t> starts;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i] == "<|im_start|>") starts.push_back(static_cast<int64_t>(i));
  ASSERT_EQ(starts.size(), 5u) << pieces.dump();  // system, user, assistant, user, the generation prompt
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], starts[3]) << second.dump();
  EXPECT_EQ(second["choices"][0]["message"]["content"],
            ask(cold, body(messages, false))["choices"][0]["message"]["content"]);
  EXPECT_EQ(warm.health()["engine"]["prefix_cache"]["hits"], 1);
}

// n > 1: each choice is a sequence of its own, run together; with a seed, choice i is exactly the
// single-choice answer of seed + i, whole or streamed, and the usage sums the choices.
TEST(ServerConcurrency, NChoicesAreSequencesOfTheirOwnWithSeedsSeedPlusI) {
  model::SyntheticCheckpoint weights;
  test::TestServer s(hybrid_with_qwen3_vocab(weights), {},
                     runtime::EngineOptions{.context_size = 256, .parallel = 4});
  auto body = [](int64_t seed, int n, bool stream) {
    return test::chat_body("Pick some words.",
                           {{"max_tokens", 12},
                            {"temperature", 1.0},
                            {"seed", seed},
                            {"n", n},
                            {"stream", stream},
                            {"chat_template_kwargs", {{"enable_thinking", false}}}});
  };
  std::vector<std::string> single;
  int64_t single_tokens = 0;
  for (int i = 0; i < 3; ++i) {
    const test::HttpResult r = s.post("/v1/chat/completions", body(7 + i, 1, false));
    ASSERT_EQ(r.status, 200) << r.body;
    const Json j = Json::parse(r.body);
    single.push_back(j["choices"][0]["message"]["content"].get<std::string>());
    single_tokens += j["usage"]["completion_tokens"].get<int64_t>();
  }
  EXPECT_TRUE(single[0] != single[1] || single[1] != single[2])
      << "the seeds should give different answers";

  const test::HttpResult whole = s.post("/v1/chat/completions", body(7, 3, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json j = Json::parse(whole.body);
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["message"]["content"], single[i]) << "choice " << i;
  }
  EXPECT_EQ(j["usage"]["completion_tokens"], single_tokens);

  const test::HttpResult streamed = s.post("/v1/chat/completions", body(7, 3, true));
  ASSERT_EQ(streamed.status, 200);
  std::vector<std::string> content(3);
  std::vector<int> finishes(3, 0);
  bool done = false;
  for (const std::string& data : test::sse_data(streamed.body)) {
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const Json chunk = Json::parse(data);
    const Json& choice = chunk["choices"][0];
    const int i = choice["index"].get<int>();
    ASSERT_GE(i, 0);
    ASSERT_LT(i, 3);
    if (choice["delta"].contains("content"))
      content[i] += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) ++finishes[i];
  }
  EXPECT_TRUE(done);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(content[i], single[i]) << "choice " << i;
    EXPECT_EQ(finishes[i], 1) << "choice " << i;
  }
}

// strata serve's --parallel, --step-tokens and --kv-blocks reach the engine, and /health says so.
TEST(ServerConcurrency, ServeTakesParallelAndStepTokensAndReportsThem) {
  test::ServeProcess server(
      {"--parallel", "3", "--step-tokens", "1024", "--kv-blocks", "9", "--ctx-size", "512"});
  const Json health = Json::parse(test::http_request(server.port(), "GET", "/health").body);
  EXPECT_EQ(health["engine"]["parallel"], 3) << health.dump();
  EXPECT_EQ(health["engine"]["slots_free"], 3);
  EXPECT_GT(health["engine"]["state_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(health["settings"]["parallel"]["value"], 3);
  EXPECT_EQ(health["settings"]["step_tokens"]["value"], 1024);
  EXPECT_EQ(health["settings"]["step_tokens"]["source"], "flag");
  EXPECT_EQ(health["engine"]["kv_blocks"], 9);
  EXPECT_EQ(health["engine"]["kv_blocks_free"], 9);
  EXPECT_EQ(health["settings"]["kv_blocks"]["value"], 9);
}

}  // namespace
}  // namespace strata
