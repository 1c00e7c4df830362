// Responses response shaping: the response object (status, incomplete_details, usage, the
// request's settings, output items of each kind) and the stream's events, their names, sequence
// numbers, order and payloads, as the openai SDK's types define them (resources/responses/
// responses.d.ts: Response, ResponseReasoningItem, ResponseOutputMessage,
// ResponseFunctionToolCall, ResponseStreamEvent).
#include "server/responses_response.h"

#include <gtest/gtest.h>

#include <vector>

#include "sse_events.h"

namespace strata::server {
namespace {

using text::chat::ParsedDelta;
using text::chat::ParsedMessage;
using text::chat::ToolCall;

const ResponseHeader kHeader{"resp_abc", 1700000000, "qwen3-test"};
const OrderedJson kSettings = OrderedJson::parse(R"({"instructions": "Be brief.",
  "max_output_tokens": 50, "parallel_tool_calls": true, "previous_response_id": null,
  "reasoning": {"effort": null, "summary": null}, "store": true, "temperature": 1.0,
  "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
  "truncation": "disabled", "user": null, "metadata": {"k": "v"}})");

bool starts_with(const OrderedJson& s, const std::string& prefix) {
  return s.is_string() && s.get<std::string>().rfind(prefix, 0) == 0;
}

using Event = test::SseEvent<OrderedJson>;

std::vector<Event> events(const std::string& sse) { return test::sse_events<OrderedJson>(sse); }

std::vector<std::string> names(const std::vector<Event>& es) { return test::event_names(es); }

ToolCall weather_call() { return {0, "call_1", "get_weather", R"({"city":"Paris"})"}; }

TEST(ResponsesResponse, AResponseObjectHasOpenAisFieldsInOrder) {
  ParsedMessage m;
  m.content = "Hello!";
  const Usage usage{
      .prompt_tokens = 10, .completion_tokens = 4, .cached_tokens = 3, .reasoning_tokens = 1};
  const OrderedJson j =
      response_json(kHeader, kSettings, "completed", response_output_json(m, false), &usage);
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"id",
                                            "object",
                                            "created_at",
                                            "status",
                                            "background",
                                            "error",
                                            "incomplete_details",
                                            "instructions",
                                            "max_output_tokens",
                                            "model",
                                            "output",
                                            "parallel_tool_calls",
                                            "previous_response_id",
                                            "reasoning",
                                            "store",
                                            "temperature",
                                            "text",
                                            "tool_choice",
                                            "tools",
                                            "top_p",
                                            "truncation",
                                            "usage",
                                            "user",
                                            "metadata"}));
  EXPECT_EQ(j["id"], "resp_abc");
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["created_at"], 1700000000);
  EXPECT_EQ(j["status"], "completed");
  EXPECT_TRUE(j["error"].is_null());
  EXPECT_TRUE(j["incomplete_details"].is_null());
  EXPECT_EQ(j["model"], "qwen3-test");
  EXPECT_EQ(j["instructions"], "Be brief.");
  EXPECT_EQ(j["metadata"], OrderedJson({{"k", "v"}}));
  EXPECT_EQ(j["usage"], OrderedJson::parse(R"({"input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0}, "output_tokens": 4,
    "output_tokens_details": {"reasoning_tokens": 1}, "total_tokens": 14})"));
  ASSERT_EQ(j["output"].size(), 1u);
  const OrderedJson& item = j["output"][0];
  EXPECT_TRUE(starts_with(item["id"], "msg_")) << item;
  EXPECT_EQ(item["type"], "message");
  EXPECT_EQ(item["status"], "completed");
  EXPECT_EQ(item["role"], "assistant");
  EXPECT_EQ(item["content"], OrderedJson::parse(R"([{"type": "output_text", "annotations": [],
    "logprobs": [], "text": "Hello!"}])"));
}

TEST(ResponsesResponse, OutputItemsAreReasoningThenMessageThenFunctionCalls) {
  ParsedMessage m;
  m.reasoning_content = "Think.";
  m.content = "Let me look.";
  m.tool_calls = {weather_call(), {1, "call_2", "now", "{}"}};
  const OrderedJson out = response_output_json(m, false);
  ASSERT_EQ(out.size(), 4u) << out.dump();
  EXPECT_TRUE(starts_with(out[0]["id"], "rs_"));
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["summary"], OrderedJson::array());
  EXPECT_EQ(out[0]["content"],
            OrderedJson::parse(R"([{"type": "reasoning_text", "text": "Think."}])"));
  EXPECT_EQ(out[1]["type"], "message");
  EXPECT_EQ(out[1]["content"][0]["text"], "Let me look.");
  EXPECT_TRUE(starts_with(out[2]["id"], "fc_"));
  OrderedJson call = out[2];
  call.erase("id");
  EXPECT_EQ(call, OrderedJson::parse(R"({"type": "function_call", "status": "completed",
    "arguments": "{\"city\":\"Paris\"}", "call_id": "call_1", "name": "get_weather"})"));
  EXPECT_EQ(out[3]["call_id"], "call_2");
  EXPECT_NE(out[2]["id"], out[3]["id"]);
  // Only calls: no message item.
  ParsedMessage calls;
  calls.tool_calls = {weather_call()};
  EXPECT_EQ(response_output_json(calls, false).size(), 1u);
  EXPECT_EQ(response_output_json(ParsedMessage{}, false), OrderedJson::array());
}

