// The Anthropic Messages API end to end over HTTP, in process: the real Qwen3 tokenizer and chat
// template and a scripted model, so the checks are exact: thinking, text and tool_use blocks, the
// stream's events in Anthropic's order, a tool round trip, thinking on, off and with a budget,
// stop sequences, max_tokens over all output, count_tokens against the chat route's rendering,
// x-api-key auth, unknown models (404, or served with any_model) and errors in Anthropic's shape.
#include <gtest/gtest.h>

#include <thread>

#include "sse_events.h"
#include "test_server.h"
#include "thinking_model.h"

namespace strata {
namespace {

using test::chat_body;
using test::http_request;
using test::HttpConnection;
using test::HttpResult;
using test::qwen3_tokenizer;
using test::ReplyModel;
using test::TestServer;
using test::ThinkingModel;

const Json kWeatherTool = Json::parse(R"({"name": "get_weather", "description": "Current weather",
  "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
  "required": ["city"]}})");
const char* kToolCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const char* kThinkingReply = "<think>\nThe user greets me.\n</think>\n\nHello there!";

Json message_body(const std::string& user, Json extra = Json::object()) {
  Json body = {{"model", "qwen3-test"},
               {"max_tokens", 200},
               {"messages", {{{"role", "user"}, {"content", user}}}}};
  body.update(extra);
  return body;
}

using Event = test::SseEvent<Json>;

// A streamed message's events (test::sse_events checks each frame).
std::vector<Event> read_events(const HttpResult& r) { return test::sse_events<Json>(r.body); }

std::vector<std::string> names(const std::vector<Event>& events) { return test::event_names(events); }

// The message a stream's events build, as an SDK accumulates them: blocks from their start
// events and deltas (tool inputs parsed at their stop), stop reason and usage from message_delta.
Json accumulate(const std::vector<Event>& events) {
  Json message;
  std::map<int, std::string> json_input;
  for (const Event& e : events) {
    const Json& d = e.data;
    if (e.name == "message_start") {
      message = d["message"];
    } else if (e.name == "content_block_start") {
      EXPECT_EQ(d["index"], message["content"].size());
      message["content"].push_back(d["content_block"]);
    } else if (e.name == "content_block_delta") {
      Json& block = message["content"][d["index"].get<size_t>()];
      const Json& delta = d["delta"];
      const std::string type = delta["type"];
      if (type == "text_delta")
        block["text"] = block["text"].get<std::string>() + delta["text"].get<std::string>();
      if (type == "thinking_delta")
        block["thinking"] =
            block["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
      if (type == "signature_delta") block["signature"] = delta["signature"];
      if (type == "input_json_delta")
        json_input[d["index"]] += delta["partial_json"].get<std::string>();
    } else if (e.name == "content_block_stop") {
      const int i = d["index"];
      if (json_input.count(i)) message["content"][i]["input"] = Json::parse(json_input[i]);
    } else if (e.name == "message_delta") {
      message["stop_reason"] = d["delta"]["stop_reason"];
      message["stop_sequence"] = d["delta"]["stop_sequence"];
      message["usage"] = d["usage"];
      if (d.contains("strata")) message["strata"] = d["strata"];
    }
  }
  return message;
}

Json create(TestServer& s, const Json& body,
            const std::map<std::string, std::string>& headers = {}) {
  const HttpResult r = s.post("/v1/messages", body, headers);
  EXPECT_EQ(r.status, 200) << r.body;
  return Json::parse(r.body);
}

std::vector<Event> create_streamed(TestServer& s, Json body) {
  body["stream"] = true;
  const HttpResult r = s.post("/v1/messages", body);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.at("content-type"), "text/event-stream");
  return read_events(r);
}

// An error in Anthropic's shape, and nothing else.
void expect_anthropic_error(const HttpResult& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  const Json j = Json::parse(r.body);
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
  EXPECT_EQ(j.size(), 2u) << r.body;
  EXPECT_EQ(j["error"].size(), 2u) << r.body;
}

