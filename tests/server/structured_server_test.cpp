// Structured output through the HTTP server: response_format json_object and json_schema (chat's
// shape), llama.cpp's grammar (GBNF) and json_schema fields on chat and completions, the
// strata_grammar field, bad schemas and grammars answered with a 400 in OpenAI's error shape, and
// tool calls constrained in the real Llama 3 and Mistral templates' formats (a call to a tool the
// request did not declare bent into a declared one; tool_choice and parallel_tool_calls).
#include <gtest/gtest.h>

#include <regex>

#include "test_server.h"
#include "text/chat/chat_template.h"

namespace strata::test {
namespace {

const Json kCitySchema = {{"type", "object"},
                          {"properties", {{"city", {{"type", "string"}, {"maxLength", 20}}}}},
                          {"required", {"city"}},
                          {"additionalProperties", false}};

Json content_of(const HttpResult& r) {
  return Json::parse(Json::parse(r.body)["choices"][0]["message"]["content"].get<std::string>());
}

TEST(StructuredServer, JsonSchemaThatTheReplyFitsLeavesItAlone) {
  TestServer s("{\"city\": \"Paris\"}");
  const HttpResult r = s.post(
      "/v1/chat/completions",
      chat_body("Where?", {{"response_format", {{"type", "json_schema"},
                                                {"json_schema", {{"name", "place"}, {"strict", true},
                                                                 {"schema", kCitySchema}}}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(content_of(r), Json({{"city", "Paris"}}));
}

TEST(StructuredServer, JsonSchemaBendsAReplyThatDoesNotFit) {
  TestServer s("Sure! The city is Paris.");
  Json schema = kCitySchema;
  schema["properties"]["city"] = {{"enum", {"Rome", "Oslo"}}};
  for (bool stream : {false, true}) {
    const HttpResult r = s.post(
        "/v1/chat/completions",
        chat_body("Where?", {{"stream", stream}, {"max_tokens", 40},
                             {"response_format", {{"type", "json_schema"},
                                                  {"json_schema", {{"name", "p"}, {"schema", schema}}}}}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const Json v = stream ? Json::parse(read_stream(r).content) : content_of(r);
    ASSERT_TRUE(v.is_object()) << r.body;
    EXPECT_TRUE(v["city"] == "Rome" || v["city"] == "Oslo") << v.dump();
  }
}

TEST(StructuredServer, JsonObjectGivesAnObject) {
  TestServer s("{\"n\": 42, \"ok\": [true]}");
  const HttpResult r = s.post("/v1/chat/completions",
                              chat_body("JSON please", {{"max_tokens", 60},
                                                        {"response_format", {{"type", "json_object"}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(content_of(r), Json({{"n", 42}, {"ok", {true}}})) << r.body;
}

// llama.cpp's response_format {"type": "json_object", "schema": ...}: the schema is followed, on
// chat and completions.
TEST(StructuredServer, JsonObjectWithASchemaFollowsTheSchema) {
  TestServer s("Sure! The city is Paris.");
  Json schema = kCitySchema;
  schema["properties"]["city"] = {{"enum", {"Rome", "Oslo"}}};
  const Json format = {{"type", "json_object"}, {"schema", schema}};
  const HttpResult chat = s.post(
      "/v1/chat/completions", chat_body("Where?", {{"max_tokens", 40}, {"response_format", format}}));
  ASSERT_EQ(chat.status, 200) << chat.body;
  const Json v = content_of(chat);
  EXPECT_TRUE(v["city"] == "Rome" || v["city"] == "Oslo") << v.dump();
  const HttpResult completion =
      s.post("/v1/completions",
             {{"model", "qwen3-test"}, {"prompt", "Where?"}, {"max_tokens", 40}, {"response_format", format}});
  ASSERT_EQ(completion.status, 200) << completion.body;
  const Json c = Json::parse(Json::parse(completion.body)["choices"][0]["text"].get<std::string>());
  EXPECT_TRUE(c["city"] == "Rome" || c["city"] == "Oslo") << c.dump();
  // A schema strata cannot compile is a 400 as a json_schema's is.
  const HttpResult bad = s.post(
      "/v1/chat/completions",
      chat_body("Where?", {{"response_format", {{"type", "json_object"},
                                                {"schema", {{"type", "array"}, {"uniqueItems", true}}}}}}));
  ASSERT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(Json::parse(bad.body)["error"]["param"], "response_format") << bad.body;
}

TEST(StructuredServer, TheGrammarFieldConstrainsTheAnswerToARegex) {
  TestServer s("maybe later");
  const HttpResult r = s.post("/v1/chat/completions",
                              chat_body("Yes or no?", {{"max_tokens", 10},
                                                       {"strata_grammar", {{"type", "regex"}, {"pattern", "(yes|no)!"}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string content = Json::parse(r.body)["choices"][0]["message"]["content"];
  EXPECT_TRUE(content == "yes!" || content == "no!") << content;
}

// A GBNF grammar (llama.cpp's `grammar` field) and the same language as a regex, to check answers
// by a matcher other than strata's own.
const std::string kListGrammar =
    "root ::= \"[\" item (\",\" item)* \"]\"  # a list of quoted words\n"
    "item ::= \"\\\"\" [a-z]+ \"\\\"\"\n";
const std::regex kListRegex(R"(\["[a-z]+"(,"[a-z]+")*\])");
const std::string kYesNoGrammar = "root ::= answer \"!\"\nanswer ::= \"yes\" | \"no\"\n";

Json completion_body(const std::string& prompt, Json extra = Json::object()) {
  Json body = {{"model", "qwen3-test"}, {"prompt", prompt}};
  body.update(extra);
  return body;
}

std::string completion_text(const HttpResult& r) {
  return Json::parse(r.body)["choices"][0]["text"].get<std::string>();
}

std::string chat_text(const HttpResult& r) {
  return Json::parse(r.body)["choices"][0]["message"]["content"].get<std::string>();
}

TEST(StructuredServer, GbnfGrammarThatTheReplyFitsLeavesItAlone) {
  TestServer s(R"(["ab","c"])");
  const Json extra = {{"max_tokens", 30}, {"grammar", kListGrammar}};
  const HttpResult chat = s.post("/v1/chat/completions", chat_body("Words?", extra));
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat_text(chat), R"(["ab","c"])");
  const HttpResult completion = s.post("/v1/completions", completion_body("Words:", extra));
  ASSERT_EQ(completion.status, 200) << completion.body;
  EXPECT_EQ(completion_text(completion), R"(["ab","c"])");
  EXPECT_TRUE(std::regex_match(completion_text(completion), kListRegex));
}

TEST(StructuredServer, GbnfGrammarBendsChatAnswersAndCompletionsThatDoNotFit) {
  TestServer s("maybe later");
  for (bool stream : {false, true}) {
    const Json extra = {{"stream", stream}, {"max_tokens", 10}, {"grammar", kYesNoGrammar}};
    const HttpResult chat = s.post("/v1/chat/completions", chat_body("Yes or no?", extra));
    ASSERT_EQ(chat.status, 200) << chat.body;
    const std::string answer = stream ? read_stream(chat).content : chat_text(chat);
    EXPECT_TRUE(answer == "yes!" || answer == "no!") << answer;
    const HttpResult completion = s.post("/v1/completions", completion_body("Yes or no?", extra));
    ASSERT_EQ(completion.status, 200) << completion.body;
    const std::string text = stream ? read_stream(completion).content : completion_text(completion);
    EXPECT_TRUE(text == "yes!" || text == "no!") << text;
  }
  // A list of words from a reply with none: whatever the picks, the text is a list.
  const HttpResult list =
      s.post("/v1/completions",
             completion_body("Words:",
                             {{"max_tokens", 40}, {"temperature", 0}, {"grammar", kListGrammar}}));
  ASSERT_EQ(list.status, 200) << list.body;
  const Json choice = Json::parse(list.body)["choices"][0];
  const std::string text = choice["text"];
  if (choice["finish_reason"] == "stop") {
    EXPECT_TRUE(std::regex_match(text, kListRegex)) << text;
  } else {  // cut by max_tokens: a prefix of a list
    EXPECT_EQ(text.rfind("[\"", 0), 0u) << text;
  }
}

TEST(StructuredServer, CompletionsTakeJsonSchemaAndResponseFormat) {
  TestServer s("Sure! The city is Paris.");
  Json schema = kCitySchema;
  schema["properties"]["city"] = {{"enum", {"Rome", "Oslo"}}};
  for (const Json& extra :
       {Json{{"json_schema", schema}},
        Json{{"response_format",
              {{"type", "json_schema"}, {"json_schema", {{"name", "p"}, {"schema", schema}}}}}}}) {
    Json body = completion_body("Where?", extra);
    body["max_tokens"] = 40;
    const HttpResult r = s.post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const Json v = Json::parse(completion_text(r));
    EXPECT_TRUE(v["city"] == "Rome" || v["city"] == "Oslo") << v.dump();
  }
  // json_schema on chat too, as llama.cpp reads it.
  const HttpResult chat = s.post(
      "/v1/chat/completions", chat_body("Where?", {{"max_tokens", 40}, {"json_schema", schema}}));
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_TRUE(content_of(chat)["city"] == "Rome" || content_of(chat)["city"] == "Oslo")
      << chat.body;
  TestServer o("{\"n\": 42}");
  const HttpResult object =
      o.post("/v1/completions",
             completion_body("JSON:",
                             {{"max_tokens", 20}, {"response_format", {{"type", "json_object"}}}}));
  ASSERT_EQ(object.status, 200) << object.body;
  EXPECT_EQ(Json::parse(completion_text(object)), Json({{"n", 42}}));
}

TEST(StructuredServer, BadGrammarsAndTwoShapesAreA400NamingTheField) {
  TestServer s("x");
  struct Case {
    Json fields;
    std::string param, code, mention;
  };
  const std::vector<Case> cases = {
      {{{"grammar", "root ::= (\"a\""}},
       "grammar",
       "invalid_grammar",
       "Invalid grammar in 'grammar': line 1, column 14 (rule 'root'): expected ')'"},
      {{{"grammar", "item ::= \"a\""}}, "grammar", "invalid_grammar", "no 'root' rule"},
      {{{"grammar", "root ::= item\n"}},
       "grammar",
       "invalid_grammar",
       "rule 'item' is used but never defined"},
      {{{"grammar", "root ::= root \"a\" | \"b\""}},
       "grammar",
       "invalid_grammar",
       "rule 'root' is left-recursive"},
      {{{"grammar", "root ::= <think> \"a\""}}, "grammar", "invalid_grammar", "token matches"},
      {{{"json_schema", {{"type", "array"}, {"uniqueItems", true}}}},
       "json_schema",
       "invalid_json_schema",
       "uniqueItems"},
      {{{"grammar", kYesNoGrammar}, {"json_schema", {{"type", "integer"}}}},
       "grammar",
       "invalid_value",
       "'json_schema' and 'grammar' both give the answer's shape"},
  };
  for (const Case& c : cases)
    for (const std::string route : {"/v1/chat/completions", "/v1/completions"}) {
      const Json body =
          route == "/v1/completions" ? completion_body("x", c.fields) : chat_body("x", c.fields);
      const HttpResult r = s.post(route, body);
      ASSERT_EQ(r.status, 400) << route << " " << r.body;
      const Json e = Json::parse(r.body)["error"];
      EXPECT_EQ(e["type"], "invalid_request_error") << r.body;
      EXPECT_EQ(e["param"], c.param) << r.body;
      EXPECT_EQ(e["code"], c.code) << r.body;
      EXPECT_NE(e["message"].get<std::string>().find(c.mention), std::string::npos) << r.body;
    }
}

// Anthropic's structured outputs: /v1/messages with output_format {"type": "json_schema",
// "schema"} bends the answer as chat's response_format does; a schema strata cannot compile is a
// 400 in Anthropic's shape naming output_format.
TEST(StructuredServer, MessagesOutputFormatConstrainsTheAnswer) {
  TestServer s("Sure! The city is Paris.");
  Json schema = kCitySchema;
  schema["properties"]["city"] = {{"enum", {"Rome", "Oslo"}}};
  const Json body = {{"model", "qwen3-test"},
                     {"max_tokens", 40},
                     {"messages", {{{"role", "user"}, {"content", "Where?"}}}},
                     {"output_format", {{"type", "json_schema"}, {"schema", schema}}}};
  const HttpResult r = s.post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json message = Json::parse(r.body);
  ASSERT_EQ(message["content"][0]["type"], "text") << r.body;
  const Json v = Json::parse(message["content"][0]["text"].get<std::string>());
  EXPECT_TRUE(v["city"] == "Rome" || v["city"] == "Oslo") << v.dump();
  Json bad = body;
  bad["output_format"]["schema"] = {{"type", "object"}, {"patternProperties", {{"^a", {{"type", "string"}}}}}};
  const HttpResult e = s.post("/v1/messages", bad);
  ASSERT_EQ(e.status, 400) << e.body;
  const Json err = Json::parse(e.body);
  EXPECT_EQ(err["type"], "error") << e.body;
  EXPECT_EQ(err["error"]["type"], "invalid_request_error") << e.body;
  EXPECT_NE(err["error"]["message"].get<std::string>().find("output_format"), std::string::npos) << e.body;
}

TEST(StructuredServer, BadSchemasAreA400InOpenAisShape) {
  TestServer s("{}");
  struct Case {
    Json format;
    std::string param, mention;
  };
  const std::vector<Case> cases = {
      {{{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "array"}, {"uniqueItems", true}}}}}},
       "response_format", "uniqueItems"},
      {{{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"$ref", "#/$defs/none"}}}}}},
       "response_format", "names nothing"},
      {{{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "(?=x)"}}}}}},
       "response_format", "lookaround"},
      {{{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}, "response_format.json_schema.schema", "schema"},
  };
  for (const Case& c : cases) {
    const HttpResult r = s.post("/v1/chat/completions", chat_body("x", {{"response_format", c.format}}));
    ASSERT_EQ(r.status, 400) << r.body;
    const Json e = Json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "invalid_request_error") << r.body;
    EXPECT_EQ(e["param"], c.param) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(c.mention), std::string::npos) << r.body;
  }
  // A tool whose parameters cannot be compiled is no error: tools are the client's, not a format
  // it asked for (agents offer tools with schemas past what compiles), so its calls are
  // constrained to its name with free arguments (ToolCallGrammar tests) and the request is served.
  const Json tools = {{{"type", "function"},
                       {"function", {{"name", "f"}, {"parameters", {{"type", "object"}, {"not", Json::object()}}}}}}};
  const HttpResult r = s.post("/v1/chat/completions", chat_body("x", {{"tools", tools}}));
  EXPECT_EQ(r.status, 200) << r.body;
}

// ---- Grammars over the automaton's work budget (text/structured/automaton.h). ----

// Each space read doubles the ways to read the text (which letter each space waits for): the first
// mask, over tokens of many spaces, is over the budget, so the request is refused before it runs.
const std::string kSpacesDoubling = "root ::= s\ns ::= \" \" s \"b\" | \" \" s \"c\" | \"\"\n";
// The same doubling on "a": tokens of a few letters keep the first masks in the budget, and a mask
// a dozen letters in goes over it, mid-answer.
const std::string kLettersDoubling = "root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"\n";
// A string whose pattern nests repeats: each letter multiplies the ways to count it.
const Json kNestedRepeats = {{"type", "string"}, {"pattern", "^((((a|b){0,9}){0,9}){0,9}){0,9}$"}};

TEST(StructuredServer, AGrammarOverTheWorkBudgetIsA400AndTheServerServesTheNext) {
  TestServer s("yes!");
  for (const std::string route : {"/v1/chat/completions", "/v1/completions"}) {
    const Json extra = {{"max_tokens", 10}, {"grammar", kSpacesDoubling}};
    const HttpResult r =
        s.post(route, route == "/v1/completions" ? completion_body("x", extra) : chat_body("x", extra));
    ASSERT_EQ(r.status, 400) << route << " " << r.body;
    const Json e = Json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "invalid_request_error") << r.body;
    EXPECT_EQ(e["param"], "grammar") << r.body;
    EXPECT_EQ(e["code"], "invalid_grammar") << r.body;
    EXPECT_NE(e["message"].get<std::string>().find("too ambiguous"), std::string::npos) << r.body;
  }
  const HttpResult next = s.post(
      "/v1/chat/completions", chat_body("Yes or no?", {{"max_tokens", 10}, {"grammar", kYesNoGrammar}}));
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(chat_text(next), "yes!");
}

// Over the budget mid-answer: the request ends with an error in its API's shape, a 400 whole or an
// error event streamed, and the engine serves the next request.
TEST(StructuredServer, AGrammarOverTheWorkBudgetMidAnswerEndsItWithAnError) {
  TestServer s(std::string(40, 'a'));
  const Json chat = chat_body("a?", {{"max_tokens", 40}, {"grammar", kLettersDoubling}});
  const HttpResult whole = s.post("/v1/chat/completions", chat);
  ASSERT_EQ(whole.status, 400) << whole.body;
  const Json e = Json::parse(whole.body)["error"];
  EXPECT_EQ(e["type"], "invalid_request_error") << whole.body;
  EXPECT_NE(e["message"].get<std::string>().find("too ambiguous"), std::string::npos) << whole.body;
  Json streamed_chat = chat;
  streamed_chat["stream"] = true;
  const HttpResult streamed = s.post("/v1/chat/completions", streamed_chat);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<std::string> events = sse_data(streamed.body);
  ASSERT_GE(events.size(), 2u) << streamed.body;
  EXPECT_EQ(events.back(), "[DONE]");
  const Json error = Json::parse(events[events.size() - 2]);
  EXPECT_EQ(error["error"]["type"], "invalid_request_error") << streamed.body;

  // Anthropic's shape: a schema whose pattern goes over the budget a few letters into the string.
  const Json message = {{"model", "qwen3-test"},
                        {"max_tokens", 40},
                        {"messages", {{{"role", "user"}, {"content", "a?"}}}},
                        {"output_format", {{"type", "json_schema"}, {"schema", kNestedRepeats}}}};
  TestServer letters("\"" + std::string(30, 'a'));
  const HttpResult anthropic = letters.post("/v1/messages", message);
  ASSERT_EQ(anthropic.status, 400) << anthropic.body;
  const Json err = Json::parse(anthropic.body);
  EXPECT_EQ(err["type"], "error") << anthropic.body;
  EXPECT_EQ(err["error"]["type"], "invalid_request_error") << anthropic.body;
  EXPECT_NE(err["error"]["message"].get<std::string>().find("too ambiguous"), std::string::npos)
      << anthropic.body;
  Json streamed_message = message;
  streamed_message["stream"] = true;
  const HttpResult anthropic_stream = letters.post("/v1/messages", streamed_message);
  ASSERT_EQ(anthropic_stream.status, 200) << anthropic_stream.body;
  const std::string& body = anthropic_stream.body;
  const size_t at = body.rfind("event: error\ndata: ");
  ASSERT_NE(at, std::string::npos) << body;
  const Json event = Json::parse(body.substr(at + 19, body.find("\n\n", at) - at - 19));
  EXPECT_EQ(event["error"]["type"], "invalid_request_error") << body;

  // Both servers serve the next request.
  for (TestServer* server : {&s, &letters}) {
    const HttpResult next = server->post(
        "/v1/chat/completions", chat_body("Yes or no?", {{"max_tokens", 10}, {"grammar", kYesNoGrammar}}));
    ASSERT_EQ(next.status, 200) << next.body;
    const std::string answer = chat_text(next);
    EXPECT_TRUE(answer == "yes!" || answer == "no!") << answer;
  }
}

// ---- Tool calls in the Llama 3 and Mistral templates' formats (Qwen3's vocabulary, where the
// tags are plain text: each call opens where the text of its tag ends). ----

const Json kCityTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}},
  "required": ["city"], "additionalProperties": false}}}])");

