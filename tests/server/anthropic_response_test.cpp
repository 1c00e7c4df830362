// Anthropic response shaping: the message object (thinking, text and tool_use blocks, stop reason,
// stop sequence, usage) and the stream's events, their names, order and payloads, as Anthropic's
// API documents them.
#include "server/anthropic_response.h"

#include <gtest/gtest.h>

#include <vector>

#include "sse_events.h"

namespace strata::server {
namespace {

using text::chat::ParsedDelta;
using text::chat::ParsedMessage;
using text::chat::ToolCall;

const ResponseHeader kHeader{"msg_abc", 0, "qwen3-test"};

using Event = test::SseEvent<OrderedJson>;

std::vector<Event> events(const std::string& sse) { return test::sse_events<OrderedJson>(sse); }

std::vector<std::string> names(const std::vector<Event>& es) { return test::event_names(es); }

ToolCall call(const std::string& id, const std::string& name, const std::string& arguments) {
  ToolCall c;
  c.id = id;
  c.name = name;
  c.arguments = arguments;
  return c;
}

Usage usage(int64_t prompt, int64_t cached, int64_t completion) {
  Usage u;
  u.prompt_tokens = prompt;
  u.cached_tokens = cached;
  u.completion_tokens = completion;
  return u;
}

TEST(AnthropicResponse, StopReasonsInAnthropicsWords) {
  EXPECT_EQ(anthropic_stop_reason("stop", ""), "end_turn");
  EXPECT_EQ(anthropic_stop_reason("stop", "END"), "stop_sequence");
  EXPECT_EQ(anthropic_stop_reason("length", ""), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason("tool_calls", ""), "tool_use");
  EXPECT_EQ(anthropic_stop_reason("tool_calls", "END"), "tool_use");
}

TEST(AnthropicResponse, UsageCountsCachedInputApart) {
  EXPECT_EQ(anthropic_usage_json(usage(100, 64, 7)), OrderedJson::parse(R"({"input_tokens": 36,
      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 64, "output_tokens": 7})"));
}

TEST(AnthropicResponse, AMessageHasThinkingTextAndToolUseBlocksInOrder) {
  ParsedMessage m;
  m.reasoning_content = "The user wants the weather.";
  m.content = "Let me check.";
  m.tool_calls = {call("toolu_1", "get_weather", R"({"city":"Paris","days":2})")};
  const OrderedJson j = anthropic_message_json(kHeader, m, "tool_calls", "", usage(20, 0, 30));
  const OrderedJson expected = {
      {"id", "msg_abc"},
      {"type", "message"},
      {"role", "assistant"},
      {"model", "qwen3-test"},
      {"content",
       {{{"type", "thinking"},
         {"thinking", "The user wants the weather."},
         {"signature", thinking_signature("The user wants the weather.")}},
        {{"type", "text"}, {"text", "Let me check."}},
        {{"type", "tool_use"},
         {"id", "toolu_1"},
         {"name", "get_weather"},
         {"input", {{"city", "Paris"}, {"days", 2}}}}}},
      {"stop_reason", "tool_use"},
      {"stop_sequence", nullptr},
      {"usage", anthropic_usage_json(usage(20, 0, 30))}};
  EXPECT_EQ(j, expected) << j.dump(2);
}

TEST(AnthropicResponse, AStopSequenceIsNamedAndEmptyPartsAreLeftOut) {
  ParsedMessage m;
  m.content = "one, two";
  OrderedJson j = anthropic_message_json(kHeader, m, "stop", "three", usage(5, 0, 4));
  EXPECT_EQ(j["content"], OrderedJson::parse(R"([{"type": "text", "text": "one, two"}])"));
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "three");
  j = anthropic_message_json(kHeader, ParsedMessage{}, "length", "", usage(5, 0, 0));
  EXPECT_EQ(j["content"], OrderedJson::array());
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  EXPECT_TRUE(j["stop_sequence"].is_null());
}

TEST(AnthropicResponse, ThinkingSignaturesAreStableAndDiffer) {
  EXPECT_EQ(thinking_signature("abc"), thinking_signature("abc"));
  EXPECT_NE(thinking_signature("abc"), thinking_signature("abd"));
  EXPECT_FALSE(thinking_signature("").empty());
}

TEST(AnthropicResponse, AStreamOpensAndClosesEachBlockInAnthropicsOrder) {
  AnthropicStream stream(kHeader);
  std::string sse = stream.start(20);
  ParsedDelta d;
  d.reasoning_content = "Think";
  sse += stream.delta(d);
  d.reasoning_content = "ing.";
  sse += stream.delta(d);
  d = {};
  d.reasoning_content = " Done.";  // one delta ending the thinking and starting the answer
  d.content = "Hello";
  sse += stream.delta(d);
  d = {};
  d.content = " there.";
  d.tool_calls = {call("toolu_1", "f", R"({"a":1})"), call("toolu_2", "g", "{}")};
  sse += stream.delta(d);
  sse += stream.delta(ParsedDelta{});  // nothing: no events
  sse += stream.finish("tool_calls", "", usage(20, 4, 12));

  const std::vector<Event> es = events(sse);
  EXPECT_EQ(names(es),
            (std::vector<std::string>{"message_start",       "ping",
                                      "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_delta", "content_block_stop",  // thinking
                                      "content_block_start", "content_block_delta",
                                      "content_block_delta",
                                      "content_block_stop",  // text
                                      "content_block_start", "content_block_delta",
                                      "content_block_stop",  // tool 1
                                      "content_block_start", "content_block_delta",
                                      "content_block_stop",  // tool 2
                                      "message_delta",       "message_stop"}));
  EXPECT_EQ(es[0].data, OrderedJson::parse(R"({"type": "message_start", "message": {
      "id": "msg_abc", "type": "message", "role": "assistant", "model": "qwen3-test",
      "content": [], "stop_reason": null, "stop_sequence": null,
      "usage": {"input_tokens": 20, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0, "output_tokens": 0}}})"));
  EXPECT_EQ(es[2].data, OrderedJson::parse(R"({"type": "content_block_start", "index": 0,
      "content_block": {"type": "thinking", "thinking": "", "signature": ""}})"));
  EXPECT_EQ(es[3].data["delta"],
            OrderedJson::parse(R"({"type": "thinking_delta", "thinking": "Think"})"));
  EXPECT_EQ(es[5].data["delta"]["thinking"], " Done.");
  EXPECT_EQ(es[6].data, (OrderedJson{{"type", "content_block_delta"},
                                     {"index", 0},
                                     {"delta",
                                      {{"type", "signature_delta"},
                                       {"signature", thinking_signature("Thinking. Done.")}}}}));
  EXPECT_EQ(es[7].data, OrderedJson::parse(R"({"type": "content_block_stop", "index": 0})"));
  EXPECT_EQ(es[8].data, OrderedJson::parse(R"({"type": "content_block_start", "index": 1,
      "content_block": {"type": "text", "text": ""}})"));
  EXPECT_EQ(es[9].data["delta"], OrderedJson::parse(R"({"type": "text_delta", "text": "Hello"})"));
  EXPECT_EQ(es[10].data["delta"]["text"], " there.");
  EXPECT_EQ(es[11].data["index"], 1);
  EXPECT_EQ(es[12].data, OrderedJson::parse(R"({"type": "content_block_start", "index": 2,
      "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}})"));
  EXPECT_EQ(es[13].data, OrderedJson::parse(R"({"type": "content_block_delta", "index": 2,
      "delta": {"type": "input_json_delta", "partial_json": "{\"a\":1}"}})"));
  EXPECT_EQ(es[14].data["index"], 2);
  EXPECT_EQ(es[15].data["content_block"]["id"], "toolu_2");
  EXPECT_EQ(es[15].data["index"], 3);
  EXPECT_EQ(es[16].data["delta"]["partial_json"], "{}");
  EXPECT_EQ(es[18].data, OrderedJson::parse(R"({"type": "message_delta",
      "delta": {"stop_reason": "tool_use", "stop_sequence": null},
      "usage": {"input_tokens": 16, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 4, "output_tokens": 12}})"));
  EXPECT_EQ(es[19].data, OrderedJson::parse(R"({"type": "message_stop"})"));
}