TEST(AnthropicServer, AMessageHasThinkingAndTextBlocksAndUsage) {
  TestServer s(kThinkingReply);
  const Json j = create(s, message_body("Hi", {{"metadata", {{"user_id", "u1"}}}}),
                        {{"anthropic-version", "2023-06-01"}, {"anthropic-beta", "x-2025"}});
  EXPECT_EQ(j["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["model"], "qwen3-test");
  ASSERT_EQ(j["content"].size(), 2u) << j.dump();
  EXPECT_EQ(j["content"][0]["type"], "thinking");
  EXPECT_EQ(j["content"][0]["thinking"], "The user greets me.");
  EXPECT_TRUE(j["content"][0]["signature"].is_string());
  EXPECT_FALSE(j["content"][0]["signature"].get<std::string>().empty());
  EXPECT_EQ(j["content"][1], Json::parse(R"({"type": "text", "text": "Hello there!"})"));
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  const Json& usage = j["usage"];
  EXPECT_GT(usage["input_tokens"].get<int>(), 5);
  EXPECT_EQ(usage["output_tokens"].get<size_t>(), qwen3_tokenizer().encode(kThinkingReply).size());
  EXPECT_EQ(usage["cache_creation_input_tokens"], 0);
  EXPECT_EQ(usage["cache_read_input_tokens"], 0);
}

// Prompt tokens read from the prefix cache are cache_read_input_tokens, apart from input_tokens,
// as Anthropic counts its cache reads; a stream's message_delta carries the split.
TEST(AnthropicServer, CachedPromptTokensAreCacheReads) {
  const text::Tokenizer& tok = qwen3_tokenizer();
  ReplyModel::Script script;
  script.tokens = tok.encode("ok");
  script.end_id = *tok.token_id("<|im_end|>");
  TestServer s(
      std::make_unique<ReplyModel>(tok.vocab_size(), script), {},
      runtime::EngineOptions{
          .context_size = 256, .prefill_chunk = 8, .kv_block_tokens = 8, .prefix_cache = 8});
  const Json body = message_body("Name three colours of the sea at night.",
                                 {{"thinking", {{"type", "disabled"}}}});
  const Json cold = create(s, body);
  EXPECT_EQ(cold["usage"]["cache_read_input_tokens"], 0);
  const int64_t prompt = cold["usage"]["input_tokens"];
  const Json warm = create(s, body);
  const int64_t cached = warm["usage"]["cache_read_input_tokens"];
  EXPECT_GT(cached, 0) << warm.dump();
  EXPECT_EQ(warm["usage"]["input_tokens"].get<int64_t>() + cached, prompt);
  EXPECT_EQ(warm["strata"]["prefix_cache"]["cached_tokens"], cached);
  const std::vector<Event> events = create_streamed(s, body);
  EXPECT_EQ(events.front().data["message"]["usage"]["input_tokens"], prompt);  // not known yet
  const Json& usage = events[events.size() - 2].data["usage"];
  EXPECT_EQ(usage["input_tokens"].get<int64_t>() + usage["cache_read_input_tokens"].get<int64_t>(),
            prompt);
  EXPECT_GT(usage["cache_read_input_tokens"].get<int64_t>(), 0);
}

TEST(AnthropicServer, AStreamSendsAnthropicsEventsInOrderAndBuildsTheSameMessage) {
  TestServer s(kThinkingReply);
  const Json whole = create(s, message_body("Hi"));
  const std::vector<Event> events = create_streamed(s, message_body("Hi"));
  const std::vector<std::string> n = names(events);
  ASSERT_GE(n.size(), 10u);
  EXPECT_EQ(n[0], "message_start");
  EXPECT_EQ(n[1], "ping");
  EXPECT_EQ(n[2], "content_block_start");
  EXPECT_EQ(n[n.size() - 2], "message_delta");
  EXPECT_EQ(n.back(), "message_stop");
  // Each block: start, deltas, stop; a thinking block's last delta its signature.
  int open = -1;
  for (size_t i = 2; i + 2 < n.size(); ++i) {
    const Json& d = events[i].data;
    if (n[i] == "content_block_start") {
      EXPECT_EQ(open, -1) << i;
      open = d["index"];
    } else if (n[i] == "content_block_stop") {
      EXPECT_EQ(d["index"], open);
      if (events[i - 1].data["index"] == 0) {
        EXPECT_EQ(events[i - 1].data["delta"]["type"], "signature_delta");
      }
      open = -1;
    } else {
      EXPECT_TRUE(n[i] == "content_block_delta" || n[i] == "ping") << n[i];
    }
  }
  EXPECT_EQ(open, -1);
  const Json& start = events[0].data["message"];
  EXPECT_EQ(start["content"], Json::array());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(start["usage"]["input_tokens"], whole["usage"]["input_tokens"]);
  Json built = accumulate(events);
  EXPECT_EQ(built["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_NE(built["id"], whole["id"]);
  built["id"] = whole["id"];
  EXPECT_EQ(built, whole) << built.dump(1) << "\n" << whole.dump(1);
  for (const Event& e : events) EXPECT_EQ(e.data.dump().find("think>"), std::string::npos);
}

TEST(AnthropicServer, AToolCallComesBackAsToolUseAndItsResultRendersInTheNextRequest) {
  TestServer s(kToolCall);
  const Json body = message_body("Weather in Paris?", {{"tools", {kWeatherTool}}});
  const Json j = create(s, body);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 1u) << j.dump();
  const Json& use = j["content"][0];
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(use["name"], "get_weather");
  EXPECT_EQ(use["input"], Json({{"city", "Paris"}}));

  const std::vector<Event> events = create_streamed(s, body);
  const Json built = accumulate(events);
  EXPECT_EQ(built["stop_reason"], "tool_use");
  ASSERT_EQ(built["content"].size(), 1u) << built.dump();
  EXPECT_EQ(built["content"][0]["input"], Json({{"city", "Paris"}}));
  bool json_delta = false;
  for (const Event& e : events)
    json_delta = json_delta ||
                 (e.name == "content_block_delta" && e.data["delta"]["type"] == "input_json_delta");
  EXPECT_TRUE(json_delta);

  // The next turn: the call and its result go back; the prompt holds them as the chat route
  // renders the same conversation, and the result's text counts.
  auto next_turn = [&](const std::string& result) {
    return message_body(
        "Weather in Paris?",
        {{"tools", {kWeatherTool}},
         {"messages",
          {{{"role", "user"}, {"content", "Weather in Paris?"}},
           {{"role", "assistant"}, {"content", {use}}},
           {{"role", "user"},
            {"content",
             {{{"type", "tool_result"}, {"tool_use_id", use["id"]}, {"content", result}}}}}}}});
  };
  EXPECT_EQ(s.post("/v1/messages", next_turn("sunny, 21 C")).status, 200);
  const Json chat = Json::parse(R"({"messages": [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "x", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "x", "content": "sunny, 21 C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "Current weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})");
  const int64_t chat_count = Json::parse(s.post("/tokenize", chat).body)["count"];
  const HttpResult counted = s.post("/v1/messages/count_tokens", next_turn("sunny, 21 C"));
  ASSERT_EQ(counted.status, 200) << counted.body;
  EXPECT_EQ(Json::parse(counted.body), Json({{"input_tokens", chat_count}}));
  const int64_t longer = Json::parse(
      s.post("/v1/messages/count_tokens", next_turn("sunny, 21 C, light wind from the west"))
          .body)["input_tokens"];
  EXPECT_GT(longer, chat_count);
}

TEST(AnthropicServer, ToolChoiceForcesTheCallAndParallelCallsCanBeDisabled) {
  const text::chat::ChatTemplate qwen3 = text::chat::ChatTemplate::load(test::qwen3_dir());
  const text::Tokenizer& tok = qwen3_tokenizer();
  // The model would talk; the forced opening makes its next tokens the call's name and arguments.
  ReplyModel::Script script;
  script.tokens = tok.encode("It is probably sunny");
  script.tokens.resize(tok.encode(qwen3.tool_call_opening("get_weather")).size());
  const std::vector<int32_t> rest = tok.encode("{\"city\": \"Paris\"}}\n</tool_call>");
  script.tokens.insert(script.tokens.end(), rest.begin(), rest.end());
  script.end_id = *tok.token_id("<|im_end|>");
  TestServer forced(std::make_unique<ReplyModel>(tok.vocab_size(), script), {},
                    runtime::EngineOptions{.context_size = 1024});
  const Json j = create(
      forced,
      message_body("Weather?", {{"tools", {kWeatherTool}},
                                {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}}));
  EXPECT_EQ(j["stop_reason"], "tool_use") << j.dump();
  ASSERT_EQ(j["content"].size(), 1u) << j.dump();
  EXPECT_EQ(j["content"][0]["input"], Json({{"city", "Paris"}}));

  const std::string two = std::string(kToolCall) + "\n" + kToolCall;
  TestServer s(two);
  EXPECT_EQ(create(s, message_body("Weather?", {{"tools", {kWeatherTool}}}))["content"].size(), 2u);
  const Json one = create(
      s, message_body("Weather?",
                      {{"tools", {kWeatherTool}},
                       {"tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", true}}}}));
  EXPECT_EQ(one["content"].size(), 1u);
  EXPECT_EQ(one["stop_reason"], "tool_use");
  // tool_choice none: the tools are left out of the prompt, and the call text stays text.
  const Json none = create(s, message_body("Weather?", {{"tools", {kWeatherTool}},
                                                        {"tool_choice", {{"type", "none"}}}}));
  EXPECT_EQ(none["stop_reason"], "end_turn");
  EXPECT_EQ(none["content"][0]["type"], "text");
  EXPECT_LT(none["usage"]["input_tokens"], one["usage"]["input_tokens"]);
}

// Thinks kProse (or loops), then answers once fed </think>.
std::unique_ptr<ThinkingModel> thinker(const std::string& thinking, const std::string& answer) {
  const text::Tokenizer& tok = qwen3_tokenizer();
  ThinkingModel::Script script;
  script.thinking = tok.encode("<think>\n" + thinking);
  script.answer = tok.encode(answer);
  script.close_id = *tok.token_id("</think>");
  script.end_id = *tok.token_id("<|im_end|>");
  return std::make_unique<ThinkingModel>(tok.vocab_size(), std::move(script));
}

const std::string kProse =
    "First I add the numbers one by one, then I check each partial sum twice, slowly and with "
    "care, before I write anything down.";
const runtime::EngineOptions kEngine{.context_size = 4096, .prefill_chunk = 4096};

TEST(AnthropicServer, ThinkingEnabledWithABudgetDisabledOrLeftToTheModel) {
  TestServer s(thinker(kProse, "The total is 42."), {}, kEngine);
  // A budget: thinking is closed after it, and the answer follows the hint.
  Json j = create(s, message_body("Add up 3, 5 and 34.",
                                  {{"thinking", {{"type", "enabled"}, {"budget_tokens", 10}}}}));
  ASSERT_EQ(j["content"].size(), 2u) << j.dump();
  EXPECT_EQ(j["content"][0]["type"], "thinking");
  const std::string thinking = j["content"][0]["thinking"];
  EXPECT_EQ(kProse.rfind(thinking, 0), 0u) << thinking;
  EXPECT_LT(thinking.size(), kProse.size());
  EXPECT_EQ(j["content"][1]["text"], "**Final Answer:**\n\nThe total is 42.");
  EXPECT_TRUE(j["strata"]["thinking"]["budget_closed"].get<bool>());
  EXPECT_EQ(j["stop_reason"], "end_turn");
  // Streamed, the same.
  Json built = accumulate(create_streamed(
      s, message_body("Add up 3, 5 and 34.",
                      {{"thinking", {{"type", "enabled"}, {"budget_tokens", 10}}}})));
  EXPECT_EQ(built["content"], j["content"]);
  EXPECT_EQ(built["strata"], j["strata"]);

  // max_tokens caps all output, thinking included.
  j = create(s, message_body("Add up 3, 5 and 34.",
                             {{"max_tokens", 12},
                              {"thinking", {{"type", "enabled"}, {"budget_tokens", 10}}}}));
  EXPECT_EQ(j["stop_reason"], "max_tokens") << j.dump();
  EXPECT_EQ(j["usage"]["output_tokens"], 12);

  // Left to the model (Qwen3 thinks by default), the budget is the server's: all the thinking.
  j = create(s, message_body("Add up 3, 5 and 34."));
  EXPECT_EQ(j["content"][0]["thinking"], kProse);
  EXPECT_EQ(j["content"][1]["text"], "The total is 42.");

  // Disabled: the prompt closes an empty think block, as the chat route's enable_thinking false.
  const Json off = message_body("Add up 3, 5 and 34.", {{"thinking", {{"type", "disabled"}}}});
  j = create(s, off);
  EXPECT_FALSE(j.contains("strata"));  // no think control: thinking is off
  const int64_t chat_off = Json::parse(
      s.post("/tokenize", chat_body("Add up 3, 5 and 34.",
                                    {{"chat_template_kwargs", {{"enable_thinking", false}}}}))
          .body)["count"];
  const int64_t chat_on =
      Json::parse(s.post("/tokenize", chat_body("Add up 3, 5 and 34.")).body)["count"];
  EXPECT_NE(chat_off, chat_on);
  EXPECT_EQ(j["usage"]["input_tokens"], chat_off);
  EXPECT_EQ(Json::parse(s.post("/v1/messages/count_tokens", off).body)["input_tokens"], chat_off);
  EXPECT_EQ(create(s, message_body("Add up 3, 5 and 34."))["usage"]["input_tokens"], chat_on);
}

TEST(AnthropicServer, StopSequencesAndMaxTokensEndTheMessage) {
  TestServer s("Hello there! The END is near, and more text follows here.");
  const Json body = message_body("Hi", {{"stop_sequences", {"END", "zzz"}}});
  Json j = create(s, body);
  EXPECT_EQ(j["content"][0]["text"], "Hello there! The ");
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "END");
  const Json built = accumulate(create_streamed(s, body));
  EXPECT_EQ(built["content"], j["content"]);
  EXPECT_EQ(built["stop_reason"], "stop_sequence");
  EXPECT_EQ(built["stop_sequence"], "END");

  j = create(s, message_body("Hi", {{"max_tokens", 2}}));
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_EQ(j["usage"]["output_tokens"], 2);
  // A stop sequence that never comes: the turn ends as the model ends it.
  j = create(s, message_body("Hi", {{"stop_sequences", {"zzz"}}}));
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_TRUE(j["stop_sequence"].is_null());
}

