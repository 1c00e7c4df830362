// Anthropic Messages request parsing: every field read into the chat request the pipeline runs
// (messages and their blocks, system, tools, tool_choice, thinking, sampling, stop sequences,
// metadata), and every wrong input a 400 naming the field in Anthropic's error shape.
#include "server/anthropic_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace strata::server {
namespace {

OrderedJson body(OrderedJson extra = OrderedJson::object()) {
  OrderedJson b = {{"model", "claude-sonnet-4-5"},
                   {"max_tokens", 100},
                   {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  b.update(extra);
  return b;
}

OrderedJson user(OrderedJson content) {
  return {{"role", "user"}, {"content", std::move(content)}};
}
OrderedJson assistant(OrderedJson content) {
  return {{"role", "assistant"}, {"content", std::move(content)}};
}
OrderedJson text(const std::string& t) { return {{"type", "text"}, {"text", t}}; }

const OrderedJson kWeatherTool = {{"name", "get_weather"},
                                  {"description", "Weather in a city"},
                                  {"input_schema",
                                   {{"type", "object"},
                                    {"properties", {{"city", {{"type", "string"}}}}},
                                    {"required", {"city"}}}},
                                  {"cache_control", {{"type", "ephemeral"}}}};

// Expects a 400 naming `param`, with `words` in the message, in Anthropic's shape.
void expect_400(const OrderedJson& b, const std::string& param, const std::string& words = "",
                MessagesRoute route = MessagesRoute::kCreate) {
  try {
    parse_messages_request(b, route);
    ADD_FAILURE() << "accepted: " << b.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    const OrderedJson j = e.to_json(ErrorFormat::kAnthropic);
    EXPECT_EQ(j["type"], "error");
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["message"], e.what());
  }
}

TEST(AnthropicRequest, ReadsTheGenerationFields) {
  const ChatCompletionRequest r = parse_messages_request(
      body({{"temperature", 0.5},
            {"top_p", 0.9},
            {"top_k", 40},
            {"stop_sequences", {"END", "STOP"}},
            {"stream", true},
            {"metadata", {{"user_id", "u-1"}}},
            {"service_tier", "auto"},  // a field strata has no use for: ignored
            {"some_future_field", {1, 2}}}));
  const GenerationOptions& o = r.options;
  EXPECT_EQ(o.model, "claude-sonnet-4-5");
  EXPECT_EQ(o.max_tokens, 100);
  EXPECT_FLOAT_EQ(o.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(o.sampling.top_p, 0.9f);
  EXPECT_EQ(o.sampling.top_k, 40);
  EXPECT_EQ(o.stop, (std::vector<std::string>{"END", "STOP"}));
  EXPECT_TRUE(o.stream);
  EXPECT_EQ(o.user, "u-1");
  EXPECT_TRUE(r.max_tokens_caps_all_output);
  EXPECT_EQ(r.messages, OrderedJson::parse(R"([{"role": "user", "content": "Hi"}])"));
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_FALSE(r.chat_template_kwargs.contains("enable_thinking"));  // the model's default
  EXPECT_FALSE(r.max_thinking_tokens.has_value());

  // Defaults: Anthropic's temperature 1 and no cuts; temperature 0 is greedy.
  const ChatCompletionRequest d = parse_messages_request(body());
  EXPECT_FLOAT_EQ(d.options.sampling.temperature, 1.0f);
  EXPECT_EQ(d.options.sampling.top_k, 0);
  EXPECT_FALSE(d.options.stream);
  const ChatCompletionRequest g = parse_messages_request(body({{"temperature", 0}}));
  EXPECT_FLOAT_EQ(g.options.sampling.temperature, 0.0f);
}

TEST(AnthropicRequest, SystemAsAStringOrTextBlocksOpensTheMessages) {
  ChatCompletionRequest r = parse_messages_request(body({{"system", "Be brief."}}));
  EXPECT_EQ(r.messages[0], OrderedJson::parse(R"({"role": "system", "content": "Be brief."})"));
  EXPECT_EQ(r.messages[1]["role"], "user");
  r = parse_messages_request(body(
      {{"system",
        {text("You are an agent."),
         {{"type", "text"}, {"text", "Be brief."}, {"cache_control", {{"type", "ephemeral"}}}}}}}));
  EXPECT_EQ(r.messages[0], OrderedJson::parse(R"({"role": "system", "content": [
      {"type": "text", "text": "You are an agent."}, {"type": "text", "text": "Be brief."}]})"));
  r = parse_messages_request(body({{"system", ""}}));  // an empty system prompt is none
  EXPECT_EQ(r.messages.size(), 1u);
}

// Claude Code sends reminders as system messages among the messages: their text joins the system
// prompt (chat templates take a system message only first), or opens one.
TEST(AnthropicRequest, SystemMessagesAmongTheMessagesJoinTheSystemPrompt) {
  const OrderedJson late = {{"role", "system"}, {"content", {text("Reminder: be careful.")}}};
  ChatCompletionRequest r =
      parse_messages_request(body({{"system", "Be brief."}, {"messages", {user("Hi"), late}}}));
  EXPECT_EQ(r.messages, OrderedJson::parse(R"([
      {"role": "system", "content": "Be brief.\n\nReminder: be careful."},
      {"role": "user", "content": "Hi"}])"));
  r = parse_messages_request(body(
      {{"system", {text("You are an agent."), text("Be brief.")}}, {"messages", {user("Hi"), late}}}));
  EXPECT_EQ(r.messages[0], OrderedJson::parse(R"({"role": "system",
      "content": "You are an agent.\nBe brief.\n\nReminder: be careful."})"));
  r = parse_messages_request(body({{"messages", {user("Hi"), late, {{"role", "system"}, {"content", "Two."}}}}}));
  EXPECT_EQ(r.messages, OrderedJson::parse(R"([
      {"role": "system", "content": "Reminder: be careful.\n\nTwo."},
      {"role": "user", "content": "Hi"}])"));
}

TEST(AnthropicRequest, ContentBlocksBecomeChatMessages) {
  const OrderedJson messages = {
      user({text("What's the weather in Paris?"), text("Thanks.")}),
      assistant(
          {{{"type", "thinking"}, {"thinking", "I should call the tool."}, {"signature", "sig"}},
           {{"type", "redacted_thinking"}, {"data", "opaque"}},
           text("Let me check."),
           {{"type", "tool_use"},
            {"id", "toolu_1"},
            {"name", "get_weather"},
            {"input", {{"city", "Paris"}}}}}),
      user({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "Sunny, 21 C"}},
            text("And tomorrow?")}),
      assistant({{{"type", "tool_use"},
                  {"id", "toolu_2"},
                  {"name", "get_weather"},
                  {"input", {{"city", "Paris"}}}}}),
      user({{{"type", "tool_result"},
             {"tool_use_id", "toolu_2"},
             {"content", {text("Rain,"), text("12 C")}},
             {"is_error", true}}}),
  };
  const ChatCompletionRequest r =
      parse_messages_request(body({{"messages", messages}, {"tools", {kWeatherTool}}}));
  EXPECT_EQ(r.messages, OrderedJson::parse(R"([
      {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"},
                                   {"type": "text", "text": "Thanks."}]},
      {"role": "assistant", "content": "Let me check.",
       "reasoning_content": "I should call the tool.",
       "tool_calls": [{"id": "toolu_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny, 21 C", "name": "get_weather"},
      {"role": "user", "content": "And tomorrow?"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"id": "toolu_2", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: Rain,\n12 C",
       "name": "get_weather"}])"))
      << r.messages.dump(2);
}

TEST(AnthropicRequest, ToolsAndToolChoiceBecomeFunctionTools) {
  ChatCompletionRequest r = parse_messages_request(body({{"tools", {kWeatherTool}}}));
  EXPECT_EQ(r.tools, OrderedJson::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}}])"));
  const OrderedJson no_description = {
      {"name", "now"}, {"input_schema", {{"type", "object"}}}, {"type", "custom"}};
  r = parse_messages_request(body({{"tools", {no_description}}}));
  EXPECT_FALSE(r.tools[0]["function"].contains("description"));

  auto choice = [&](const OrderedJson& c) {
    return parse_messages_request(body({{"tools", {kWeatherTool}}, {"tool_choice", c}}));
  };
  EXPECT_EQ(choice({{"type", "auto"}}).tool_choice, ToolChoice::kAuto);
  EXPECT_EQ(choice({{"type", "any"}}).tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(choice({{"type", "none"}}).tool_choice, ToolChoice::kNone);
  r = choice({{"type", "tool"}, {"name", "get_weather"}});
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "get_weather");
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_FALSE(choice({{"type", "auto"}, {"disable_parallel_tool_use", true}}).parallel_tool_calls);
  EXPECT_FALSE(choice({{"type", "any"}, {"disable_parallel_tool_use", true}}).parallel_tool_calls);
  EXPECT_TRUE(parse_messages_request(body({{"tools", OrderedJson::array()}})).tools.is_null());
}