struct ToolTemplate {
  std::string file;  // in the shared fixtures' chat-templates/templates/
  // The format's text of get_weather(Paris); of get_time(Rome), a tool the request does not
  // declare with a city get_weather does not allow; of get_weather(Paris) then get_weather(Oslo)
  // (in a list, a space keeps the first call's last token apart from the comma: a token of both
  // would be refused when one call is allowed, and the mask would bend the call's end).
  std::string one_call, undeclared, two_calls;
};

const std::vector<ToolTemplate> kToolTemplates = {
    {"meta-llama-Llama-3.1-8B-Instruct.jinja",
     R"({"name": "get_weather", "parameters": {"city": "Paris"}})",
     R"({"name": "get_time", "parameters": {"city": "Rome"}})",
     R"({"name": "get_weather", "parameters": {"city": "Paris"}}; )"
     R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja",
     R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}])",
     R"([TOOL_CALLS][{"name": "get_time", "arguments": {"city": "Rome"}}])",
     R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}} , )"
     R"({"name": "get_weather", "arguments": {"city": "Oslo"}}])"},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja",
     R"([TOOL_CALLS]get_weather[ARGS]{"city": "Paris"})",
     R"([TOOL_CALLS]get_time[ARGS]{"city": "Rome"})",
     R"([TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"})"},
};

