// The OpenAI Responses API end to end over HTTP, in process: the real Qwen3 tokenizer and chat
// template and a scripted model, so the checks are exact: reasoning and message items, the
// stream's events in order building the same response, a function-call round trip whose prompt is
// the chat route's, previous_response_id chaining, GET and DELETE of stored responses, store
// false, the store's bound, reasoning.effort on and off (with a scaled budget),
// max_output_tokens ending a response incomplete, and errors in OpenAI's shape.
#include <gtest/gtest.h>

#include "sse_events.h"
#include "test_server.h"
#include "thinking_model.h"

namespace strata {
namespace {

using test::chat_body;
using test::HttpResult;
using test::qwen3_tokenizer;
using test::ReplyModel;
using test::TestServer;
using test::ThinkingModel;

const Json kWeatherTool = Json::parse(R"({"type": "function", "name": "get_weather",
  "description": "Current weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}}, "required": ["city"]}, "strict": true})");
const Json kChatWeatherTool = Json::parse(R"({"type": "function", "function": {
  "name": "get_weather", "description": "Current weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}}, "required": ["city"]}}})");
const char* kToolCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const char* kThinkingReply = "<think>\nThe user greets me.\n</think>\n\nHello there!";

Json response_body(Json input, Json extra = Json::object()) {
  Json body = {{"model", "qwen3-test"}, {"input", std::move(input)}};
  body.update(extra);
  return body;
}

bool starts_with(const Json& s, const std::string& prefix) {
  return s.is_string() && s.get<std::string>().rfind(prefix, 0) == 0;
}

using Event = test::SseEvent<Json>;

// A stream's events (test::sse_events checks each frame), with sequence numbers 0, 1, 2, ...
std::vector<Event> read_events(const HttpResult& r) {
  std::vector<Event> out = test::sse_events<Json>(r.body);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].data["sequence_number"], i) << out[i].data.dump();
  return out;
}

std::vector<std::string> names(const std::vector<Event>& events) { return test::event_names(events); }

// The response a stream's events build, as the SDK accumulates them: items from their added
// events, text from the deltas, arguments from theirs, each item checked against its done event,
// the end from the last event's response.
Json accumulate(const std::vector<Event>& events) {
  Json output = Json::array();
  for (const Event& e : events) {
    const Json& d = e.data;
    if (e.name == "response.output_item.added") {
      EXPECT_EQ(d["output_index"], output.size());
      output.push_back(d["item"]);
    } else if (e.name == "response.content_part.added") {
      output[d["output_index"].get<size_t>()]["content"].push_back(d["part"]);
    } else if (e.name == "response.output_text.delta" ||
               e.name == "response.reasoning_text.delta") {
      Json& part =
          output[d["output_index"].get<size_t>()]["content"][d["content_index"].get<size_t>()];
      part["text"] = part["text"].get<std::string>() + d["delta"].get<std::string>();
    } else if (e.name == "response.function_call_arguments.delta") {
      Json& item = output[d["output_index"].get<size_t>()];
      item["arguments"] = item["arguments"].get<std::string>() + d["delta"].get<std::string>();
    } else if (e.name == "response.output_item.done") {
      Json& item = output[d["output_index"].get<size_t>()];
      item["status"] = d["item"]["status"];
      EXPECT_EQ(item, d["item"]);
    }
  }
  Json response = events.back().data["response"];
  EXPECT_EQ(response["output"], output);
  return response;
}

Json create(TestServer& s, const Json& body) {
  const HttpResult r = s.post("/v1/responses", body);
  EXPECT_EQ(r.status, 200) << r.body;
  return Json::parse(r.body);
}

std::vector<Event> create_streamed(TestServer& s, Json body) {
  body["stream"] = true;
  const HttpResult r = s.post("/v1/responses", body);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.at("content-type"), "text/event-stream");
  return read_events(r);
}

// An error in OpenAI's shape.
void expect_openai_error(const HttpResult& r, int status, const std::string& words,
                         const Json& param = nullptr) {
  EXPECT_EQ(r.status, status) << r.body;
  const Json j = Json::parse(r.body);
  ASSERT_TRUE(j.contains("error")) << r.body;
  EXPECT_EQ(j.size(), 1u) << r.body;
  const Json& e = j["error"];
  EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << r.body;
  EXPECT_EQ(e["type"], "invalid_request_error") << r.body;
  EXPECT_EQ(e["param"], param) << r.body;
  EXPECT_TRUE(e.contains("code")) << r.body;
}