TEST(AnthropicServer, MaxTokensPastTheContextIsCutToWhatItHolds) {
  TestServer s("one two three", {}, {}, /*context_size=*/64);
  const Json j = create(s, message_body("Hi", {{"max_tokens", 32000}}));  // what agents ask for
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_EQ(j["content"][0]["text"], "one two three");
  // The chat route keeps OpenAI's rule.
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("Hi", {{"max_tokens", 32000}})).status, 400);
  // A prompt the context cannot hold is still a 400.
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "word ";
  expect_anthropic_error(s.post("/v1/messages", message_body(long_text)), 400,
                         "invalid_request_error");
}

TEST(AnthropicServer, CountTokensIsThePromptTheMessageWouldHave) {
  TestServer s("Hello!");
  const Json body = message_body("What is a kludge?", {{"system", "Be brief."}});
  Json counting = body;
  counting.erase("max_tokens");
  const HttpResult r = s.post("/v1/messages/count_tokens", counting);
  ASSERT_EQ(r.status, 200) << r.body;
  const int64_t counted = Json::parse(r.body)["input_tokens"];
  const Json chat = {{"messages",
                      {{{"role", "system"}, {"content", "Be brief."}},
                       {{"role", "user"}, {"content", "What is a kludge?"}}}}};
  EXPECT_EQ(counted, Json::parse(s.post("/tokenize", chat).body)["count"]);
  EXPECT_EQ(create(s, body)["usage"]["input_tokens"], counted);
  // It checks the body like /v1/messages, less max_tokens.
  expect_anthropic_error(s.post("/v1/messages/count_tokens", Json{{"model", "qwen3-test"}}), 400,
                         "invalid_request_error");
  expect_anthropic_error(
      s.post("/v1/messages/count_tokens", message_body("Hi", {{"model", "claude-opus-4-1"}})), 404,
      "not_found_error");
}

