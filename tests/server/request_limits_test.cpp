// Hostile request bodies: 100,000-deep nesting in each of the eight places a client's JSON reaches
// is a 400 and never a crash; huge objects are refused fast; every per-field cap is a 400 naming
// the field and the cap.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include "core/error.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "text/chat/chat_template.h"

namespace strata::server {
namespace {

constexpr size_t kHostileDepth = 100'000;

// 100,000 nested arrays: a 200 KB body, as in the issue.
std::string deep_arrays(size_t depth = kHostileDepth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// {"a":{"a":...{"a":0}...}}
std::string deep_objects(size_t depth = kHostileDepth) {
  std::string text;
  for (size_t i = 0; i < depth; ++i) text += "{\"a\":";
  return text + "0" + std::string(depth, '}');
}

const std::string kUser = R"({"role": "user", "content": "Hi"})";

// Runs `parse` on the body and expects a 400 with `code` (and `param` when given).
void expect_api_400(const std::function<void()>& parse, const std::string& code,
                    const std::string& param = "", const std::string& words = "") {
  try {
    parse();
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

void expect_chat_400(const std::string& body, const std::string& code,
                     const std::string& param = "", const std::string& words = "") {
  expect_api_400([&] { parse_chat_request(parse_body(body)); }, code, param, words);
}

void expect_completion_400(const std::string& body, const std::string& code,
                           const std::string& param = "", const std::string& words = "") {
  expect_api_400([&] { parse_completion_request(parse_body(body)); }, code, param, words);
}

TEST(RequestLimits, DeepNestingInEachOfTheEightPlacesIsA400) {
  for (const std::string& deep : {deep_arrays(), deep_objects()}) {
    // 1. The body itself, and a field at its top level.
    expect_chat_400(deep, "json_too_deep", "", "nests deeper than 64 levels");
    expect_chat_400(R"({"model": "m", "extra": )" + deep + "}", "json_too_deep");
    // 2. A field of a message.
    expect_chat_400(R"({"messages": [{"role": "user", "content": "Hi", "name": )" + deep + "}]}",
                    "json_too_deep");
    // 3. A message's content.
    expect_chat_400(R"({"messages": [{"role": "user", "content": )" + deep + "}]}",
                    "json_too_deep");
    // 4. A tool's parameters.
    expect_chat_400(R"({"messages": [)" + kUser +
                        R"(], "tools": [{"type": "function", "function": {"name": "f",
                        "parameters": )" +
                        deep + "}}]}",
                    "json_too_deep");
    // 5. chat_template_kwargs.
    expect_chat_400(
        R"({"messages": [)" + kUser + R"(], "chat_template_kwargs": {"x": )" + deep + "}}",
        "json_too_deep");
    // 6. A /tokenize body (its handler reads it with parse_body too).
    expect_api_400([&] { parse_body(R"({"content": )" + deep + "}"); }, "json_too_deep");
    // 7. The completions prompt.
    expect_completion_400(R"({"prompt": )" + deep + "}", "json_too_deep");
  }
  // 8. Tool-call arguments: JSON text inside a string, so the body itself is shallow.
  for (const std::string& deep : {deep_arrays(), deep_objects()}) {
    std::string escaped;
    for (char c : deep) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
    const std::string body =
        R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
        "type": "function", "function": {"name": "f", "arguments": ")" +
        escaped + R"("}}]}]})";
    expect_chat_400(body, "json_too_deep", "messages[0].tool_calls[0].function.arguments",
                    "nests deeper than 64 levels");
    // The chat layer refuses the same text on its own, for callers that skip validation.
    const OrderedJson messages = parse_body(body)["messages"];
    try {
      text::chat::normalize_messages(messages, false);
      ADD_FAILURE() << "normalize_messages accepted a 100,000-deep arguments text";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("nests deeper than 64 levels"), std::string::npos)
          << e.what();
      EXPECT_EQ(api_error_from(e).status(), 400);
    }
  }
}

TEST(RequestLimits, NestingUpToTheLimitIsServed) {
  // 64 levels in all: the body, "messages", a message and "content" take 3, parts the rest.
  std::string parts = std::string(61, '[') + std::string(61, ']');
  const OrderedJson body =
      parse_body(R"({"messages": [{"role": "user", "content": "Hi", "x": )" + parts + "}]}");
  EXPECT_EQ(parse_chat_request(body).messages.size(), 1u);
  expect_chat_400(R"({"messages": [{"role": "user", "content": "Hi", "x": [)" + parts + "]}]}",
                  "json_too_deep");
  // Arguments text of 64 levels is fine on its own (its depth is counted from itself).
  const std::string args = std::string(64, '[') + std::string(64, ']');
  const ChatCompletionRequest r = parse_chat_request(parse_body(
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f",
      "arguments": ")" +
      args + R"("}}]}]})"));
  const OrderedJson normalized = text::chat::normalize_messages(r.messages, false);
  EXPECT_TRUE(normalized[0]["tool_calls"][0]["function"]["arguments"].is_array());
}

