// Request validation: each OpenAI field read with its type and range, clear 400s naming the field
// for wrong input, refusals for what strata cannot do yet, and unknown fields ignored.
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/auth.h"

namespace strata::server {
namespace {

OrderedJson chat(OrderedJson extra = OrderedJson::object()) {
  OrderedJson body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  body.update(extra);
  return body;
}

// Expects parse_chat_request(body) to fail with 400, naming `param`, with `code` and `words` in
// the message.
void expect_400(const OrderedJson& body, const std::string& param, const std::string& code,
                const std::string& words = "") {
  try {
    parse_chat_request(body);
    ADD_FAILURE() << "accepted: " << body.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    const auto j = e.to_json();
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["message"], e.what());
  }
}

TEST(OpenAiRequest, ReadsEveryOpenAiFieldOfAChatRequest) {
  const ChatCompletionRequest r =
      parse_chat_request(chat({{"max_completion_tokens", 7},
                               {"max_tokens", 9},
                               {"temperature", 0.5},
                               {"top_p", 0.9},
                               {"top_k", 40},
                               {"min_p", 0.05},
                               {"presence_penalty", 0.5},
                               {"frequency_penalty", -0.5},
                               {"repetition_penalty", 1.1},
                               {"logit_bias", {{"42", -100}, {"7", 2.5}}},
                               {"seed", -3},
                               {"stop", {"a", "b"}},
                               {"n", 1},
                               {"logprobs", false},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}},
                               {"response_format", {{"type", "text"}}},
                               {"parallel_tool_calls", false},
                               {"user", "u1"},
                               {"reasoning_effort", "none"},
                               {"chat_template_kwargs", {{"enable_thinking", false}}},
                               {"some_future_field", {1, 2, 3}}}));
  const GenerationOptions& o = r.options;
  EXPECT_EQ(o.model, "m");
  EXPECT_EQ(o.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(o.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(o.sampling.top_p, 0.9f);
  EXPECT_EQ(o.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(o.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(o.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(o.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(o.sampling.repetition_penalty, 1.1f);
  ASSERT_EQ(o.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(o.sampling.logit_bias[0], std::make_pair(42, -100.0f));
  EXPECT_EQ(o.seed, -3);
  EXPECT_EQ(o.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(o.stream);
  EXPECT_TRUE(o.include_usage);
  EXPECT_EQ(o.user, "u1");
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.reasoning_effort, "none");
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
}

TEST(OpenAiRequest, DefaultsFollowOpenAi) {
  const ChatCompletionRequest r =
      parse_chat_request(chat({{"temperature", nullptr}}));  // null = absent
  EXPECT_FALSE(r.options.max_tokens);
  EXPECT_FLOAT_EQ(r.options.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.options.sampling.top_p, 1.0f);
  EXPECT_FALSE(r.options.seed);
  EXPECT_FALSE(r.options.stream);
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.tools.is_null());
}

// The strata extension's speculative methods by name or as an object; self-speculation's layers
// must be a whole number of at least 1 (the server checks them against the model's).
TEST(OpenAiRequest, SpeculativeMethodsAndSelfLayers) {
  using Method = runtime::SpeculativeParams::Method;
  auto speculative = [](const OrderedJson& value) {
    return parse_chat_request(chat({{"strata", {{"speculative", value}}}})).options.speculative;
  };
  EXPECT_EQ(parse_chat_request(chat()).options.speculative.method, Method::kDefault);
  EXPECT_EQ(speculative("self").method, Method::kSelf);
  const runtime::SpeculativeParams p =
      speculative({{"method", "self"}, {"draft_max", 3}, {"layers", 2}});
  EXPECT_EQ(p.method, Method::kSelf);
  EXPECT_EQ(p.draft_max, 3);
  EXPECT_EQ(p.layers, 2);
  EXPECT_EQ(speculative({{"method", "ngram"}}).layers, 0);
  expect_400(chat({{"strata", {{"speculative", "selfish"}}}}), "strata.speculative",
             "invalid_value", "'ngram', 'draft' (with the server's draft model), 'self' or 'off'");
  for (const OrderedJson& bad : {OrderedJson(0), OrderedJson(-2), OrderedJson(5000)})
    expect_400(chat({{"strata", {{"speculative", {{"method", "self"}, {"layers", bad}}}}}}),
               "strata.speculative.layers", "invalid_value");
  for (const OrderedJson& bad : {OrderedJson(1.5), OrderedJson("two")})
    expect_400(chat({{"strata", {{"speculative", {{"method", "self"}, {"layers", bad}}}}}}),
               "strata.speculative.layers", "invalid_type");
}

TEST(OpenAiRequest, StopIsAStringOrAList) {
  EXPECT_EQ(parse_chat_request(chat({{"stop", "END"}})).options.stop,
            std::vector<std::string>{"END"});
  expect_400(chat({{"stop", 5}}), "stop", "invalid_type", "string or an array of strings");
  expect_400(chat({{"stop", {"a", 1}}}), "stop[1]", "invalid_type");
}

TEST(OpenAiRequest, WrongTypesAndValuesAre400sNamingTheField) {
  expect_400(chat({{"temperature", "hot"}}), "temperature", "invalid_type",
             "Invalid type for 'temperature': expected a number, but got a string instead.");
  expect_400(chat({{"temperature", 2.5}}), "temperature", "invalid_value", "between 0 and 2");
  expect_400(chat({{"top_p", -0.1}}), "top_p", "invalid_value");
  expect_400(chat({{"max_tokens", 1.5}}), "max_tokens", "invalid_type", "an integer");
  expect_400(chat({{"max_tokens", -1}}), "max_tokens", "invalid_value");
  expect_400(chat({{"seed", "7"}}), "seed", "invalid_type");
  expect_400(chat({{"stream", "yes"}}), "stream", "invalid_type", "a boolean");
  expect_400(chat({{"presence_penalty", 3}}), "presence_penalty", "invalid_value");
  expect_400(chat({{"logit_bias", {{"abc", 1}}}}), "logit_bias", "invalid_value", "token ids");
  expect_400(chat({{"logit_bias", {{"5", 101}}}}), "logit_bias.5", "invalid_value");
  expect_400(chat({{"logit_bias", {1, 2}}}), "logit_bias", "invalid_type");
  expect_400(chat({{"stream_options", {{"include_usage", true}}}}), "stream_options",
             "invalid_value", "stream");
  expect_400(chat({{"reasoning_effort", "max"}}), "reasoning_effort", "invalid_value");
  expect_400(chat({{"chat_template_kwargs", "x"}}), "chat_template_kwargs", "invalid_type");
  EXPECT_EQ(parse_chat_request(chat({{"max_tokens", 5.0}})).options.max_tokens,
            5);  // integral number
}

TEST(OpenAiRequest, MessagesAreChecked) {
  expect_400({{"model", "m"}}, "messages", "", "Missing required parameter: 'messages'");
  expect_400(chat({{"messages", OrderedJson::array()}}), "messages", "invalid_value");
  expect_400(chat({{"messages", "Hi"}}), "messages", "invalid_type");
  expect_400(chat({{"messages", {"Hi"}}}), "messages[0]", "invalid_type");
  expect_400(chat({{"messages", {{{"content", "Hi"}}}}}), "messages[0].role", "");
  expect_400(chat({{"messages", {{{"role", "robot"}, {"content", "Hi"}}}}}), "messages[0].role",
             "invalid_value");
  expect_400(chat({{"messages", {{{"role", "user"}}}}}), "messages[0].content", "");
  expect_400(chat({{"messages", {{{"role", "user"}, {"content", 5}}}}}), "messages[0].content",
             "invalid_type");
  expect_400(chat({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}),
             "messages[0].content[0].type", "unsupported_parameter", "text-only");
  expect_400(chat({{"messages",
                    {{{"role", "assistant"},
                      {"content", nullptr},
                      {"tool_calls", {{{"type", "function"}}}}}}}}),
             "messages[0].tool_calls[0].function", "");
  expect_400(chat({{"messages",
                    {{{"role", "assistant"},
                      {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", 3}}}}}}}}}}),
             "messages[0].tool_calls[0].function.arguments", "invalid_type");
  // Assistant content may be null when it calls tools; text parts are fine; developer is system.
  const ChatCompletionRequest r = parse_chat_request(chat({{"messages", OrderedJson::parse(R"([
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "done"}])")}}));
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages.size(), 4u);
}

TEST(OpenAiRequest, ToolsAndToolChoice) {
  const OrderedJson tools = OrderedJson::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])");
  EXPECT_EQ(parse_chat_request(chat({{"tools", tools}})).tools, tools);
  EXPECT_EQ(parse_chat_request(chat({{"tools", tools}, {"tool_choice", "none"}})).tool_choice,
            ToolChoice::kNone);
  EXPECT_EQ(parse_chat_request(chat({{"tools", tools}, {"tool_choice", "required"}})).tool_choice,
            ToolChoice::kRequired);
  const ChatCompletionRequest named = parse_chat_request(
      chat({{"tools", tools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}));
  EXPECT_EQ(named.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tool_choice_name, "get_weather");
  expect_400(chat({{"tools", tools},
                   {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
             "tool_choice", "invalid_value", "no tool named 'nope'");
  expect_400(chat({{"tools", tools}, {"tool_choice", "sometimes"}}), "tool_choice",
             "invalid_value");
  expect_400(chat({{"tool_choice", "required"}}), "tool_choice", "invalid_value", "needs 'tools'");
  expect_400(chat({{"tools", {{{"type", "function"}, {"function", {{"description", "x"}}}}}}}),
             "tools[0].function.name", "");
  expect_400(chat({{"tools", {{{"type", "retrieval"}, {"function", {{"name", "x"}}}}}}}),
             "tools[0].type", "unsupported_parameter");
  expect_400(chat({{"tools", "get_weather"}}), "tools", "invalid_type");
}

TEST(OpenAiRequest, NChoicesFromOneTo128) {
  expect_400(chat({{"n", 0}}), "n", "invalid_value");
  expect_400(chat({{"n", 129}}), "n", "invalid_value");
  EXPECT_EQ(parse_chat_request(chat({{"n", 3}})).options.n, 3);
  EXPECT_EQ(parse_chat_request(chat()).options.n, 1);
}

TEST(OpenAiRequest, ResponseFormatsAreParsedInChatsAndResponsesShapes) {
  EXPECT_EQ(parse_chat_request(chat({{"response_format", {{"type", "json_object"}}}}))
                .response_format.type,
            "json_object");
  const OrderedJson schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  const ResponseFormat nested =
      parse_chat_request(chat({{"response_format",
                                {{"type", "json_schema"},
                                 {"json_schema", {{"name", "x"}, {"schema", schema}, {"strict", true}}}}}}))
          .response_format;
  EXPECT_EQ(nested.type, "json_schema");
  EXPECT_EQ(nested.name, "x");
  EXPECT_TRUE(nested.strict);
  EXPECT_EQ(nested.schema, schema);
  // The Responses API's text.format: the schema beside the type.
  const ResponseFormat flat = parse_response_format(
      {{"type", "json_schema"}, {"name", "y"}, {"schema", schema}}, "text.format");
  EXPECT_EQ(flat.name, "y");
  EXPECT_EQ(flat.schema, schema);
  // llama.cpp's server: a schema beside json_object is followed as a json_schema's.
  const ResponseFormat object_schema =
      parse_chat_request(chat({{"response_format", {{"type", "json_object"}, {"schema", schema}}}}))
          .response_format;
  EXPECT_EQ(object_schema.type, "json_schema");
  EXPECT_EQ(object_schema.schema, schema);
  EXPECT_EQ(object_schema.param, "response_format");
  EXPECT_EQ(parse_chat_request(chat({{"response_format", {{"type", "json_object"}, {"schema", nullptr}}}}))
                .response_format.type,
            "json_object");
  expect_400(chat({{"response_format", {{"type", "json_object"}, {"schema", "object"}}}}),
             "response_format.schema", "invalid_type");
  expect_400(
      chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}}),
      "response_format.json_schema.schema", "");
  expect_400(chat({{"response_format", {{"type", "yaml"}}}}), "response_format.type",
             "invalid_value");
  EXPECT_EQ(parse_chat_request(chat({{"strata_grammar", {{"pattern", "[ab]+"}}}}))
                .response_format.pattern,
            "[ab]+");
  expect_400(chat({{"strata_grammar", {{"type", "gbnf"}, {"pattern", "x"}}}}),
             "strata_grammar.type", "invalid_value");
}

// llama.cpp's structured-output fields, on chat and completions alike: grammar (GBNF text; ""
// is none, as in llama.cpp) and json_schema (the schema itself); completions also read
// response_format and strata_grammar as chat does. Two fields that each shape the answer are a
// 400 naming the second.
TEST(OpenAiRequest, GrammarAndJsonSchemaFieldsOnChatAndCompletions) {
  const OrderedJson schema = {{"type", "integer"}};
  const std::string gbnf = "root ::= \"yes\" | \"no\"";
  const OrderedJson completion = {{"prompt", "Q:"}};
  auto with = [](OrderedJson body, const OrderedJson& extra) {
    body.update(extra);
    return body;
  };
  auto shape_of = [&](const OrderedJson& extra) {
    return std::make_pair(parse_chat_request(chat(extra)).response_format,
                          parse_completion_request(with(completion, extra)).response_format);
  };
  for (const ResponseFormat& f :
       {shape_of({{"grammar", gbnf}}).first, shape_of({{"grammar", gbnf}}).second}) {
    EXPECT_EQ(f.type, "gbnf");
    EXPECT_EQ(f.grammar, gbnf);
    EXPECT_EQ(f.param, "grammar");
    EXPECT_TRUE(f.constrained());
  }
  for (const ResponseFormat& f :
       {shape_of({{"json_schema", schema}}).first, shape_of({{"json_schema", schema}}).second}) {
    EXPECT_EQ(f.type, "json_schema");
    EXPECT_EQ(f.schema, schema);
    EXPECT_EQ(f.param, "json_schema");
  }
  EXPECT_EQ(shape_of({{"grammar", ""}}).first.type, "");
  EXPECT_EQ(shape_of({{"grammar", ""}}).second.type, "");
  EXPECT_EQ(shape_of({{"grammar", nullptr}}).second.type, "");
  const ResponseFormat rf =
      parse_completion_request(
          with(completion,
               {{"response_format",
                 {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", schema}}}}}}))
          .response_format;
  EXPECT_EQ(rf.type, "json_schema");
  EXPECT_EQ(rf.name, "n");
  EXPECT_EQ(rf.param, "response_format");
  EXPECT_EQ(
      parse_completion_request(with(completion, {{"response_format", {{"type", "json_object"}}}}))
          .response_format.type,
      "json_object");
  EXPECT_EQ(parse_completion_request(with(completion, {{"strata_grammar", {{"pattern", "a+"}}}}))
                .response_format.type,
            "regex");
  // A "text" response_format shapes nothing, so a grammar beside it is no conflict.
  EXPECT_EQ(shape_of({{"response_format", {{"type", "text"}}}, {"grammar", gbnf}}).first.type,
            "gbnf");

  auto expect_both_400 = [&](const OrderedJson& extra, const std::string& param,
                             const std::string& code, const std::string& words) {
    expect_400(chat(extra), param, code, words);
    try {
      parse_completion_request(with(completion, extra));
      ADD_FAILURE() << "accepted: " << extra.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param) << e.what();
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_both_400({{"grammar", 5}}, "grammar", "invalid_type", "expected a string");
  expect_both_400({{"json_schema", "{}"}}, "json_schema", "invalid_type", "expected an object");
  expect_both_400({{"response_format", {{"type", "json_object"}}}, {"grammar", gbnf}}, "grammar",
                  "invalid_value", "'response_format' and 'grammar' both give the answer's shape");
  expect_both_400({{"json_schema", schema}, {"grammar", gbnf}}, "grammar", "invalid_value",
                  "'json_schema' and 'grammar'");
  expect_both_400({{"response_format", {{"type", "json_object"}}}, {"json_schema", schema}},
                  "json_schema", "invalid_value", "give only one");
  expect_both_400({{"grammar", gbnf}, {"strata_grammar", {{"pattern", "a"}}}}, "strata_grammar",
                  "invalid_value", "'grammar' and 'strata_grammar'");
  expect_both_400({{"response_format", {{"type", "yaml"}}}}, "response_format.type",
                  "invalid_value", "yaml");
}

TEST(OpenAiRequest, LogprobsAsOpenAiAllowsThem) {
  EXPECT_EQ(parse_chat_request(chat()).options.logprobs, -1);
  EXPECT_EQ(parse_chat_request(chat({{"logprobs", false}})).options.logprobs, -1);
  EXPECT_EQ(parse_chat_request(chat({{"logprobs", true}})).options.logprobs, 0);
  EXPECT_EQ(parse_chat_request(chat({{"logprobs", true}, {"top_logprobs", 20}})).options.logprobs,
            20);
  expect_400(chat({{"top_logprobs", 3}}), "top_logprobs", "invalid_value", "'logprobs' is true");
  expect_400(chat({{"logprobs", true}, {"top_logprobs", 21}}), "top_logprobs", "invalid_value");
  expect_400(chat({{"logprobs", 1}}), "logprobs", "invalid_type");
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}}).options.logprobs, -1);
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"logprobs", 0}}).options.logprobs, 0);
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"logprobs", 5}}).options.logprobs, 5);
}

TEST(OpenAiRequest, ThinkingBudgetUnderItsThreeNames) {
  EXPECT_FALSE(parse_chat_request(chat()).max_thinking_tokens);
  EXPECT_EQ(parse_chat_request(chat({{"max_thinking_tokens", 100}})).max_thinking_tokens, 100);
  EXPECT_EQ(parse_chat_request(chat({{"thinking_budget", 0}})).max_thinking_tokens, 0);
  EXPECT_EQ(parse_chat_request(chat({{"reasoning", {{"max_tokens", 7}}}})).max_thinking_tokens, 7);
  EXPECT_EQ(parse_chat_request(chat({{"max_thinking_tokens", 9}, {"thinking_budget", 8}}))
                .max_thinking_tokens,
            9);
  expect_400(chat({{"max_thinking_tokens", "many"}}), "max_thinking_tokens", "invalid_type");
  expect_400(chat({{"thinking_budget", -1}}), "thinking_budget", "invalid_value");
  expect_400(chat({{"reasoning", {{"max_tokens", true}}}}), "reasoning.max_tokens", "invalid_type");
  expect_400(chat({{"reasoning", "high"}}), "reasoning", "invalid_type");
  EXPECT_EQ(
      parse_chat_request(chat({{"response_format", {{"type", "text"}}}})).response_format.type,
      "text");
}

TEST(OpenAiRequest, CompletionPromptForms) {
  auto prompt_of = [](OrderedJson prompt) {
    return parse_completion_request({{"prompt", std::move(prompt)}}).prompt;
  };
  EXPECT_EQ(std::get<std::string>(prompt_of("Hi")), "Hi");
  EXPECT_EQ(std::get<std::string>(prompt_of({"Hi"})), "Hi");
  EXPECT_EQ(std::get<std::vector<int32_t>>(prompt_of({1, 2, 3})), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(std::get<std::vector<int32_t>>(prompt_of({{4, 5}})), (std::vector<int32_t>{4, 5}));
  auto expect_completion_400 = [](OrderedJson body, const std::string& param) {
    try {
      parse_completion_request(body);
      ADD_FAILURE() << "accepted: " << body.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param) << e.what();
    }
  };
  expect_completion_400(OrderedJson::object(), "prompt");
  expect_completion_400({{"prompt", {"a", "b"}}}, "prompt");
  expect_completion_400({{"prompt", {1, -2}}}, "prompt[1]");
  expect_completion_400({{"prompt", 5}}, "prompt");
  expect_completion_400({{"prompt", "x"}, {"best_of", 2}}, "best_of");
  expect_completion_400({{"prompt", "x"}, {"logprobs", 6}}, "logprobs");
  expect_completion_400({{"prompt", "x"}, {"logprobs", 2}, {"echo", true}}, "logprobs");
  expect_completion_400({{"prompt", "x"}, {"suffix", "y"}}, "suffix");
  EXPECT_TRUE(parse_completion_request({{"prompt", "x"}, {"echo", true}}).echo);
}

TEST(OpenAiRequest, BodyMustBeAJsonObject) {
  for (const char* body : {"", "{", "[1, 2]", "\"text\"", "{\"a\": }"}) {
    try {
      parse_body(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.code(), "invalid_json");
    }
  }
  EXPECT_EQ(parse_body(R"({"a": 1})")["a"], 1);
}

TEST(OpenAiRequest, TopPZeroAndTinyTemperaturesAreGreedy) {
  for (const OrderedJson& extra :
       {OrderedJson{{"top_p", 0}}, OrderedJson{{"temperature", 0.7}, {"top_p", 0}},
        OrderedJson{{"temperature", 1e-9}}}) {
    const runtime::SamplingParams s = parse_chat_request(chat(extra)).options.sampling;
    EXPECT_EQ(s.temperature, 0.0f) << extra.dump();
    EXPECT_EQ(s.top_p, 1.0f) << extra.dump();
    EXPECT_NO_THROW(runtime::Sampler{s}) << extra.dump();
  }
}

// Whatever validation accepts, the sampler accepts: every combination of edge values of each
// sampling field either is a 400 or builds a Sampler.
TEST(OpenAiRequest, WhatValidationAcceptsTheSamplerAccepts) {
  const OrderedJson temperatures = {0, 1e-46, 1e-30, 1e-6, 1e-5, 0.7, 2};
  const OrderedJson top_ps = {0, 1e-46, 1e-30, 0.5, 1};  // 1e-46 is 0 as a float
  const OrderedJson min_ps = {0, 1e-30, 1};
  const OrderedJson top_ks = {-1, 0, 1, 2147483647};
  const OrderedJson repetition = {0.01, 1, 10};
  const OrderedJson penalties = {-2, 0, 2};
  int accepted = 0;
  for (const auto& t : temperatures)
    for (const auto& p : top_ps)
      for (const auto& m : min_ps)
        for (const auto& k : top_ks)
          for (const auto& r : repetition)
            for (const auto& pen : penalties) {
              const OrderedJson body = chat({{"temperature", t},
                                             {"top_p", p},
                                             {"min_p", m},
                                             {"top_k", k},
                                             {"repetition_penalty", r},
                                             {"presence_penalty", pen},
                                             {"frequency_penalty", pen},
                                             {"logit_bias", {{"0", -100}, {"5", 100}}}});
              runtime::SamplingParams s;
              try {
                s = parse_chat_request(body).options.sampling;
              } catch (const ApiError& e) {
                EXPECT_EQ(e.status(), 400);
                continue;
              }
              ++accepted;
              EXPECT_NO_THROW(runtime::Sampler{s}) << body.dump();
            }
  EXPECT_GT(accepted, 0);
}

TEST(Auth, BearerKeyComparedWholly) {
  EXPECT_TRUE(constant_time_equals("secret", "secret"));
  EXPECT_FALSE(constant_time_equals("secret", "secreT"));
  EXPECT_FALSE(constant_time_equals("secret", "secret2"));
  EXPECT_FALSE(constant_time_equals("", "x"));
  EXPECT_FALSE(check_api_key("Bearer k1", "", "k1").has_value());
  EXPECT_EQ(check_api_key("", "", "k1")->code(), "missing_api_key");
  EXPECT_EQ(check_api_key("Bearer k2", "", "k1")->code(), "invalid_api_key");
  EXPECT_EQ(check_api_key("k1", "", "k1")->status(), 401);
  EXPECT_EQ(check_api_key("Bearer ", "", "k1")->status(), 401);
}

TEST(Auth, AnXApiKeyHeaderCarriesTheKeyToo) {
  EXPECT_FALSE(check_api_key("", "k1", "k1").has_value());
  EXPECT_FALSE(check_api_key("Bearer wrong", "k1", "k1").has_value());  // either header will do
  EXPECT_FALSE(check_api_key("Bearer k1", "wrong", "k1").has_value());
  EXPECT_EQ(check_api_key("", "k2", "k1")->code(), "invalid_api_key");
  EXPECT_EQ(check_api_key("", "Bearer k1", "k1")->code(), "invalid_api_key");  // no scheme here
  EXPECT_EQ(check_api_key("", "k", "k1")->status(), 401);
}

}  // namespace
}  // namespace strata::server