TEST(AnthropicServer, AnApiKeyMayComeAsXApiKeyOrBearer) {
  server::ServerOptions options;
  options.api_key = "sk-test-123";
  TestServer s("ok", options);
  expect_anthropic_error(s.post("/v1/messages", message_body("Hi")), 401, "authentication_error");
  expect_anthropic_error(s.post("/v1/messages", message_body("Hi"), {{"x-api-key", "sk-test-124"}}),
                         401, "authentication_error");
  EXPECT_EQ(s.post("/v1/messages", message_body("Hi"),
                   {{"x-api-key", "sk-test-123"}, {"anthropic-version", "2023-06-01"}})
                .status,
            200);
  EXPECT_EQ(
      s.post("/v1/messages", message_body("Hi"), {{"Authorization", "Bearer sk-test-123"}}).status,
      200);
  EXPECT_EQ(s.post("/v1/messages/count_tokens", message_body("Hi"), {{"x-api-key", "sk-test-123"}})
                .status,
            200);
  // The OpenAI routes take either too, and keep their own error shape.
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("Hi"), {{"x-api-key", "sk-test-123"}}).status,
            200);
  const HttpResult r = s.post("/v1/chat/completions", chat_body("Hi"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "missing_api_key");
}

TEST(AnthropicServer, AnUnknownModelIsA404UnlessAnyModelIsServed) {
  TestServer strict("ok");
  expect_anthropic_error(
      strict.post("/v1/messages", message_body("Hi", {{"model", "claude-sonnet-4-5"}})), 404,
      "not_found_error");
  EXPECT_EQ(
      strict.post("/v1/chat/completions", chat_body("Hi", {{"model", "claude-sonnet-4-5"}})).status,
      404);

  server::ServerOptions options;
  options.settings.any_model = true;
  TestServer any("ok", options);
  const Json j = create(any, message_body("Hi", {{"model", "claude-sonnet-4-5"}}));
  EXPECT_EQ(j["model"], "qwen3-test");  // the model that answered
  EXPECT_EQ(j["content"][0]["text"], "ok");
  const HttpResult chat = any.post("/v1/chat/completions", chat_body("Hi", {{"model", "gpt-5"}}));
  EXPECT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(Json::parse(chat.body)["model"], "qwen3-test");
  EXPECT_EQ(any.post("/v1/messages/count_tokens", message_body("Hi", {{"model", "x"}})).status,
            200);
  EXPECT_EQ(any.health()["settings"]["any_model"]["value"], true);
}