TEST(RequestLimits, HugeObjectsAreRefusedWithinASecond) {
  auto object_of = [](size_t n, const char* prefix) {
    std::string text = "{";
    for (size_t i = 0; i < n; ++i)
      text += (i ? ",\"" : "\"") + std::string(prefix) + std::to_string(i) + "\":1";
    return text + "}";
  };
  const std::string keys = object_of(200'000, "k");
  const std::string bias =
      R"({"messages": [)" + kUser + R"(], "logit_bias": )" + object_of(100'000, "") + "}";
  const auto start = std::chrono::steady_clock::now();
  expect_chat_400(keys, "json_too_large", "", "more than 4096 keys");
  expect_chat_400(bias, "json_too_large", "", "more than 4096 keys");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  // A million small values: one past the document's limit.
  std::string zeros = R"({"prompt": [)";
  for (size_t i = 0; i < (1u << 20); ++i) zeros += i ? ",0" : "0";
  expect_completion_400(zeros + "]}", "json_too_large", "", "more than 1048576 values");
}

TEST(RequestLimits, InvalidJsonStaysInvalidJson) {
  expect_api_400([] { parse_body(R"({"messages": [})"); }, "invalid_json", "", "invalid JSON");
  expect_chat_400(R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
      {"name": "f", "arguments": "{\"city\": "}}]}]})",
                  "invalid_json", "messages[0].tool_calls[0].function.arguments", "invalid JSON");
  // Blank arguments mean no arguments, as before.
  EXPECT_NO_THROW(parse_chat_request(parse_body(
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
      {"name": "f", "arguments": " "}}]}]})")));
}

// {"messages": [user] + extra} with `extra` the rest of the body.
OrderedJson chat_with(OrderedJson extra) {
  OrderedJson body = {{"messages", OrderedJson::array({OrderedJson::parse(kUser)})}};
  body.update(extra);
  return body;
}

void expect_cap(const OrderedJson& body, const std::string& param, const std::string& code,
                const std::string& words) {
  expect_api_400([&] { parse_chat_request(body); }, code, param, words);
}

TEST(RequestLimits, MessagesAreCappedAtOneHundredThousand) {
  OrderedJson messages = OrderedJson::array();
  for (size_t i = 0; i < kMaxMessages; ++i) messages.push_back(OrderedJson::parse(kUser));
  EXPECT_EQ(parse_chat_request({{"messages", messages}}).messages.size(), kMaxMessages);
  messages.push_back(OrderedJson::parse(kUser));
  expect_cap({{"messages", messages}}, "messages", "array_above_max_length",
             "maximum length 100000, but got an array with length 100001");
}

TEST(RequestLimits, ContentPartsAndToolCallsPerMessageAreCapped) {
  OrderedJson parts = OrderedJson::array();
  for (size_t i = 0; i < kMaxContentParts; ++i) parts.push_back({{"type", "text"}, {"text", "x"}});
  EXPECT_NO_THROW(parse_chat_request({{"messages", {{{"role", "user"}, {"content", parts}}}}}));
  parts.push_back({{"type", "text"}, {"text", "x"}});
  expect_cap({{"messages", {{{"role", "user"}, {"content", parts}}}}}, "messages[0].content",
             "array_above_max_length", "maximum length 1024");

  OrderedJson calls = OrderedJson::array();
  for (size_t i = 0; i < kMaxToolCalls; ++i)
    calls.push_back({{"id", "c"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}});
  EXPECT_NO_THROW(
      parse_chat_request({{"messages", {{{"role", "assistant"}, {"tool_calls", calls}}}}}));
  calls.push_back(calls[0]);
  expect_cap({{"messages", {{{"role", "assistant"}, {"tool_calls", calls}}}}},
             "messages[0].tool_calls", "array_above_max_length", "maximum length 256");
}

OrderedJson tool(const std::string& name) {
  return {{"type", "function"},
          {"function", {{"name", name}, {"parameters", {{"type", "object"}}}}}};
}

TEST(RequestLimits, ToolsAreCappedAndTheirNamesUnique) {
  OrderedJson tools = OrderedJson::array();
  for (size_t i = 0; i < kMaxTools; ++i) tools.push_back(tool(fmt::format("f{}", i)));
  EXPECT_EQ(parse_chat_request(chat_with({{"tools", tools}})).tools.size(), kMaxTools);
  tools.push_back(tool("one_more"));
  expect_cap(chat_with({{"tools", tools}}), "tools", "array_above_max_length",
             "maximum length 512, but got an array with length 513");
  expect_cap(chat_with({{"tools", {tool("a"), tool("b"), tool("a")}}}), "tools[2].function.name",
             "invalid_value", "'a' is also the name of tools[0]");
}

TEST(RequestLimits, StopAndLogitBiasAreCapped) {
  OrderedJson stops = OrderedJson::array();
  for (size_t i = 0; i < kMaxStops; ++i) stops.push_back(fmt::format("s{}", i));
  EXPECT_EQ(parse_chat_request(chat_with({{"stop", stops}})).options.stop.size(), kMaxStops);
  stops.push_back("one more");
  expect_cap(chat_with({{"stop", stops}}), "stop", "array_above_max_length", "maximum length 16");

  OrderedJson bias = OrderedJson::object();
  for (size_t i = 0; i < kMaxLogitBias; ++i) bias[std::to_string(i)] = -1;
  EXPECT_EQ(
      parse_chat_request(chat_with({{"logit_bias", bias}})).options.sampling.logit_bias.size(),
      kMaxLogitBias);
  bias["99999"] = 1;
  expect_cap(chat_with({{"logit_bias", bias}}), "logit_bias", "object_above_max_size",
             "at most 1024 token ids, but got 1025");
}

}  // namespace
}  // namespace strata::server