int64_t chat_tokens(TestServer& s, const Json& chat) {
  const HttpResult r = s.post("/tokenize", chat);
  EXPECT_EQ(r.status, 200) << r.body;
  return Json::parse(r.body)["count"];
}

TEST(ResponsesServer, AResponseHasAReasoningItemAMessageAndUsage) {
  TestServer s(kThinkingReply);
  const Json j = create(s, response_body("Hi", {{"instructions", "Be kind."},
                                                {"metadata", {{"k", "v"}}},
                                                {"temperature", 0.5}}));
  EXPECT_TRUE(starts_with(j["id"], "resp_")) << j;
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["model"], "qwen3-test");
  EXPECT_TRUE(j["error"].is_null());
  EXPECT_TRUE(j["incomplete_details"].is_null());
  EXPECT_EQ(j["instructions"], "Be kind.");
  EXPECT_EQ(j["metadata"], Json({{"k", "v"}}));
  EXPECT_EQ(j["temperature"], 0.5);
  EXPECT_EQ(j["store"], true);
  ASSERT_EQ(j["output"].size(), 2u) << j.dump(1);
  const Json& reasoning = j["output"][0];
  EXPECT_EQ(reasoning["type"], "reasoning");
  EXPECT_TRUE(starts_with(reasoning["id"], "rs_"));
  EXPECT_EQ(reasoning["summary"], Json::array());
  EXPECT_EQ(reasoning["content"],
            Json::parse(R"([{"type": "reasoning_text", "text": "The user greets me."}])"));
  const Json& message = j["output"][1];
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["status"], "completed");
  EXPECT_EQ(message["content"][0]["type"], "output_text");
  EXPECT_EQ(message["content"][0]["text"], "Hello there!");
  EXPECT_EQ(message["content"][0]["annotations"], Json::array());
  const Json& usage = j["usage"];
  const int64_t prompt =
      chat_tokens(s, Json::parse(R"({"messages": [{"role": "system", "content": "Be kind."},
                                     {"role": "user", "content": "Hi"}]})"));
  EXPECT_EQ(usage["input_tokens"], prompt);
  EXPECT_EQ(usage["output_tokens"].get<size_t>(), qwen3_tokenizer().encode(kThinkingReply).size());
  EXPECT_EQ(usage["total_tokens"],
            usage["input_tokens"].get<int64_t>() + usage["output_tokens"].get<int64_t>());
  EXPECT_GT(usage["output_tokens_details"]["reasoning_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(usage["input_tokens_details"]["cached_tokens"], 0);
}

TEST(ResponsesServer, AStreamSendsTheEventsInOrderAndBuildsTheSameResponse) {
  TestServer s(kThinkingReply);
  const Json whole = create(s, response_body("Hi"));
  const std::vector<Event> events = create_streamed(s, response_body("Hi"));
  const std::vector<std::string> n = names(events);
  ASSERT_GE(n.size(), 14u);
  EXPECT_EQ(n[0], "response.created");
  EXPECT_EQ(n[1], "response.in_progress");
  EXPECT_EQ(n[2], "response.output_item.added");
  EXPECT_EQ(n[3], "response.content_part.added");
  EXPECT_EQ(n.back(), "response.completed");
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].data["response"]["output"], Json::array());
  // Items one after another: added, their part, deltas, done events.
  int open = -1;
  for (size_t i = 2; i + 1 < n.size(); ++i) {
    const Json& d = events[i].data;
    if (n[i] == "response.output_item.added") {
      EXPECT_EQ(open, -1) << i;
      open = d["output_index"];
    } else {
      EXPECT_EQ(d["output_index"], open) << n[i];
      if (n[i] == "response.output_item.done") open = -1;
    }
  }
  EXPECT_EQ(open, -1);
  Json built = accumulate(events);
  EXPECT_NE(built["id"], whole["id"]);
  // Ids are each response's own; the rest is the same.
  built["id"] = whole["id"];
  ASSERT_EQ(built["output"].size(), whole["output"].size());
  for (size_t i = 0; i < built["output"].size(); ++i)
    built["output"][i]["id"] = whole["output"][i]["id"];
  built["created_at"] = whole["created_at"];
  EXPECT_EQ(built, whole) << built.dump(1) << "\n" << whole.dump(1);
  for (const Event& e : events) EXPECT_EQ(e.data.dump().find("think>"), std::string::npos);
}