TEST(AnthropicServer, EveryErrorHasAnthropicsShape) {
  server::ServerOptions options;
  options.connections.limits.max_body_bytes = 4096;
  TestServer s("ok", options);
  expect_anthropic_error(http_request(s.port(), "POST", "/v1/messages", "{\"messages\": ["), 400,
                         "invalid_request_error");
  expect_anthropic_error(http_request(s.port(), "POST", "/v1/messages", "[1]"), 400,
                         "invalid_request_error");
  Json no_max = message_body("Hi");
  no_max.erase("max_tokens");
  expect_anthropic_error(s.post("/v1/messages", no_max), 400, "invalid_request_error");
  expect_anthropic_error(s.post("/v1/messages", message_body("Hi", {{"temperature", 2}})), 400,
                         "invalid_request_error");
  expect_anthropic_error(s.post("/v1/messages", message_body(std::string(5000, 'x'))), 413,
                         "request_too_large");
  expect_anthropic_error(s.get("/v1/messages"), 405, "invalid_request_error");
  expect_anthropic_error(s.post("/v1/messages/batches", message_body("Hi")), 404,
                         "not_found_error");
  // The OpenAI routes keep OpenAI's shape.
  const HttpResult chat = s.post("/v1/chat/completions", chat_body(std::string(5000, 'x')));
  EXPECT_EQ(chat.status, 413);
  EXPECT_EQ(Json::parse(chat.body)["error"]["code"], "request_too_large");
  EXPECT_EQ(s.post("/v1/messages", message_body("Hi")).status, 200);  // serving goes on
}

