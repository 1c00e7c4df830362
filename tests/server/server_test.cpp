// The server end to end over HTTP, in process: the real Qwen3 tokenizer and chat template, the
// real Engine and sampler, and a scripted model that generates exactly what a test needs, so the
// checks are exact: reasoning and tool calls parsed, stop strings never leaking, streaming format,
// errors, auth, a full queue, client disconnects and graceful shutdown.
#include "server/server.h"

#include <gtest/gtest.h>

#include <thread>

#include "test_server.h"

namespace strata {
namespace {

using test::chat_body;
using test::http_request;
using test::HttpConnection;
using test::HttpResult;
using test::qwen3_tokenizer;
using test::read_stream;
using test::ReplyModel;
using test::sse_data;
using test::Streamed;
using test::TestServer;

const Json kWeatherTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Current weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");

TEST(Server, ChatSeparatesReasoningFromTheAnswer) {
  TestServer s("<think>\nThe user greets me.\n</think>\n\nHello there!");
  const HttpResult r = s.post("/v1/chat/completions", chat_body("Hi"));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "qwen3-test");
  const Json& message = j["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["content"], "Hello there!");
  EXPECT_EQ(message["reasoning_content"], "The user greets me.");
  EXPECT_EQ(message["reasoning"], "The user greets me.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  const Json& usage = j["usage"];
  EXPECT_GT(usage["prompt_tokens"].get<int>(), 5);
  EXPECT_EQ(
      usage["completion_tokens"].get<size_t>(),
      qwen3_tokenizer().encode("<think>\nThe user greets me.\n</think>\n\nHello there!").size());
  EXPECT_EQ(usage["total_tokens"],
            usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_GT(usage["completion_tokens_details"]["reasoning_tokens"].get<int>(), 0);
}

TEST(Server, StreamSendsRoleFirstThenDeltasWithoutTagsThenFinishUsageAndDone) {
  TestServer s("<think>\nThe user greets me.\n</think>\n\nHello there!");
  const HttpResult r =
      s.post("/v1/chat/completions",
             chat_body("Hi", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.at("content-type"), "text/event-stream");
  const Streamed st = read_stream(r);
  ASSERT_GE(st.chunks.size(), 4u);
  EXPECT_TRUE(st.done);
  const Json& first = st.chunks.front();
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  EXPECT_EQ(st.content, "Hello there!");
  EXPECT_EQ(st.reasoning, "The user greets me.");
  EXPECT_EQ(st.finish_reason, "stop");
  for (const Json& chunk : st.chunks) {
    EXPECT_EQ(chunk["id"], first["id"]);
    EXPECT_EQ(chunk.dump().find("<think>"), std::string::npos);
    EXPECT_EQ(chunk.dump().find("</think>"), std::string::npos);
  }
  const Json& last = st.chunks.back();  // the usage chunk: no choices
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_GT(last["usage"]["completion_tokens"].get<int>(), 5);
  EXPECT_EQ(st.chunks[st.chunks.size() - 2]["choices"][0]["finish_reason"], "stop");
}

TEST(Server, ToolCallsComeBackParsedWithFinishReasonToolCalls) {
  TestServer s(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>");
  const HttpResult r =
      s.post("/v1/chat/completions", chat_body("Weather in Paris?", {{"tools", kWeatherTools}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  const Json& message = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  const Json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()),
            Json({{"city", "Paris"}}));

  const Streamed st = read_stream(
      s.post("/v1/chat/completions",
             chat_body("Weather in Paris?", {{"tools", kWeatherTools}, {"stream", true}})));
  EXPECT_EQ(st.content, "");
  EXPECT_EQ(st.finish_reason, "tool_calls");
  ASSERT_EQ(st.tool_calls.size(), 1u);
  EXPECT_EQ(st.tool_calls[0]["index"], 0);
  EXPECT_EQ(st.tool_calls[0]["function"]["name"], "get_weather");
}

// A model that would answer in prose: its first `opening_tokens` tokens are prose, then it writes
// `rest`. When the server forces a call's opening in place of the prose's first token, the model
// (which counts positions) goes on with `rest` right after the opening.
std::unique_ptr<model::Model> prose_then(size_t opening_tokens, const std::string& rest) {
  const text::Tokenizer& tok = test::qwen3_tokenizer();
  ReplyModel::Script script;
  script.tokens =
      tok.encode("It is probably sunny in Paris today, I would say, but who knows really.");
  script.tokens.resize(opening_tokens);
  const std::vector<int32_t> tail = tok.encode(rest);
  script.tokens.insert(script.tokens.end(), tail.begin(), tail.end());
  script.end_id = *tok.token_id("<|im_end|>");
  return std::make_unique<ReplyModel>(tok.vocab_size(), std::move(script));
}

TEST(Server, ToolChoiceRequiredOrNamedForcesTheCall) {
  const text::chat::ChatTemplate qwen3 = text::chat::ChatTemplate::load(test::qwen3_dir());
  const text::Tokenizer& tok = test::qwen3_tokenizer();
  const Json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  struct Case {
    Json tool_choice;
    std::string opening, rest;
  };
  const Case cases[] = {
      {"required", qwen3.tool_call_opening(""),
       "get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
      {named, qwen3.tool_call_opening("get_weather"), "{\"city\": \"Paris\"}}\n</tool_call>"},
  };
  for (const Case& c : cases) {
    const size_t k = tok.encode(c.opening).size();
    for (bool stream : {false, true}) {
      TestServer s(prose_then(k, c.rest), {}, runtime::EngineOptions{.context_size = 1024});
      const Json body =
          chat_body("Weather in Paris?",
                    {{"tools", kWeatherTools}, {"tool_choice", c.tool_choice}, {"stream", stream}});
      const HttpResult r = s.post("/v1/chat/completions", body);
      ASSERT_EQ(r.status, 200) << r.body;
      Json calls;
      std::string finish, content;
      if (stream) {
        const Streamed st = read_stream(r);
        calls = st.tool_calls, finish = st.finish_reason, content = st.content;
      } else {
        const Json j = Json::parse(r.body);
        calls = j["choices"][0]["message"]["tool_calls"], finish = j["choices"][0]["finish_reason"];
        EXPECT_TRUE(j["choices"][0]["message"]["content"].is_null()) << r.body;
      }
      EXPECT_EQ(finish, "tool_calls") << c.tool_choice << " " << stream;
      EXPECT_EQ(content, "");
      ASSERT_EQ(calls.size(), 1u) << r.body;
      EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
      EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()),
                Json({{"city", "Paris"}}));
    }
  }
  // A template with no tool-call format cannot honour either.
  TestServer gemma(prose_then(4, ""), {}, runtime::EngineOptions{.context_size = 1024},
                   test::shared_fixture("chat-templates/templates/google-gemma-2-2b-it.jinja"));
  for (const Case& c : cases) {
    const HttpResult r = gemma.post(
        "/v1/chat/completions",
        chat_body("Weather?", {{"tools", kWeatherTools}, {"tool_choice", c.tool_choice}}));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(Json::parse(r.body)["error"]["param"], "tool_choice");
  }
  EXPECT_EQ(
      gemma.post("/v1/chat/completions", chat_body("Weather?", {{"tools", kWeatherTools}})).status,
      200);
  // "auto" leaves the same model's prose alone.
  TestServer s(prose_then(4, " and more"), {}, runtime::EngineOptions{.context_size = 1024});
  const Json j = Json::parse(
      s.post("/v1/chat/completions", chat_body("Weather in Paris?", {{"tools", kWeatherTools}}))
          .body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "It is probably sunny and more");
}

// parallel_tool_calls false: the response holds the first call only, and generation ends there.
TEST(Server, ParallelToolCallsFalseKeepsTheFirstCallAndEndsThere) {
  const std::string two_calls =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  TestServer s(two_calls);
  for (bool stream : {false, true}) {
    for (bool parallel : {true, false}) {
      Json body = chat_body(
          "Weather in Paris and Oslo?",
          {{"tools", kWeatherTools}, {"parallel_tool_calls", parallel}, {"stream", stream}});
      if (stream) body["stream_options"] = {{"include_usage", true}};
      const HttpResult r = s.post("/v1/chat/completions", body);
      ASSERT_EQ(r.status, 200) << r.body;
      Json calls, usage;
      std::string finish;
      if (stream) {
        const Streamed st = read_stream(r);
        calls = st.tool_calls, finish = st.finish_reason, usage = st.chunks.back()["usage"];
      } else {
        const Json j = Json::parse(r.body);
        calls = j["choices"][0]["message"]["tool_calls"], finish = j["choices"][0]["finish_reason"];
        usage = j["usage"];
      }
      EXPECT_EQ(finish, "tool_calls");
      ASSERT_EQ(calls.size(), parallel ? 2u : 1u) << r.body;
      EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()),
                Json({{"city", "Paris"}}));
      const size_t all = test::qwen3_tokenizer().encode(two_calls).size();
      if (parallel) {
        EXPECT_EQ(usage["completion_tokens"].get<size_t>(), all);
      } else {
        EXPECT_LT(usage["completion_tokens"].get<size_t>(),
                  all / 2 + 1);  // stopped after the first
      }
    }
  }
}

TEST(Server, ToolResultRoundTripRendersAndAnswers) {
  TestServer s("It is sunny in Paris.");
  const Json messages = Json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}])");
  const HttpResult r =
      s.post("/v1/chat/completions", {{"messages", messages}, {"tools", kWeatherTools}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["choices"][0]["message"]["content"], "It is sunny in Paris.");
}

TEST(Server, ToolCallTextIsContentWhenTheRequestHasNoTools) {
  TestServer s("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>");
  const Json j = Json::parse(s.post("/v1/chat/completions", chat_body("Hi")).body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_NE(j["choices"][0]["message"]["content"].get<std::string>().find("get_weather"),
            std::string::npos);
}

TEST(Server, StopStringsEndGenerationAndNeverLeak) {
  TestServer s("Hello there! The END is near, and more text follows here.");
  const Json body = chat_body("Hi", {{"stop", {"END", "zzz"}}});
  const Json j = Json::parse(s.post("/v1/chat/completions", body).body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello there! The ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int>(),
            8);  // stopped at once, not at the script's end

  Json streaming = body;
  streaming["stream"] = true;
  const Streamed st = read_stream(s.post("/v1/chat/completions", streaming));
  EXPECT_EQ(st.content, "Hello there! The ");
  EXPECT_EQ(st.finish_reason, "stop");

  // A single string works too, and for /v1/completions.
  const Json c = Json::parse(
      s.post("/v1/completions", {{"prompt", "Say it"}, {"max_tokens", 50}, {"stop", " END"}}).body);
  EXPECT_EQ(c["choices"][0]["text"], "Hello there! The");
}

TEST(Server, CompletionsStreamAndEcho) {
  TestServer s("one two three");
  const Json j = Json::parse(
      s.post("/v1/completions", {{"prompt", "Count:"}, {"max_tokens", 3}, {"echo", true}}).body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Count:one two three");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const Streamed st = read_stream(
      s.post("/v1/completions", {{"prompt", "Count:"}, {"max_tokens", 2}, {"stream", true}}));
  EXPECT_EQ(st.content, "one two");
  EXPECT_EQ(st.finish_reason, "length");
  EXPECT_TRUE(st.done);
}

TEST(Server, ContextOverflowIsA400) {
  TestServer s("ok", {}, {}, /*context_size=*/64);
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "word ";
  HttpResult r = s.post("/v1/chat/completions", chat_body(long_text));
  EXPECT_EQ(r.status, 400);
  Json e = Json::parse(r.body)["error"];
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_NE(e["message"].get<std::string>().find("maximum context length is 64"),
            std::string::npos);
  r = s.post("/v1/chat/completions", chat_body("Hi", {{"max_tokens", 60}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["error"]["param"], "max_tokens");
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("Hi", {{"max_tokens", 5}})).status, 200);
}

TEST(Server, ErrorsUseOpenAisShapeAndStatus) {
  server::ServerOptions options;
  options.connections.limits.max_body_bytes = 4096;
  TestServer s("ok", options);
  auto expect_error = [](const HttpResult& r, int status, const std::string& code) {
    EXPECT_EQ(r.status, status) << r.body;
    const Json j = Json::parse(r.body);
    ASSERT_TRUE(j.contains("error")) << r.body;
    for (const char* key : {"message", "type", "param", "code"})
      EXPECT_TRUE(j["error"].contains(key)) << key;
    EXPECT_EQ(j["error"]["code"], code.empty() ? Json(nullptr) : Json(code)) << r.body;
  };
  expect_error(http_request(s.port(), "POST", "/v1/chat/completions", "{\"messages\": ["), 400,
               "invalid_json");
  expect_error(s.post("/v1/chat/completions", chat_body("Hi", {{"temperature", "hot"}})), 400,
               "invalid_type");
  expect_error(s.post("/v1/chat/completions", chat_body("Hi", {{"n", 0}})), 400,
               "invalid_value");
  expect_error(s.post("/v1/chat/completions", chat_body("Hi", {{"model", "gpt-4"}})), 404,
               "model_not_found");
  expect_error(
      s.post("/v1/chat/completions", chat_body("Hi", {{"logit_bias", {{"999999999", 1}}}})), 400,
      "");
  expect_error(s.post("/v1/chat/completions", chat_body(std::string(5000, 'x'))), 413,
               "request_too_large");
  expect_error(s.get("/v1/nothing"), 404, "not_found");
  expect_error(http_request(s.port(), "DELETE", "/v1/models"), 405, "method_not_allowed");
  // The server goes on serving after all of these.
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("Hi")).status, 200);
}

TEST(Server, ApiKeyIsRequiredExceptForHealth) {
  server::ServerOptions options;
  options.api_key = "sk-test-123";
  TestServer s("ok", options);
  HttpResult r = s.post("/v1/chat/completions", chat_body("Hi"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "missing_api_key");
  r = s.post("/v1/chat/completions", chat_body("Hi"), {{"Authorization", "Bearer sk-test-124"}});
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(s.get("/v1/models", {{"Authorization", "sk-test-123"}}).status, 401);  // no "Bearer "
  EXPECT_EQ(
      s.post("/v1/chat/completions", chat_body("Hi"), {{"Authorization", "Bearer sk-test-123"}})
          .status,
      200);
  EXPECT_EQ(s.get("/metrics").status, 401);
  EXPECT_EQ(s.get("/health").status, 200);
}

TEST(Server, ModelsHealthMetricsTokenize) {
  server::ServerOptions options;
  options.aliases = {"my-alias"};
  options.settings = resolve_settings({{"device", "cpu"}}, {{"STRATA_CUDA_GRAPHS", "0"}});
  TestServer s("ok", options);
  const Json models = Json::parse(s.get("/v1/models").body);
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "qwen3-test");
  EXPECT_EQ(s.get("/v1/models/qwen3-test").status, 200);
  EXPECT_EQ(s.get("/v1/models/other").status, 404);
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("Hi", {{"model", "my-alias"}})).status, 200);

  const Json health = s.health();
  EXPECT_EQ(health["status"], "ok");
  EXPECT_EQ(health["model"], "qwen3-test");
  EXPECT_EQ(health["requests"]["finished"], 1);
  EXPECT_GT(health["memory"]["resident_bytes"].get<uint64_t>(), 0u);
  // The settings the process resolved, each with where it came from.
  EXPECT_EQ(health["settings"].size(), setting_specs().size());
  EXPECT_EQ(health["settings"]["device"], (Json{{"value", "cpu"}, {"source", "flag"}}));
  EXPECT_EQ(health["settings"]["cuda_graphs"], (Json{{"value", false}, {"source", "env"}}));
  EXPECT_EQ(health["settings"]["ctx_size"], (Json{{"value", 0}, {"source", "default"}}));

  const std::string metrics = s.get("/metrics").body;
  EXPECT_NE(metrics.find("# TYPE strata_http_requests_total counter\n"), std::string::npos);
  EXPECT_NE(
      metrics.find("strata_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1\n"),
      std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("strata_generations_total{outcome=\"finished\"} 1\n"), std::string::npos);

  const Json tokens = Json::parse(s.post("/tokenize", {{"content", "Hello world"}}).body);
  EXPECT_EQ(tokens["tokens"], Json(qwen3_tokenizer().encode("Hello world")));
  const Json text = Json::parse(s.post("/detokenize", {{"tokens", tokens["tokens"]}}).body);
  EXPECT_EQ(text["content"], "Hello world");
  const Json chat_tokens = Json::parse(s.post("/tokenize", chat_body("Hi")).body);
  EXPECT_GT(chat_tokens["count"].get<int>(), 5);
  EXPECT_EQ(s.post("/detokenize", {{"tokens", {-1}}}).status, 400);
}