TEST(AnthropicResponse, AStreamThatEndsInThinkingSignsItAndNamesTheStopSequence) {
  AnthropicStream stream(kHeader);
  ParsedDelta d;
  d.reasoning_content = "Hmm";
  std::string sse = stream.delta(d);
  sse +=
      stream.finish("stop", "END", usage(3, 0, 2), OrderedJson{{"thinking", {{"routed", false}}}});
  const std::vector<Event> es = events(sse);
  EXPECT_EQ(names(es), (std::vector<std::string>{"content_block_start", "content_block_delta",
                                                 "content_block_delta", "content_block_stop",
                                                 "message_delta", "message_stop"}));
  EXPECT_EQ(es[2].data["delta"]["type"], "signature_delta");
  EXPECT_EQ(es[4].data["delta"],
            OrderedJson::parse(R"({"stop_reason": "stop_sequence", "stop_sequence": "END"})"));
  EXPECT_EQ(es[4].data["strata"]["thinking"]["routed"], false);

  // An empty answer: no blocks at all.
  AnthropicStream empty(kHeader);
  EXPECT_EQ(names(events(empty.finish("length", "", usage(3, 0, 0)))),
            (std::vector<std::string>{"message_delta", "message_stop"}));
}

TEST(AnthropicResponse, ErrorAndPingEvents) {
  const std::vector<Event> es =
      events(AnthropicStream::ping() + AnthropicStream::error(ApiError(503, "Shutting down.")));
  EXPECT_EQ(es[0].data, OrderedJson::parse(R"({"type": "ping"})"));
  EXPECT_EQ(es[1].data, OrderedJson::parse(R"({"type": "error",
      "error": {"type": "overloaded_error", "message": "Shutting down."}})"));
}

}  // namespace
}  // namespace strata::server