TEST(ResponsesResponse, AnIncompleteResponseSaysWhyAndMarksItsLastItem) {
  EXPECT_EQ(response_status("length"), "incomplete");
  EXPECT_EQ(response_status("stop"), "completed");
  EXPECT_EQ(response_status("tool_calls"), "completed");
  ParsedMessage m;
  m.reasoning_content = "Think.";
  m.content = "Half an ans";
  const OrderedJson out = response_output_json(m, true);
  EXPECT_EQ(out[0]["status"], "completed");
  EXPECT_EQ(out[1]["status"], "incomplete");
  const OrderedJson j = response_json(kHeader, kSettings, "incomplete", out, nullptr);
  EXPECT_EQ(j["incomplete_details"], OrderedJson({{"reason", "max_output_tokens"}}));
  EXPECT_TRUE(j["usage"].is_null());
  ParsedMessage thinking_only;
  thinking_only.reasoning_content = "Think.";
  EXPECT_EQ(response_output_json(thinking_only, true)[0]["status"], "incomplete");
}

TEST(ResponsesResponse, AStreamSendsTheEventsInOrderWithSequenceNumbers) {
  ResponsesStream stream(kHeader, kSettings);
  std::string sse = stream.start();
  ParsedDelta d1;
  d1.reasoning_content = "Thi";
  ParsedDelta d2;
  d2.reasoning_content = "nk.";
  d2.content = "Hel";
  ParsedDelta d3;
  d3.content = "lo";
  d3.tool_calls = {weather_call()};
  for (const ParsedDelta& d : {d1, d2, d3}) sse += stream.delta(d);
  const Usage usage{.prompt_tokens = 10, .completion_tokens = 6};
  sse += stream.finish("tool_calls", usage, OrderedJson{{"x", 1}});
  const std::vector<Event> es = events(sse);
  EXPECT_EQ(
      names(es),
      (std::vector<std::string>{
          "response.created", "response.in_progress",
          // the reasoning item
          "response.output_item.added", "response.content_part.added",
          "response.reasoning_text.delta", "response.reasoning_text.delta",
          "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
          // the message
          "response.output_item.added", "response.content_part.added", "response.output_text.delta",
          "response.output_text.delta", "response.output_text.done", "response.content_part.done",
          "response.output_item.done",
          // the call
          "response.output_item.added", "response.function_call_arguments.delta",
          "response.function_call_arguments.done", "response.output_item.done",
          "response.completed"}));
  for (size_t i = 0; i < es.size(); ++i) EXPECT_EQ(es[i].data["sequence_number"], i) << i;

  const OrderedJson& created = es[0].data["response"];
  EXPECT_EQ(created["status"], "in_progress");
  EXPECT_EQ(created["output"], OrderedJson::array());
  EXPECT_TRUE(created["usage"].is_null());
  EXPECT_EQ(created["id"], "resp_abc");
  EXPECT_EQ(es[1].data["response"], created);

  // Reasoning: the item opens empty, its part is reasoning_text, deltas name item and indexes.
  const OrderedJson& added = es[2].data;
  EXPECT_EQ(added["output_index"], 0);
  EXPECT_EQ(added["item"]["type"], "reasoning");
  EXPECT_EQ(added["item"]["status"], "in_progress");
  EXPECT_EQ(added["item"]["content"], OrderedJson::array());
  const OrderedJson rs_id = added["item"]["id"];
  EXPECT_TRUE(starts_with(rs_id, "rs_"));
  EXPECT_EQ(es[3].data["part"], OrderedJson({{"type", "reasoning_text"}, {"text", ""}}));
  EXPECT_EQ(es[4].data, OrderedJson::parse(R"({"type": "response.reasoning_text.delta",
    "sequence_number": 4, "item_id": )" + rs_id.dump() +
                                           R"(, "output_index": 0,
    "content_index": 0, "delta": "Thi"})"));
  EXPECT_EQ(es[6].data["text"], "Think.");
  EXPECT_EQ(es[7].data["part"], OrderedJson({{"type", "reasoning_text"}, {"text", "Think."}}));
  EXPECT_EQ(es[8].data["item"]["status"], "completed");
  EXPECT_EQ(es[8].data["item"]["content"][0]["text"], "Think.");

  // The message.
  const OrderedJson msg_id = es[9].data["item"]["id"];
  EXPECT_TRUE(starts_with(msg_id, "msg_"));
  EXPECT_EQ(es[9].data["output_index"], 1);
  EXPECT_EQ(es[9].data["item"]["content"], OrderedJson::array());
  EXPECT_EQ(es[10].data["part"]["type"], "output_text");
  EXPECT_EQ(es[10].data["part"]["text"], "");
  EXPECT_EQ(es[11].data, OrderedJson::parse(R"({"type": "response.output_text.delta",
    "sequence_number": 11, "item_id": )" + msg_id.dump() +
                                            R"(, "output_index": 1,
    "content_index": 0, "delta": "Hel", "logprobs": []})"));
  EXPECT_EQ(es[13].data["text"], "Hello");
  EXPECT_EQ(es[14].data["part"]["text"], "Hello");
  EXPECT_EQ(es[15].data["item"]["content"][0]["text"], "Hello");

  // The call: whole arguments in one delta; done names the function.
  EXPECT_EQ(es[16].data["item"]["arguments"], "");
  EXPECT_EQ(es[16].data["item"]["status"], "in_progress");
  EXPECT_EQ(es[16].data["item"]["call_id"], "call_1");
  EXPECT_EQ(es[17].data["delta"], R"({"city":"Paris"})");
  EXPECT_EQ(es[17].data["output_index"], 2);
  EXPECT_EQ(es[18].data["name"], "get_weather");
  EXPECT_EQ(es[18].data["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(es[19].data["item"]["status"], "completed");

  // The end: the whole response, its output the items as their done events had them.
  const OrderedJson& done = es.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["output"],
            OrderedJson::array({es[8].data["item"], es[15].data["item"], es[19].data["item"]}));
  EXPECT_EQ(done["usage"]["total_tokens"], 16);
  EXPECT_EQ(done["strata"], OrderedJson({{"x", 1}}));
  EXPECT_EQ(stream.response(), done);
}

