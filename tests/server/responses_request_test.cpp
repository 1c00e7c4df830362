// OpenAI Responses request parsing: every field read into the chat request the pipeline runs (input
// as a string and as items, instructions, previous_response_id, tools, tool_choice, reasoning,
// text.format, sampling, store, metadata) and the settings the response repeats, and every wrong
// input a 400 (or 404) naming the field in OpenAI's error shape.
#include "server/responses_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace strata::server {
namespace {

constexpr int64_t kBudget = 1000;  // the server's thinking budget in these tests

OrderedJson body(OrderedJson extra = OrderedJson::object()) {
  OrderedJson b = {{"model", "qwen3-test"}, {"input", "Hi"}};
  b.update(extra);
  return b;
}

ResponsesRequest parse(const OrderedJson& b, const ConversationLookup& previous = {}) {
  return parse_responses_request(b, kBudget, previous);
}

OrderedJson message(const std::string& role, OrderedJson content) {
  return {{"type", "message"}, {"role", role}, {"content", std::move(content)}};
}

const OrderedJson kWeatherTool = {{"type", "function"},
                                  {"name", "get_weather"},
                                  {"description", "Weather in a city"},
                                  {"parameters",
                                   {{"type", "object"},
                                    {"properties", {{"city", {{"type", "string"}}}}},
                                    {"required", {"city"}}}},
                                  {"strict", true}};

// Expects an error of `status` naming `param`, with `words` in the message, in OpenAI's shape.
void expect_error(const OrderedJson& b, const std::string& param, const std::string& words = "",
                  int status = 400, const ConversationLookup& previous = {}) {
  try {
    parse(b, previous);
    ADD_FAILURE() << "accepted: " << b.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    const OrderedJson j = e.to_json();
    EXPECT_EQ(j["error"]["message"], e.what());
    EXPECT_EQ(j["error"]["param"], param);
  }
}

TEST(ResponsesRequest, AStringInputIsOneUserMessageAndTheSettingsHaveOpenAisDefaults) {
  const ResponsesRequest r = parse(body());
  EXPECT_EQ(r.chat.messages, OrderedJson::parse(R"([{"role": "user", "content": "Hi"}])"));
  EXPECT_EQ(r.conversation,
            OrderedJson::parse(R"([{"type": "message", "role": "user", "content": "Hi"}])"));
  EXPECT_EQ(r.chat.options.model, "qwen3-test");
  EXPECT_TRUE(r.chat.max_tokens_caps_all_output);
  EXPECT_FALSE(r.chat.options.max_tokens.has_value());
  EXPECT_FALSE(r.chat.options.stream);
  EXPECT_TRUE(r.chat.tools.is_null());
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.chat.parallel_tool_calls);
  EXPECT_TRUE(r.store);
  EXPECT_EQ(r.previous_response_id, "");
  EXPECT_FALSE(r.chat.chat_template_kwargs.contains("enable_thinking"));
  EXPECT_EQ(r.chat.response_format.type, "");
  EXPECT_EQ(r.settings, OrderedJson::parse(R"({"instructions": null, "max_output_tokens": null,
    "parallel_tool_calls": true, "previous_response_id": null,
    "reasoning": {"effort": null, "summary": null}, "store": true, "temperature": 1.0,
    "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
    "truncation": "disabled", "user": null, "metadata": {}})"));
}

TEST(ResponsesRequest, ReadsTheGenerationFields) {
  const ResponsesRequest r = parse(body({{"max_output_tokens", 64},
                                         {"temperature", 0.5},
                                         {"top_p", 0.9},
                                         {"stream", true},
                                         {"stream_options", {{"include_obfuscation", false}}},
                                         {"store", false},
                                         {"user", "u1"},
                                         {"metadata", {{"k", "v"}}},
                                         {"truncation", "auto"},
                                         {"include", {"reasoning.encrypted_content"}},
                                         {"prompt_cache_key", "abc"},
                                         {"safety_identifier", "s"},
                                         {"service_tier", "auto"},
                                         {"parallel_tool_calls", false},
                                         {"instructions", "Be brief."},
                                         {"not_an_openai_field", 1}}));
  const GenerationOptions& o = r.chat.options;
  EXPECT_EQ(o.max_tokens, 64);
  EXPECT_FLOAT_EQ(o.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(o.sampling.top_p, 0.9f);
  EXPECT_TRUE(o.stream);
  EXPECT_EQ(o.user, "u1");
  EXPECT_FALSE(r.store);
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.settings["max_output_tokens"], 64);
  EXPECT_EQ(r.settings["temperature"], 0.5);
  EXPECT_EQ(r.settings["top_p"], 0.9);
  EXPECT_EQ(r.settings["store"], false);
  EXPECT_EQ(r.settings["user"], "u1");
  EXPECT_EQ(r.settings["metadata"], OrderedJson({{"k", "v"}}));
  EXPECT_EQ(r.settings["truncation"], "auto");
  EXPECT_EQ(r.settings["parallel_tool_calls"], false);
  EXPECT_EQ(r.settings["instructions"], "Be brief.");
  // A greedy temperature is greedy, as in chat.
  EXPECT_EQ(parse(body({{"temperature", 0}})).chat.options.sampling.temperature, 0.0f);
}