std::string template_path(const ToolTemplate& t) {
  return shared_fixture("chat-templates/templates/" + t.file);
}

// The scripted model counts its place from the end of its first forward call, so the prompt
// (Mistral Small's default system prompt makes it 560 tokens) is prefilled in one.
const runtime::EngineOptions kWholePrompt{.context_size = 2048, .prefill_chunk = 2048};

// A server of `t`'s template whose model writes `text`, then ends.
std::unique_ptr<TestServer> tool_server(const ToolTemplate& t, const std::string& text) {
  const text::Tokenizer& tok = qwen3_tokenizer();
  ReplyModel::Script script;
  script.tokens = tok.encode(text);
  script.end_id = *tok.token_id("<|im_end|>");
  return std::make_unique<TestServer>(std::make_unique<ReplyModel>(tok.vocab_size(), script),
                                      server::ServerOptions{}, kWholePrompt, template_path(t));
}

Json tool_calls_of(const HttpResult& r) {
  return Json::parse(r.body)["choices"][0]["message"]["tool_calls"];
}

// The model calls a tool the request does not declare, with a city the schema does not allow; the
// mask bends it (the scripted model then picks the lowest allowed id, and as a list's ',' comes
// before its ']', one call is asked for, so that a Mistral list ends).
TEST(StructuredServer, ToolCallsInLlama3AndMistralFormatsNameADeclaredTool) {
  for (const ToolTemplate& t : kToolTemplates) {
    const auto s = tool_server(t, t.undeclared);
    for (bool stream : {false, true}) {
      const HttpResult r = s->post("/v1/chat/completions",
                                   chat_body("Weather in Paris?", {{"tools", kCityTools},
                                                                   {"temperature", 0},
                                                                   {"max_tokens", 200},
                                                                   {"parallel_tool_calls", false},
                                                                   {"stream", stream}}));
      ASSERT_EQ(r.status, 200) << t.file << " " << r.body;
      Json calls;
      std::string finish;
      if (stream) {
        const Streamed st = read_stream(r);
        calls = st.tool_calls, finish = st.finish_reason;
      } else {
        calls = tool_calls_of(r), finish = Json::parse(r.body)["choices"][0]["finish_reason"];
      }
      EXPECT_EQ(finish, "tool_calls") << t.file << " " << r.body;
      ASSERT_EQ(calls.size(), 1u) << t.file << " " << r.body;
      EXPECT_EQ(calls[0]["function"]["name"], "get_weather") << t.file;
      const Json args = Json::parse(calls[0]["function"]["arguments"].get<std::string>());
      EXPECT_TRUE(args == Json({{"city", "Paris"}}) || args == Json({{"city", "Oslo"}}))
          << t.file << " " << args.dump();
    }
    // Without tools nothing is constrained: the same text is content.
    const HttpResult plain = s->post("/v1/chat/completions", chat_body("Weather in Paris?"));
    ASSERT_EQ(plain.status, 200) << plain.body;
    EXPECT_NE(Json::parse(plain.body)["choices"][0]["message"]["content"].get<std::string>().find(
                  "get_time"),
              std::string::npos)
        << t.file;
  }
}