// Waits until /health reports `key` at `value`, up to `limit`; the time it took.
double wait_for(TestServer& s, const std::string& key, int value, std::chrono::milliseconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < limit) {
    if (s.health()["requests"][key] == value) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A request for the endless model. " la la la ..." is a loop that think control's answer guard
// would stop; with thinking off no controller runs, so it goes on until the test ends it.
Json endless_body(const std::string& user, Json extra) {
  extra["chat_template_kwargs"] = {{"enable_thinking", false}};
  return chat_body(user, std::move(extra));
}

ReplyModel::Script endless(int delay_ms) {
  ReplyModel::Script script;
  script.endless = true;
  script.step_delay = std::chrono::milliseconds(delay_ms);
  return script;
}

TEST(Server, ClientDisconnectCancelsTheGenerationAndFreesTheEngine) {
  TestServer s("", {}, endless(5), /*context_size=*/4096);
  for (bool stream : {true, false}) {
    HttpConnection c(s.port());
    c.send_request("POST", "/v1/chat/completions",
                   endless_body("Go on forever", {{"stream", stream}}).dump());
    if (stream)
      c.read_until(" la");  // generating
    else
      wait_for(s, "running", 1, std::chrono::seconds(5));
    c.close();
    const int cancelled = stream ? 1 : 2;
    EXPECT_LT(wait_for(s, "cancelled", cancelled, std::chrono::seconds(5)), 1.0);
    EXPECT_EQ(s.health()["requests"]["cancelled"], cancelled);
    EXPECT_EQ(s.health()["requests"]["running"], 0);
  }
  // The engine is free: the next request starts at once.
  const auto t0 = std::chrono::steady_clock::now();
  HttpConnection next(s.port());
  next.send_request("POST", "/v1/chat/completions", endless_body("Hi", {{"stream", true}}).dump());
  next.read_until(" la");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

TEST(Server, AFullQueueAnswers503AndQueuedRequestsRunInOrder) {
  server::ServerOptions options;
  options.max_concurrency = 2;
  TestServer s("", options, endless(2), /*context_size=*/4096);
  HttpConnection first(s.port()), second(s.port());
  first.send_request("POST", "/v1/chat/completions", endless_body("A", {{"stream", true}}).dump());
  first.read_until(" la");
  second.send_request("POST", "/v1/chat/completions",
                      endless_body("B", {{"stream", true}, {"max_tokens", 3}}).dump());
  wait_for(s, "waiting", 1, std::chrono::seconds(5));
  const HttpResult busy = s.post("/v1/chat/completions", chat_body("C"));
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(Json::parse(busy.body)["error"]["code"], "server_busy");
  first.close();  // the queued one runs next
  const Streamed b = read_stream(second.read_response());
  EXPECT_EQ(b.content, " la la la");
  EXPECT_EQ(b.finish_reason, "length");
}

TEST(Server, ShutdownLetsGenerationsFinishWithinTheGrace) {
  ReplyModel::Script slow;
  slow.step_delay = std::chrono::milliseconds(10);
  TestServer s("one two three four five six seven eight", {}, slow);
  HttpConnection c(s.port());
  c.send_request("POST", "/v1/chat/completions", chat_body("Count", {{"stream", true}}).dump());
  c.read_until("one");
  s.shutdown(std::chrono::seconds(10));
  const Streamed st = read_stream(c.read_response());
  EXPECT_EQ(st.content, "one two three four five six seven eight");
  EXPECT_EQ(st.finish_reason, "stop");
  EXPECT_TRUE(st.done);
  EXPECT_FALSE(HttpConnection(s.port()).connected());  // no longer listening
}

TEST(Server, ShutdownCancelsWhatOutlastsTheGraceWithAnErrorEvent) {
  TestServer s("", {}, endless(2), /*context_size=*/4096);
  HttpConnection c(s.port());
  c.send_request("POST", "/v1/chat/completions", endless_body("Go", {{"stream", true}}).dump());
  c.read_until(" la");
  s.shutdown(std::chrono::milliseconds(50));
  const std::vector<std::string> events = sse_data(c.read_response().body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(Json::parse(events[events.size() - 2])["error"]["code"], "server_shutting_down");
}

}  // namespace
}  // namespace strata