TEST(ResponsesRequest, InstructionsAndEverySystemMessageBecomeOneFirstSystemMessage) {
  const ResponsesRequest r =
      parse(body({{"instructions", "Be brief."},
                  {"input",
                   {message("developer", "Use tools."),
                    message("system", {{{"type", "input_text"}, {"text", "Be kind."}}}),
                    message("user", "Hi"), message("developer", "Later."),
                    message("assistant", "Hello"), message("developer", "")}}}));
  EXPECT_EQ(r.chat.messages, OrderedJson::parse(R"([
    {"role": "system", "content": "Be brief.\n\nUse tools.\n\nBe kind.\n\nLater."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"}])"))
      << r.chat.messages.dump(1);
  // Instructions are not part of the conversation a later response continues.
  EXPECT_EQ(r.conversation.size(), 6u);
  EXPECT_EQ(parse(body({{"instructions", "Be brief."}})).chat.messages[0],
            OrderedJson({{"role", "system"}, {"content", "Be brief."}}));
  // A system message alone opens the conversation; none, none is made.
  EXPECT_EQ(parse(body({{"input", {message("user", "Hi"), message("system", "S")}}})).chat.messages,
            OrderedJson::parse(R"([{"role": "system", "content": "S"},
                                   {"role": "user", "content": "Hi"}])"));
  EXPECT_EQ(parse(body()).chat.messages.size(), 1u);
}

TEST(ResponsesRequest, ItemsBecomeChatMessagesOneAssistantTurnEach) {
  const OrderedJson input = OrderedJson::parse(R"([
    {"role": "user", "content": [{"type": "input_text", "text": "Weather in"},
                                 {"type": "input_text", "text": "Paris?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "short"}],
     "content": [{"type": "reasoning_text", "text": "The user wants weather."}],
     "encrypted_content": null},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
    {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": ""},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {"type": "function_call_output", "call_id": "call_2",
     "output": [{"type": "input_text", "text": "rainy"}]},
    {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "Done."}]},
    {"role": "assistant", "content": "Sunny in Paris."},
    {"role": "user", "content": "Thanks"}])");
  const ResponsesRequest r = parse(body({{"input", input}}));
  EXPECT_EQ(r.chat.messages, OrderedJson::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "Weather in"},
                                 {"type": "text", "text": "Paris?"}]},
    {"role": "assistant", "content": "Let me look.",
     "reasoning_content": "The user wants weather.",
     "tool_calls": [
       {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
       {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny", "name": "get_weather"},
    {"role": "tool", "tool_call_id": "call_2", "content": "rainy", "name": "get_weather"},
    {"role": "assistant", "content": "Sunny in Paris.", "reasoning_content": "Done."},
    {"role": "user", "content": "Thanks"}])"))
      << r.chat.messages.dump(1);
  EXPECT_EQ(r.conversation, input);
}

TEST(ResponsesRequest, PreviousResponseIdPutsItsConversationFirst) {
  const OrderedJson before = OrderedJson::parse(R"([
    {"type": "message", "role": "user", "content": "Weather?"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": "{}", "status": "completed"}])");
  std::string asked;
  const ConversationLookup lookup = [&](const std::string& id) -> std::optional<OrderedJson> {
    asked = id;
    if (id == "resp_1") return before;
    return std::nullopt;
  };
  const OrderedJson output = OrderedJson::parse(
      R"([{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}])");
  const ResponsesRequest r = parse(
      body({{"previous_response_id", "resp_1"}, {"input", output}, {"instructions", "Be brief."}}),
      lookup);
  EXPECT_EQ(asked, "resp_1");
  EXPECT_EQ(r.previous_response_id, "resp_1");
  EXPECT_EQ(r.settings["previous_response_id"], "resp_1");
  ASSERT_EQ(r.chat.messages.size(), 4u) << r.chat.messages.dump();
  EXPECT_EQ(r.chat.messages[0]["role"], "system");
  EXPECT_EQ(r.chat.messages[2]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(r.chat.messages[3], OrderedJson::parse(R"({"role": "tool", "tool_call_id": "call_1",
    "content": "sunny", "name": "get_weather"})"));
  EXPECT_EQ(r.conversation.size(), 3u);
  EXPECT_EQ(r.conversation[2], output[0]);
  // No input is fine when continuing; a response the store lacks is a 404.
  EXPECT_EQ(parse(OrderedJson{{"previous_response_id", "resp_1"}}, lookup).chat.messages.size(),
            2u);
  expect_error(body({{"previous_response_id", "resp_gone"}}), "previous_response_id",
               "'resp_gone' not found", 404, lookup);
  expect_error(body({{"previous_response_id", "resp_1"}}), "previous_response_id", "not found",
               404);  // no store at all
}

TEST(ResponsesRequest, FunctionToolsInTheirFlatShapeAndToolChoice) {
  const ResponsesRequest r =
      parse(body({{"tools", {kWeatherTool, {{"type", "function"}, {"name", "now"}}}},
                  {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}}));
  EXPECT_EQ(r.chat.tools, OrderedJson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}])"));
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.chat.tool_choice_name, "get_weather");
  EXPECT_EQ(r.settings["tools"][0], kWeatherTool);
  EXPECT_EQ(r.settings["tools"][1], OrderedJson::parse(R"({"type": "function", "name": "now",
    "description": null, "parameters": null, "strict": null})"));
  EXPECT_EQ(r.settings["tool_choice"],
            OrderedJson({{"type", "function"}, {"name", "get_weather"}}));
  const OrderedJson tools = {kWeatherTool};
  EXPECT_EQ(parse(body({{"tools", tools}, {"tool_choice", "none"}})).chat.tool_choice,
            ToolChoice::kNone);
  EXPECT_EQ(parse(body({{"tools", tools}, {"tool_choice", "required"}})).chat.tool_choice,
            ToolChoice::kRequired);
  EXPECT_EQ(parse(body({{"tools", tools}, {"tool_choice", "auto"}})).chat.tool_choice,
            ToolChoice::kAuto);
  EXPECT_TRUE(parse(body({{"tools", OrderedJson::array()}})).chat.tools.is_null());
}