TEST(StructuredServer, ParallelToolCallsFalseGivesOneCallInLlama3AndMistralFormats) {
  for (const ToolTemplate& t : kToolTemplates) {
    const auto s = tool_server(t, t.two_calls);
    for (bool parallel : {true, false}) {
      const HttpResult r = s->post(
          "/v1/chat/completions",
          chat_body(
              "Weather in Paris and Oslo?",
              {{"tools", kCityTools}, {"temperature", 0}, {"parallel_tool_calls", parallel}}));
      ASSERT_EQ(r.status, 200) << r.body;
      const Json calls = tool_calls_of(r);
      ASSERT_EQ(calls.size(), parallel ? 2u : 1u) << t.file << " " << r.body;
      EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()),
                Json({{"city", "Paris"}}))
          << t.file;
      const size_t all = qwen3_tokenizer().encode(t.two_calls).size();
      const size_t one = qwen3_tokenizer().encode(t.one_call).size();
      const size_t used = Json::parse(r.body)["usage"]["completion_tokens"];
      if (parallel) {
        EXPECT_EQ(used, all) << t.file;
      } else {
        EXPECT_LE(used, one) << t.file << " " << r.body;  // ended with the first call
      }
    }
  }
}

// tool_choice "required" or named: the template's opening is forced, the model writes the rest,
// and the constraint takes the call from the opening on.
TEST(StructuredServer, ToolChoiceForcesACallInLlama3AndMistralFormats) {
  const text::Tokenizer& tok = qwen3_tokenizer();
  const Json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  for (const ToolTemplate& t : kToolTemplates) {
    const text::chat::ChatTemplate chat =
        text::chat::ChatTemplate::load(qwen3_dir(), template_path(t));
    for (const Json& choice : {Json("required"), named}) {
      const std::string opening = chat.tool_call_opening(choice.is_string() ? "" : "get_weather");
      // A model that would answer in prose: the opening replaces its first token, and it goes
      // on with the rest of the call.
      const std::string& call = t.one_call;
      ASSERT_TRUE(call.starts_with(opening)) << opening << " / " << call;
      ReplyModel::Script script;
      script.tokens = tok.encode("It is sunny.");
      script.tokens.resize(tok.encode(opening).size());
      const std::vector<int32_t> rest = tok.encode(call.substr(opening.size()));
      script.tokens.insert(script.tokens.end(), rest.begin(), rest.end());
      script.end_id = *tok.token_id("<|im_end|>");
      TestServer s(std::make_unique<ReplyModel>(tok.vocab_size(), script), {}, kWholePrompt,
                   template_path(t));
      const HttpResult r =
          s.post("/v1/chat/completions",
                 chat_body("Weather in Paris?",
                           {{"tools", kCityTools}, {"tool_choice", choice}, {"temperature", 0}}));
      ASSERT_EQ(r.status, 200) << r.body;
      const Json calls = tool_calls_of(r);
      ASSERT_EQ(calls.size(), 1u) << t.file << " " << choice << " " << r.body;
      EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
      EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()),
                Json({{"city", "Paris"}}))
          << t.file << " " << choice;
    }
  }
}

// A NAME[ARGS] call cannot name a tool called "read file" (the parser stops a name at the space):
// with no tool it can name, calls are left free rather than the request refused.
TEST(StructuredServer, ToolsNoMistralArgsCallCanNameLeaveCallsFree) {
  const ToolTemplate& small = kToolTemplates.back();
  ASSERT_EQ(small.file, "Mistral-Small-3.2-24B-Instruct-2506.jinja");
  const auto s = tool_server(small, "[TOOL_CALLS]read file[ARGS]{}");
  const Json tools = {{{"type", "function"}, {"function", {{"name", "read file"}}}}};
  const HttpResult r = s->post("/v1/chat/completions",
                               chat_body("Read it.", {{"tools", tools}, {"temperature", 0}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["choices"][0]["message"]["content"],
            "[TOOL_CALLS]read file[ARGS]{}");
}

}  // namespace
}  // namespace strata::test