TEST(ResponsesResponse, AStreamEndsIncompleteOrFailed) {
  ResponsesStream cut(kHeader, kSettings);
  ParsedDelta d;
  d.content = "Half";
  std::string sse = cut.start();  // (one call a statement: + does not order its operands)
  sse += cut.delta(d);
  sse += cut.finish("length", Usage{});
  std::vector<Event> es = events(sse);
  EXPECT_EQ(es.back().name, "response.incomplete");
  EXPECT_EQ(es.back().data["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(es[es.size() - 2].data["item"]["status"], "incomplete");
  EXPECT_FALSE(es.back().data["response"].contains("strata"));

  ResponsesStream failed(kHeader, kSettings);
  sse = failed.start();
  sse += failed.delta(d);
  sse += failed.fail(ApiError(500, "Generation failed: boom", {}, {}, "server_error"));
  es = events(sse);
  const std::vector<std::string> n = names(es);
  ASSERT_GE(n.size(), 3u);
  EXPECT_EQ(n[n.size() - 2], "error");
  EXPECT_EQ(n.back(), "response.failed");
  const OrderedJson& error = es[es.size() - 2].data;
  EXPECT_EQ(error["message"], "Generation failed: boom");
  EXPECT_TRUE(error["code"].is_null());
  EXPECT_TRUE(error["param"].is_null());
  EXPECT_FALSE(error.contains("error"));  // the SDK would throw on a data.error field instead
  const OrderedJson& response = es.back().data["response"];
  EXPECT_EQ(response["status"], "failed");
  EXPECT_EQ(response["error"],
            OrderedJson({{"code", "server_error"}, {"message", "Generation failed: boom"}}));
  EXPECT_EQ(response["output"].size(), 1u);
  for (size_t i = 0; i < es.size(); ++i) EXPECT_EQ(es[i].data["sequence_number"], i);

  // A failure that is the request's fault (a 4xx) names it so in the failed response.
  ResponsesStream refused(kHeader, kSettings);
  sse = refused.start();
  sse += refused.fail(ApiError(400, "the output constraint is too ambiguous"));
  es = events(sse);
  EXPECT_EQ(es.back().data["response"]["error"]["code"], "invalid_prompt");
}

}  // namespace
}  // namespace strata::server