TEST(ResponsesRequest, ReasoningEffortTurnsThinkingOffOrOnWithAScaledBudget) {
  auto effort = [](const std::string& e) {
    return parse(body({{"reasoning", {{"effort", e}, {"summary", "auto"}}}}));
  };
  for (const char* off : {"none", "minimal"}) {
    const ResponsesRequest r = effort(off);
    EXPECT_EQ(r.chat.chat_template_kwargs["enable_thinking"], false) << off;
    EXPECT_FALSE(r.chat.max_thinking_tokens.has_value()) << off;
    EXPECT_EQ(r.settings["reasoning"], OrderedJson({{"effort", off}, {"summary", "auto"}}));
  }
  const std::pair<const char*, int64_t> on[] = {
      {"low", kBudget / 4}, {"medium", kBudget / 2}, {"high", kBudget}, {"xhigh", kBudget}};
  for (const auto& [name, budget] : on) {
    const ResponsesRequest r = effort(name);
    EXPECT_EQ(r.chat.chat_template_kwargs["enable_thinking"], true) << name;
    EXPECT_EQ(r.chat.max_thinking_tokens, budget) << name;
    ASSERT_TRUE(r.chat.reasoning_effort.has_value());
  }
  EXPECT_EQ(effort("low").chat.reasoning_effort, "low");
  EXPECT_EQ(effort("max").chat.reasoning_effort, "high");
  // A tiny server budget still leaves a budget of one token.
  EXPECT_EQ(parse_responses_request(body({{"reasoning", {{"effort", "low"}}}}), 2, {})
                .chat.max_thinking_tokens,
            1);
}