ReplyModel::Script endless(int delay_ms) {
  ReplyModel::Script script;
  script.endless = true;
  script.step_delay = std::chrono::milliseconds(delay_ms);
  return script;
}

// Waits until /health reports `key` at `value`, up to 5 s.
void wait_for(TestServer& s, const std::string& key, int value) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5) &&
         s.health()["requests"][key] != value)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.health()["requests"][key], value);
}

// The same queue as chat: a full queue is overloaded_error, a client that goes is cancelled, and
// a generation cut by shutdown ends its stream with an error event.
TEST(AnthropicServer, MessagesShareTheQueueAdmissionAndCancellation) {
  server::ServerOptions options;
  options.max_concurrency = 1;
  TestServer s("", options, endless(2), /*context_size=*/4096);
  const Json body =
      message_body("Go on", {{"thinking", {{"type", "disabled"}}}, {"max_tokens", 3000}});
  Json streaming = body;
  streaming["stream"] = true;
  {
    HttpConnection c(s.port());
    c.send_request("POST", "/v1/messages", streaming.dump());
    c.read_until("text_delta");
    const HttpResult busy = s.post("/v1/messages", body);
    expect_anthropic_error(busy, 503, "overloaded_error");
    EXPECT_EQ(busy.headers.at("retry-after"), "1");
    EXPECT_EQ(s.post("/v1/chat/completions", chat_body("Hi")).status, 503);  // one queue
    c.close();
  }
  wait_for(s, "cancelled", 1);
  HttpConnection c(s.port());
  c.send_request("POST", "/v1/messages", streaming.dump());
  c.read_until("text_delta");
  s.shutdown(std::chrono::milliseconds(50));
  const std::vector<Event> events = read_events(c.read_response());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().name, "error");
  EXPECT_EQ(events.back().data["error"]["type"], "overloaded_error");
}

}  // namespace
}  // namespace strata