TEST(AnthropicRequest, ThinkingMapsOntoThinkControl) {
  ChatCompletionRequest r = parse_messages_request(
      body({{"max_tokens", 4000}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}}));
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
  EXPECT_EQ(r.max_thinking_tokens, 1024);
  r = parse_messages_request(body({{"thinking", {{"type", "disabled"}}}}));
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  EXPECT_FALSE(r.max_thinking_tokens.has_value());
  for (const char* type : {"adaptive", "between_tools"}) {
    r = parse_messages_request(body({{"thinking", {{"type", type}, {"display", "summarized"}}}}));
    EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
    EXPECT_FALSE(r.max_thinking_tokens.has_value());  // the server's budget
  }
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokens) {
  OrderedJson b = body({{"thinking", {{"type", "enabled"}, {"budget_tokens", 5000}}}});
  b.erase("max_tokens");
  const ChatCompletionRequest r = parse_messages_request(b, MessagesRoute::kCountTokens);
  EXPECT_FALSE(r.options.max_tokens.has_value());
  EXPECT_EQ(r.max_thinking_tokens, 5000);
  expect_400(b, "max_tokens", "Missing required parameter");  // but creating a message does
}

TEST(AnthropicRequest, RefusesWrongTopLevelFields) {
  OrderedJson b = body();
  b.erase("model");
  expect_400(b, "model", "Missing required parameter");
  expect_400(b, "model", "Missing required parameter", MessagesRoute::kCountTokens);
  b = body();
  b.erase("messages");
  expect_400(b, "messages", "Missing required parameter");
  expect_400(body({{"model", 3}}), "model", "expected a string");
  expect_400(body({{"max_tokens", 0}}), "max_tokens", "between 1 and");
  expect_400(body({{"max_tokens", "100"}}), "max_tokens", "expected an integer");
  expect_400(body({{"temperature", 1.5}}), "temperature", "between 0 and 1");
  expect_400(body({{"top_p", -0.1}}), "top_p");
  expect_400(body({{"top_k", -1}}), "top_k");
  expect_400(body({{"top_k", 2.5}}), "top_k", "expected an integer");
  expect_400(body({{"stream", "yes"}}), "stream", "expected a boolean");
  expect_400(body({{"stop_sequences", "END"}}), "stop_sequences", "expected an array");
  expect_400(body({{"stop_sequences", {"a", 1}}}), "stop_sequences.1", "expected a string");
  expect_400(body({{"stop_sequences", OrderedJson(std::vector<std::string>(17, "x"))}}),
             "stop_sequences", "array too long");
  expect_400(body({{"metadata", "x"}}), "metadata", "expected an object");
  expect_400(body({{"metadata", {{"user_id", 5}}}}), "metadata.user_id", "expected a string");
  expect_400(body({{"system", 5}}), "system", "a string or an array of text blocks");
  expect_400(body({{"system", {{{"type", "image"}}}}}), "system.0.type", "text-only");
  expect_400(body({{"system", {{{"type", "text"}}}}}), "system.0.text", "Missing required");
}