TEST(ResponsesRequest, TextFormatTakesTheChatResponseFormatPath) {
  const ResponsesRequest r =
      parse(body({{"text", {{"format", {{"type", "text"}}}, {"verbosity", "low"}}}}));
  EXPECT_EQ(r.chat.response_format.type, "text");
  EXPECT_EQ(r.settings["text"],
            OrderedJson({{"format", {{"type", "text"}}}, {"verbosity", "low"}}));
  // json_object, and json_schema in the Responses API's flat shape, as chat's response_format.
  EXPECT_EQ(parse(body({{"text", {{"format", {{"type", "json_object"}}}}}})).chat.response_format.type,
            "json_object");
  const ResponseFormat schema =
      parse(body({{"text",
                   {{"format",
                     {{"type", "json_schema"}, {"name", "x"}, {"strict", true},
                      {"schema", {{"type", "object"}}}}}}}}))
          .chat.response_format;
  EXPECT_EQ(schema.type, "json_schema");
  EXPECT_EQ(schema.name, "x");
  EXPECT_TRUE(schema.strict);
  EXPECT_EQ(schema.schema, OrderedJson({{"type", "object"}}));
  EXPECT_EQ(schema.param, "text.format");
  expect_error(body({{"text", {{"format", {{"type", "json_schema"}, {"name", "x"}}}}}}),
               "text.format.schema", "Missing required");
  expect_error(body({{"text", {{"format", {{"type", "yaml"}}}}}}), "text.format.type", "yaml");
  expect_error(body({{"text", {{"format", OrderedJson::object()}}}}), "text.format.type",
               "Missing required parameter");
  expect_error(body({{"text", {{"format", "json"}}}}), "text.format", "expected an object");
  expect_error(body({{"text", {{"format", {{"type", true}}}}}}), "text.format.type",
               "expected a string");  // found by fuzz_responses_request
  expect_error(body({{"text", {{"verbosity", "loud"}}}}), "text.verbosity", "loud");
}

TEST(ResponsesRequest, WrongInputIsA400NamingTheField) {
  expect_error(OrderedJson{{"model", "m"}}, "input", "Missing required parameter");
  expect_error(body({{"input", OrderedJson::array()}}), "input", "at least one");
  expect_error(body({{"input", 5}}), "input", "a string or an array");
  expect_error(body({{"input", {5}}}), "input[0]", "expected an object");
  expect_error(body({{"input", {{{"content", "x"}}}}}), "input[0].type", "Missing");
  expect_error(body({{"input", {message("tool", "x")}}}), "input[0].role", "'tool'");
  expect_error(body({{"input", {{{"type", "message"}, {"content", "x"}}}}}), "input[0].role",
               "Missing");
  expect_error(body({{"input", {{{"role", "user"}}}}}), "input[0].content", "Missing");
  expect_error(body({{"input", {message("user", 3)}}}), "input[0].content", "a string or an");
  expect_error(
      body({{"input", {message("user", {{{"type", "input_image"}, {"image_url", "x"}}})}}}),
      "input[0].content[0].type", "text-only");
  expect_error(body({{"input", {message("user", {{{"type", "input_text"}}})}}}),
               "input[0].content[0].text", "Missing");
  expect_error(body({{"input", {{{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}}}}),
               "input[0].call_id", "Missing");
  expect_error(
      body({{"input", {{{"type", "function_call"}, {"call_id", "c"}, {"arguments", "{}"}}}}}),
      "input[0].name", "Missing");
  expect_error(body({{"input", {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}}}}}),
               "input[0].arguments", "Missing");
  expect_error(body({{"input",
                      {{{"type", "function_call"},
                        {"call_id", "c"},
                        {"name", "f"},
                        {"arguments", "{\"a\": "}}}}}),
               "input[0].arguments", "'input[0].arguments'");
  expect_error(body({{"input", {{{"type", "function_call_output"}, {"call_id", "c"}}}}}),
               "input[0].output", "Missing");
  expect_error(
      body({{"input", {{{"type", "function_call_output"}, {"call_id", "c"}, {"output", 1}}}}}),
      "input[0].output", "a string or an array");
  expect_error(body({{"input",
                      {{{"type", "reasoning"},
                        {"summary", {{{"type", "reasoning_text"}, {"text", "x"}}}}}}}}),
               "input[0].summary[0].type", "summary_text");
  expect_error(body({{"input", {{{"type", "item_reference"}, {"id", "msg_1"}}}}}), "input[0].type",
               "item_reference");
  expect_error(body({{"input", {{{"type", "web_search_call"}, {"id", "ws_1"}}}}}), "input[0].type",
               "function tools only");
  expect_error(body({{"instructions", 1}}), "instructions", "expected a string");
  expect_error(body({{"max_output_tokens", 0}}), "max_output_tokens", "between 1 and");
  expect_error(body({{"temperature", 3}}), "temperature", "between 0 and 2");
  expect_error(body({{"top_p", "x"}}), "top_p", "expected a number");
  expect_error(body({{"stream", "yes"}}), "stream", "a boolean");
  expect_error(body({{"stream_options", {{"include_obfuscation", true}}}}), "stream_options",
               "only allowed when 'stream' is true");
  expect_error(body({{"store", 1}}), "store", "a boolean");
  expect_error(body({{"previous_response_id", 1}}), "previous_response_id", "a string");
  expect_error(body({{"metadata", {{"k", 1}}}}), "metadata.k", "a string");
  expect_error(body({{"metadata", {{"k", std::string(513, 'x')}}}}), "metadata.k", "512");
  OrderedJson many = OrderedJson::object();
  for (int i = 0; i < 17; ++i) many["k" + std::to_string(i)] = "v";
  expect_error(body({{"metadata", many}}), "metadata", "16");
  expect_error(body({{"truncation", "middle"}}), "truncation", "'middle'");
  expect_error(body({{"include", {1}}}), "include[0]", "a string");
  expect_error(body({{"reasoning", {{"effort", "extreme"}}}}), "reasoning.effort", "'extreme'");
  expect_error(body({{"reasoning", {{"summary", "long"}}}}), "reasoning.summary", "'long'");
  expect_error(body({{"reasoning", "high"}}), "reasoning", "an object");
}