TEST(ResponsesServer, AFunctionCallRoundTripsAndItsOutputRendersAsTheChatRoutesToolMessage) {
  TestServer s(kToolCall);
  const Json body = response_body("Weather in Paris?", {{"tools", {kWeatherTool}}});
  const Json j = create(s, body);
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["tools"], Json::array({kWeatherTool}));
  ASSERT_EQ(j["output"].size(), 1u) << j.dump();
  const Json& call = j["output"][0];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_TRUE(starts_with(call["id"], "fc_"));
  EXPECT_TRUE(starts_with(call["call_id"], "call_"));
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  EXPECT_EQ(call["status"], "completed");

  // Streamed, the call comes whole through its argument events.
  const std::vector<Event> events = create_streamed(s, body);
  const Json built = accumulate(events);
  ASSERT_EQ(built["output"].size(), 1u);
  EXPECT_EQ(built["output"][0]["arguments"], call["arguments"]);
  const std::vector<std::string> n = names(events);
  EXPECT_NE(std::find(n.begin(), n.end(), "response.function_call_arguments.done"), n.end());

  // The next turn, sent whole or continued from the stored response: the prompt is the chat
  // route's for the same conversation.
  const Json output = {
      {"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny, 21 C"}};
  const Json chat = {
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Paris?"}},
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls",
          {{{"id", call["call_id"]},
            {"type", "function"},
            {"function", {{"name", "get_weather"}, {"arguments", call["arguments"]}}}}}}},
        {{"role", "tool"}, {"tool_call_id", call["call_id"]}, {"content", "sunny, 21 C"}}}},
      {"tools", {kChatWeatherTool}}};
  const int64_t expected = chat_tokens(s, chat);
  const Json whole =
      create(s, response_body({{{"role", "user"}, {"content", "Weather in Paris?"}}, call, output},
                              {{"tools", {kWeatherTool}}}));
  EXPECT_EQ(whole["usage"]["input_tokens"], expected);
  const Json continued = create(
      s, response_body({output}, {{"tools", {kWeatherTool}}, {"previous_response_id", j["id"]}}));
  EXPECT_EQ(continued["usage"]["input_tokens"], expected);
  EXPECT_EQ(continued["previous_response_id"], j["id"]);
  const int64_t longer =
      create(s, response_body({{{"type", "function_call_output"},
                                {"call_id", call["call_id"]},
                                {"output", "sunny, 21 C, light wind from the west"}}},
                              {{"tools", {kWeatherTool}},
                               {"previous_response_id", j["id"]}}))["usage"]["input_tokens"];
  EXPECT_GT(longer, expected);
}

TEST(ResponsesServer, PreviousResponseIdChainsTheConversation) {
  TestServer s(kThinkingReply);
  const Json first = create(s, response_body("Hi", {{"instructions", "Be kind."}}));
  const Json second = create(s, response_body("And you?", {{"previous_response_id", first["id"]}}));
  const Json third = create(s, response_body("Bye", {{"previous_response_id", second["id"]},
                                                     {"instructions", "Be short."}}));
  // Each continues all before it, without the earlier instructions (OpenAI drops them too).
  auto turn = [](const std::string& user) {
    return Json::array({{{"role", "user"}, {"content", user}},
                        {{"role", "assistant"},
                         {"content", "Hello there!"},
                         {"reasoning_content", "The user greets me."}}});
  };
  Json messages = turn("Hi");
  messages.push_back({{"role", "user"}, {"content", "And you?"}});
  EXPECT_EQ(second["usage"]["input_tokens"], chat_tokens(s, {{"messages", messages}}));
  messages = Json::array({{{"role", "system"}, {"content", "Be short."}}});
  for (const Json& m : turn("Hi")) messages.push_back(m);
  for (const Json& m : turn("And you?")) messages.push_back(m);
  messages.push_back({{"role", "user"}, {"content", "Bye"}});
  EXPECT_EQ(third["usage"]["input_tokens"], chat_tokens(s, {{"messages", messages}}));
  EXPECT_EQ(third["previous_response_id"], second["id"]);
  // Streamed responses are kept too.
  const std::vector<Event> events = create_streamed(s, response_body("Hi"));
  const Json streamed_id = events.back().data["response"]["id"];
  EXPECT_EQ(create(s, response_body("More", {{"previous_response_id", streamed_id}}))["status"],
            "completed");
}