TEST(AnthropicRequest, RefusesWrongMessages) {
  auto with = [](OrderedJson messages) { return body({{"messages", std::move(messages)}}); };
  expect_400(body({{"messages", "Hi"}}), "messages", "expected an array");
  expect_400(with(OrderedJson::array()), "messages", "at least one message");
  expect_400(with({"Hi"}), "messages.0", "expected an object");
  expect_400(with({{{"content", "Hi"}}}), "messages.0.role", "Missing required");
  expect_400(with({{{"role", "tool"}, {"content", "Hi"}}}), "messages.0.role",
             "expected 'user', 'assistant' or 'system', got 'tool'");
  expect_400(with({user("Hi"), {{"role", "system"}, {"content", {{{"type", "image"}}}}}}),
             "messages.1.content.0.type", "image");
  expect_400(with({{{"role", "user"}}}), "messages.0.content", "Missing required");
  expect_400(with({user(5)}), "messages.0.content", "a string or an array of content blocks");
  expect_400(with({user({"Hi"})}), "messages.0.content.0", "expected an object");
  expect_400(with({user({{{"text", "Hi"}}})}), "messages.0.content.0.type", "Missing required");
  expect_400(with({user({{{"type", "text"}}})}), "messages.0.content.0.text", "Missing required");
  expect_400(with({user({{{"type", "image"}, {"source", {{"type", "base64"}}}}})}),
             "messages.0.content.0.type", "text-only");
  expect_400(with({user({{{"type", "web_search_tool_result"}}})}), "messages.0.content.0.type",
             "not supported");
  expect_400(with({user({{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", {}}}})}),
             "messages.0.content.0.type", "assistant messages");
  expect_400(with({user({{{"type", "thinking"}, {"thinking", "x"}}})}), "messages.0.content.0.type",
             "assistant messages");
  // Tool results.
  expect_400(with({user({{{"type", "tool_result"}}})}), "messages.0.content.0.tool_use_id",
             "Missing required");
  expect_400(with({user({{{"type", "tool_result"}, {"tool_use_id", "t"}, {"content", 5}}})}),
             "messages.0.content.0.content", "a string or an array of text blocks");
  expect_400(
      with({user(
          {{{"type", "tool_result"}, {"tool_use_id", "t"}, {"content", {{{"type", "image"}}}}}})}),
      "messages.0.content.0.content.0.type", "text-only");
  expect_400(with({user({{{"type", "tool_result"}, {"tool_use_id", "t"}, {"is_error", "no"}}})}),
             "messages.0.content.0.is_error", "expected a boolean");
  // Assistant blocks, in a conversation that ends with the user.
  auto turn = [&](OrderedJson block) {
    return with({user("Hi"), assistant({std::move(block)}), user("Go on")});
  };
  expect_400(turn({{"type", "tool_use"}, {"name", "f"}, {"input", {}}}), "messages.1.content.0.id",
             "Missing required");
  expect_400(turn({{"type", "tool_use"}, {"id", "t"}, {"input", {}}}), "messages.1.content.0.name",
             "Missing required");
  expect_400(turn({{"type", "tool_use"}, {"id", "t"}, {"name", "f"}}), "messages.1.content.0.input",
             "Missing required");
  expect_400(turn({{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", "{}"}}),
             "messages.1.content.0.input", "expected an object");
  expect_400(turn({{"type", "thinking"}}), "messages.1.content.0.thinking", "Missing required");
  expect_400(turn({{"type", "thinking"}, {"thinking", "x"}, {"signature", 1}}),
             "messages.1.content.0.signature", "expected a string");
  expect_400(turn({{"type", "tool_result"}, {"tool_use_id", "t"}}), "messages.1.content.0.type",
             "user messages");
  // A prefill (a last assistant message) is refused.
  expect_400(with({user("Hi"), assistant("The answer is")}), "messages", "prefill");
  // Caps.
  expect_400(with({user(OrderedJson(std::vector<OrderedJson>(kMaxContentParts + 1, text("x"))))}),
             "messages.0.content", "array too long");
}

TEST(AnthropicRequest, RefusesWrongToolsToolChoiceAndThinking) {
  expect_400(body({{"tools", kWeatherTool}}), "tools", "expected an array");
  expect_400(body({{"tools", {"get_weather"}}}), "tools.0", "expected an object");
  expect_400(body({{"tools", {{{"input_schema", {{"type", "object"}}}}}}}), "tools.0.name",
             "Missing required");
  expect_400(body({{"tools", {{{"name", "f"}}}}}), "tools.0.input_schema", "Missing required");
  expect_400(body({{"tools", {{{"name", "f"}, {"input_schema", "{}"}}}}}), "tools.0.input_schema",
             "expected an object");
  expect_400(body({{"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}),
             "tools.0.type", "not supported");
  expect_400(body({{"tools", {kWeatherTool, kWeatherTool}}}), "tools.1.name", "unique");
  expect_400(
      body({{"tools",
             {{{"name", "f"}, {"description", 1}, {"input_schema", OrderedJson::object()}}}}}),
      "tools.0.description", "expected a string");

  const OrderedJson tools = {kWeatherTool};
  expect_400(body({{"tools", tools}, {"tool_choice", "auto"}}), "tool_choice",
             "expected an object");
  expect_400(body({{"tools", tools}, {"tool_choice", OrderedJson::object()}}), "tool_choice.type",
             "Missing required");
  expect_400(body({{"tools", tools}, {"tool_choice", {{"type", "required"}}}}), "tool_choice.type",
             "'auto', 'any', 'tool' or 'none'");
  expect_400(body({{"tools", tools}, {"tool_choice", {{"type", "tool"}}}}), "tool_choice.name",
             "Missing required");
  expect_400(body({{"tools", tools}, {"tool_choice", {{"type", "tool"}, {"name", "other"}}}}),
             "tool_choice.name", "no tool named 'other'");
  expect_400(body({{"tool_choice", {{"type", "any"}}}}), "tool_choice", "needs 'tools'");
  expect_400(body({{"tools", tools},
                   {"tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", 1}}}}),
             "tool_choice.disable_parallel_tool_use", "expected a boolean");

  expect_400(body({{"thinking", true}}), "thinking", "expected an object");
  expect_400(body({{"thinking", OrderedJson::object()}}), "thinking.type", "Missing required");
  expect_400(body({{"thinking", {{"type", "on"}}}}), "thinking.type", "'enabled', 'disabled'");
  expect_400(body({{"thinking", {{"type", "enabled"}}}}), "thinking.budget_tokens",
             "Missing required");
  expect_400(body({{"thinking", {{"type", "enabled"}, {"budget_tokens", 0}}}}),
             "thinking.budget_tokens", "between 1 and");
  expect_400(
      body({{"max_tokens", 100}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 100}}}}),
      "thinking.budget_tokens", "less than max_tokens");
}

TEST(AnthropicRequest, ErrorShapesFollowTheStatus) {
  auto type = [](int status) {
    return ApiError(status, "x")
        .to_json(ErrorFormat::kAnthropic)["error"]["type"]
        .get<std::string>();
  };
  EXPECT_EQ(type(400), "invalid_request_error");
  EXPECT_EQ(type(401), "authentication_error");
  EXPECT_EQ(type(403), "permission_error");
  EXPECT_EQ(type(404), "not_found_error");
  EXPECT_EQ(type(405), "invalid_request_error");
  EXPECT_EQ(type(413), "request_too_large");
  EXPECT_EQ(type(429), "rate_limit_error");
  EXPECT_EQ(type(500), "api_error");
  EXPECT_EQ(type(503), "overloaded_error");
  EXPECT_EQ(type(529), "overloaded_error");
  const OrderedJson j =
      ApiError(404, "No such model.", "model", "model_not_found").to_json(ErrorFormat::kAnthropic);
  EXPECT_EQ(
      j,
      OrderedJson::parse(
          R"({"type": "error", "error": {"type": "not_found_error", "message": "No such model."}})"));
  // The OpenAI shape is unchanged.
  EXPECT_EQ(ApiError(404, "No such model.", "model", "model_not_found").to_json()["error"]["code"],
            "model_not_found");
}

}  // namespace
}  // namespace strata::server