// Tools strata cannot run or show (hosted tools, namespaces, custom tools) stay out of the prompt
// and are repeated in the response as given: Codex CLI offers them beside its functions.
TEST(ResponsesRequest, ToolsOfOtherTypesAreLeftOutOfThePrompt) {
  const OrderedJson web = {{"type", "web_search"}, {"external_web_access", false}};
  const OrderedJson ns = {{"type", "namespace"}, {"name", "agents"}, {"tools", {kWeatherTool}}};
  const ResponsesRequest r = parse(body({{"tools", {web, kWeatherTool, ns}}}));
  ASSERT_EQ(r.chat.tools.size(), 1u);
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "get_weather");
  ASSERT_EQ(r.settings["tools"].size(), 3u);
  EXPECT_EQ(r.settings["tools"][0], web);
  EXPECT_EQ(r.settings["tools"][2], ns);
  const ResponsesRequest none = parse(body({{"tools", {web}}}));
  EXPECT_TRUE(none.chat.tools.is_null() || none.chat.tools.empty());
}

TEST(ResponsesRequest, ToolsAndToolChoiceErrors) {
  const OrderedJson tools = {kWeatherTool};
  expect_error(body({{"tools", {{{"name", "f"}}}}}), "tools[0].type", "Missing");
  expect_error(body({{"tools", {{{"type", "function"}}}}}), "tools[0].name", "Missing");
  expect_error(body({{"tools", {{{"type", "function"}, {"name", ""}}}}}), "tools[0].name",
               "needs a name");
  expect_error(body({{"tools", {kWeatherTool, kWeatherTool}}}), "tools[1].name", "unique");
  expect_error(body({{"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", "x"}}}}}),
               "tools[0].parameters", "an object");
  expect_error(body({{"tools", {{{"type", "function"}, {"name", "f"}, {"strict", "x"}}}}}),
               "tools[0].strict", "a boolean");
  expect_error(body({{"tools", "x"}}), "tools", "an array");
  expect_error(body({{"tool_choice", "required"}}), "tool_choice", "needs 'tools'");
  expect_error(body({{"tool_choice", "any"}}), "tool_choice", "'any'");
  expect_error(body({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"name", "x"}}}}),
               "tool_choice.name", "no function named 'x'");
  expect_error(body({{"tools", tools}, {"tool_choice", {{"type", "function"}}}}),
               "tool_choice.name", "Missing");
  expect_error(body({{"tools", tools}, {"tool_choice", {{"type", "file_search"}}}}),
               "tool_choice.type", "'file_search'");
  expect_error(body({{"tool_choice", 1}}), "tool_choice", "a string or an object");
}

TEST(ResponsesRequest, FieldsStrataCannotHonourAreRefused) {
  expect_error(body({{"background", true}}), "background", "not supported");
  expect_error(body({{"conversation", "conv_1"}}), "conversation", "previous_response_id");
  expect_error(body({{"prompt", {{"id", "pmpt_1"}}}}), "prompt", "not supported");
  expect_error(body({{"max_tool_calls", 2}}), "max_tool_calls", "not supported");
  expect_error(body({{"top_logprobs", 3}}), "top_logprobs", "not supported");
  // Their harmless values pass.
  EXPECT_NO_THROW(
      parse(body({{"background", false}, {"top_logprobs", 0}, {"conversation", nullptr}})));
}

}  // namespace
}  // namespace strata::server