TEST(ResponsesServer, StoredResponsesAreReadAndDeletedAndStoreFalseKeepsNothing) {
  TestServer s(kThinkingReply);
  const Json j = create(s, response_body("Hi"));
  const std::string path = "/v1/responses/" + j["id"].get<std::string>();
  HttpResult got = s.get(path);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json::parse(got.body), j);
  HttpResult deleted = test::http_request(s.port(), "DELETE", path);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(Json::parse(deleted.body),
            Json({{"id", j["id"]}, {"object", "response"}, {"deleted", true}}));
  expect_openai_error(s.get(path), 404, "not found");
  expect_openai_error(test::http_request(s.port(), "DELETE", path), 404, "not found");
  expect_openai_error(
      s.post("/v1/responses", response_body("x", {{"previous_response_id", j["id"]}})), 404,
      "not found", "previous_response_id");

  const Json unkept = create(s, response_body("Hi", {{"store", false}}));
  EXPECT_EQ(unkept["store"], false);
  expect_openai_error(s.get("/v1/responses/" + unkept["id"].get<std::string>()), 404, "not found");
  const std::vector<Event> events = create_streamed(s, response_body("Hi", {{"store", false}}));
  const std::string streamed = events.back().data["response"]["id"];
  EXPECT_EQ(s.get("/v1/responses/" + streamed).status, 404);
  expect_openai_error(s.get("/v1/responses/resp_never"), 404, "'resp_never' not found");
}

TEST(ResponsesServer, TheStoreKeepsOnlyTheMostRecentResponses) {
  server::ServerOptions options;
  options.settings.responses_store = 2;
  TestServer s("ok", options);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(create(s, response_body("Hi"))["id"]);
  EXPECT_EQ(s.get("/v1/responses/" + ids[0]).status, 404);
  EXPECT_EQ(s.get("/v1/responses/" + ids[1]).status, 200);
  EXPECT_EQ(s.get("/v1/responses/" + ids[2]).status, 200);
  server::ServerOptions none;
  none.settings.responses_store = 0;
  TestServer off("ok", none);
  EXPECT_EQ(
      off.get("/v1/responses/" + create(off, response_body("Hi"))["id"].get<std::string>()).status,
      404);
}

// Thinks `thinking`, then answers once fed </think>.
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

TEST(ResponsesServer, ReasoningEffortTurnsThinkingOffOrOnWithAScaledBudget) {
  server::ServerOptions options;
  options.think_control.max_thinking_tokens = 40;  // low: 10, high: 40
  TestServer s(thinker(kProse, "The total is 42."), options,
               runtime::EngineOptions{.context_size = 4096, .prefill_chunk = 4096});
  const std::string question = "Add up 3, 5 and 34.";
  // high: the whole budget, more than the thinking takes.
  Json j = create(s, response_body(question, {{"reasoning", {{"effort", "high"}}}}));
  ASSERT_EQ(j["output"].size(), 2u) << j.dump(1);
  EXPECT_EQ(j["output"][0]["content"][0]["text"], kProse);
  EXPECT_EQ(j["output"][1]["content"][0]["text"], "The total is 42.");
  EXPECT_EQ(j["reasoning"]["effort"], "high");
  EXPECT_FALSE(j["strata"]["thinking"]["budget_closed"].get<bool>());
  // low: a quarter of it, so the thinking is closed early.
  j = create(s, response_body(question, {{"reasoning", {{"effort", "low"}}}}));
  ASSERT_EQ(j["output"].size(), 2u) << j.dump(1);
  const std::string thinking = j["output"][0]["content"][0]["text"];
  EXPECT_EQ(kProse.rfind(thinking, 0), 0u) << thinking;
  EXPECT_LT(thinking.size(), kProse.size());
  EXPECT_TRUE(j["strata"]["thinking"]["budget_closed"].get<bool>());
  // none and minimal: the prompt is chat's with thinking off (it closes an empty think block), so
  // no think control runs. (This scripted model thinks whatever its prompt says.)
  const int64_t off =
      chat_tokens(s, chat_body(question, {{"chat_template_kwargs", {{"enable_thinking", false}}}}));
  EXPECT_NE(off, chat_tokens(s, chat_body(question)));
  for (const char* effort : {"none", "minimal"}) {
    j = create(s, response_body(question, {{"reasoning", {{"effort", effort}}}}));
    EXPECT_EQ(j["usage"]["input_tokens"], off) << effort;
    EXPECT_FALSE(j.contains("strata")) << effort;
    EXPECT_EQ(j["reasoning"]["effort"], effort);
  }
  // Streamed, high gives the reasoning item's text events.
  const std::vector<Event> events =
      create_streamed(s, response_body(question, {{"reasoning", {{"effort", "high"}}}}));
  const Json built = accumulate(events);
  EXPECT_EQ(built["output"][0]["content"][0]["text"], kProse);
}

