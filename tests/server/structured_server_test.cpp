// Structured output through the HTTP server: response_format json_object and json_schema (chat's
// shape), the strata_grammar field, and bad schemas answered with a 400 in OpenAI's error shape.
#include <gtest/gtest.h>

#include "test_server.h"

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

TEST(StructuredServer, TheGrammarFieldConstrainsTheAnswerToARegex) {
  TestServer s("maybe later");
  const HttpResult r = s.post("/v1/chat/completions",
                              chat_body("Yes or no?", {{"max_tokens", 10},
                                                       {"strata_grammar", {{"type", "regex"}, {"pattern", "(yes|no)!"}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string content = Json::parse(r.body)["choices"][0]["message"]["content"];
  EXPECT_TRUE(content == "yes!" || content == "no!") << content;
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

}  // namespace
}  // namespace strata::test