TEST(ResponsesServer, MaxOutputTokensEndsTheResponseIncomplete) {
  TestServer s("one two three four five six seven eight");
  const Json body = response_body("Count", {{"max_output_tokens", 3}});
  const Json j = create(s, body);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"], Json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(j["max_output_tokens"], 3);
  EXPECT_EQ(j["usage"]["output_tokens"], 3);
  EXPECT_EQ(j["output"].back()["status"], "incomplete");
  const std::vector<Event> events = create_streamed(s, body);
  EXPECT_EQ(events.back().name, "response.incomplete");
  const Json built = accumulate(events);
  EXPECT_EQ(built["status"], "incomplete");
  EXPECT_EQ(built["output"][0]["content"][0]["text"], j["output"][0]["content"][0]["text"]);
  // Past the context, max_output_tokens is a cap: cut to what the context holds.
  TestServer small("one two three", {}, {}, /*context_size=*/64);
  EXPECT_EQ(create(small, response_body("Hi", {{"max_output_tokens", 32000}}))["status"],
            "completed");
}

TEST(ResponsesServer, ErrorsAreInOpenAisShape) {
  TestServer s("ok");
  expect_openai_error(s.post("/v1/responses", response_body("Hi", {{"temperature", 3}})), 400,
                      "temperature", "temperature");
  expect_openai_error(s.post("/v1/responses", Json{{"model", "qwen3-test"}}), 400, "input",
                      "input");
  expect_openai_error(s.post("/v1/responses", response_body("Hi", {{"model", "gpt-9"}})), 404,
                      "does not exist", "model");
  // text.format takes chat's response_format path: a schema strata cannot compile is a 400
  // naming the field each API gave it in.
  const Json unsupported = {{"type", "object"}, {"patternProperties", {{"^a", {{"type", "string"}}}}}};
  const HttpResult format = s.post(
      "/v1/responses",
      response_body("Hi", {{"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", unsupported}}}}}}));
  expect_openai_error(format, 400, "patternProperties", "text.format");
  const HttpResult chat_format = s.post(
      "/v1/chat/completions",
      chat_body("Hi", {{"response_format",
                        {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", unsupported}}}}}}));
  expect_openai_error(chat_format, 400, "patternProperties", "response_format");
  const HttpResult bad_json = test::http_request(s.port(), "POST", "/v1/responses", "{");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_TRUE(Json::parse(bad_json.body).contains("error"));
  // A prompt the context cannot hold.
  std::string long_text;
  for (int i = 0; i < 1500; ++i) long_text += "word ";
  expect_openai_error(s.post("/v1/responses", response_body(long_text)), 400,
                      "maximum context length", "messages");
}

TEST(ResponsesServer, AnEngineFailureIsA500OrAFailedStream) {
  ReplyModel::Script script;
  script.fail = true;
  TestServer s("never", {}, script);
  const HttpResult whole = s.post("/v1/responses", response_body("Hi"));
  EXPECT_EQ(whole.status, 500) << whole.body;
  EXPECT_EQ(Json::parse(whole.body)["error"]["type"], "server_error");
  const std::vector<Event> events = create_streamed(s, response_body("Hi"));
  const std::vector<std::string> n = names(events);
  ASSERT_GE(n.size(), 4u);
  EXPECT_EQ(n[0], "response.created");
  EXPECT_EQ(n[n.size() - 2], "error");
  EXPECT_EQ(n.back(), "response.failed");
  EXPECT_EQ(events.back().data["response"]["status"], "failed");
  EXPECT_EQ(events.back().data["response"]["error"]["code"], "server_error");
  EXPECT_NE(events[n.size() - 2].data["message"].get<std::string>().find("scripted failure"),
            std::string::npos);
}

}  // namespace
}  // namespace strata
