// Validation of OpenAI request bodies. Messages follow OpenAI's limits and wording ("Invalid type
// for 'temperature': expected a number, but got a string instead."); the shape of messages is
// checked here, their normalisation for templates is the chat layer's job.
#include "server/openai_request.h"

#include <fmt/format.h>

#include <unordered_map>

#include "core/json_limits.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace strata::server {
namespace {

std::vector<std::string> parse_stop(const Fields& f) {
  const OrderedJson* v = f.get("stop");
  if (v == nullptr) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) wrong_type("stop", "a string or an array of strings", *v);
  check_length("stop", *v, kMaxStops);
  std::vector<std::string> stops;
  for (size_t i = 0; i < v->size(); ++i) {
    const OrderedJson& s = (*v)[i];
    if (!s.is_string()) wrong_type(fmt::format("stop[{}]", i), "a string", s);
    stops.push_back(s.get<std::string>());
  }
  return stops;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const Fields& f) {
  const OrderedJson* v = f.object("logit_bias");
  std::vector<std::pair<int32_t, float>> bias;
  if (v == nullptr) return bias;
  if (v->size() > kMaxLogitBias)
    throw ApiError(400,
                   fmt::format("Invalid 'logit_bias': too many entries. Expected at most {} token "
                               "ids, but got {} instead.",
                               kMaxLogitBias, v->size()),
                   "logit_bias", "object_above_max_size");
  bias.reserve(v->size());
  for (const auto& [key, value] : v->items()) {
    const std::string param = "logit_bias." + key;
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id > INT32_MAX)
      invalid_value("logit_bias", fmt::format("keys must be token ids, got '{}'.", key));
    if (!value.is_number()) wrong_type(param, "a number", value);
    const double b = value.get<double>();
    if (!(b >= -100 && b <= 100)) invalid_value(param, "a bias must be between -100 and 100.");
    bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  return bias;
}

// The strata extension's "speculative": a method name, or an object with the method, the drafts
// per verify step, self-speculation's drafting layers (fewer than the model's: the server checks
// that, knowing the model) and whether draft lengths adapt.
runtime::SpeculativeParams parse_speculative(const Fields& f) {
  runtime::SpeculativeParams p;
  const OrderedJson* v = f.get("speculative");
  if (v == nullptr || v->is_null()) return p;
  auto method = [&](const std::string& name, const std::string& param) {
    if (name != "ngram" && name != "draft" && name != "self" && name != "off")
      invalid_value(param,
                    "the speculative method is 'ngram', 'draft' (with the server's draft model), "
                    "'self' or 'off'.");
    p.method = runtime::parse_speculative_method(name);
  };
  if (v->is_string()) {
    method(v->get<std::string>(), f.param("speculative"));
    return p;
  }
  if (!v->is_object()) wrong_type(f.param("speculative"), "a string or an object", *v);
  const Fields s(*v, f.param("speculative"));
  if (auto name = s.string("method")) method(*name, s.param("method"));
  if (auto k = s.integer("draft_max", 1, 16)) p.draft_max = *k;
  if (auto layers = s.integer("layers", 1, 4096)) p.layers = *layers;
  p.adaptive = s.boolean("adaptive");
  return p;
}

// Fields both endpoints share; `default_model` is not needed here: the handler resolves names.
GenerationOptions parse_options(const Fields& f) {
  GenerationOptions o;
  if (auto model = f.string("model")) o.model = *model;
  o.max_tokens = f.integer("max_tokens", 0, INT32_MAX);
  if (auto m = f.integer("max_completion_tokens", 0, INT32_MAX)) o.max_tokens = m;
  runtime::SamplingParams& s = o.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 0, 2).value_or(1.0));
  s.top_p = static_cast<float>(f.number("top_p", 0, 1).value_or(1.0));
  runtime::normalize_greedy(s);  // a tiny temperature and top_p 0 mean greedy, as in vLLM
  const int64_t top_k = f.integer("top_k", -1, INT32_MAX).value_or(0);
  s.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);  // -1 means off (vLLM)
  s.min_p = static_cast<float>(f.number("min_p", 0, 1).value_or(0.0));
  s.presence_penalty = static_cast<float>(f.number("presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = static_cast<float>(f.number("frequency_penalty", -2, 2).value_or(0.0));
  s.repetition_penalty = static_cast<float>(f.number("repetition_penalty", 0.01, 10).value_or(1.0));
  s.logit_bias = parse_logit_bias(f);
  o.seed = f.integer("seed", INT64_MIN, INT64_MAX);
  if (o.seed) s.seed = static_cast<uint64_t>(*o.seed);
  // The sampler's own rule last: what passes here never fails in the engine.
  if (auto problem = runtime::find_sampling_problem(s))
    invalid_value(problem->field, problem->message + ".");
  o.stop = parse_stop(f);
  o.stream = f.boolean("stream").value_or(false);
  if (const OrderedJson* so = f.object("stream_options")) {
    if (!o.stream)
      invalid_value("stream_options", "stream_options is only allowed when 'stream' is true.");
    o.include_usage = Fields(*so, "stream_options").boolean("include_usage").value_or(false);
  }
  if (auto n = f.integer("n", 1, 128)) o.n = static_cast<int>(*n);
  if (auto user = f.string("user")) o.user = *user;
  o.ignore_eos = f.boolean("ignore_eos").value_or(false);
  o.cache_prompt = f.boolean("cache_prompt").value_or(true);
  o.speculative = parse_strata_speculative(f);
  return o;
}

// Tool-call arguments of only whitespace mean none, as text::chat::normalize_messages reads them.
bool blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

void check_tool_calls(const OrderedJson& calls, const std::string& param) {
  if (!calls.is_array()) wrong_type(param, "an array", calls);
  check_length(param, calls, kMaxToolCalls);
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    const OrderedJson& call = calls[i];
    if (!call.is_object()) wrong_type(p, "an object", call);
    const Fields f(call, p);
    f.string("id");
    if (auto type = f.string("type"); type && *type != "function")
      invalid_value(p + ".type", "only 'function' tool calls exist.");
    const OrderedJson* fn = f.object("function");
    if (fn == nullptr)
      bad_request(p + ".function", fmt::format("Missing required parameter: '{}.function'.", p));
    const Fields ff(*fn, p + ".function");
    if (!ff.string("name"))
      bad_request(ff.param("name"),
                  fmt::format("Missing required parameter: '{}'.", ff.param("name")));
    const OrderedJson* args = ff.get("arguments");
    if (args != nullptr && !args->is_string() && !args->is_object())
      wrong_type(ff.param("arguments"), "a string (JSON text) or an object", *args);
    // The template gets the object the text encodes (text::chat::normalize_messages parses it
    // again under the same limits; blank text means {}); refused here, the 400 names the field.
    if (args != nullptr && args->is_string() && !blank(args->get_ref<const std::string&>())) {
      const LimitedJson parsed = parse_limited_json(args->get_ref<const std::string&>());
      if (!parsed.ok())
        refuse_json(parsed, fmt::format("'{}'", ff.param("arguments")), ff.param("arguments"));
    }
  }
}

void check_content(const OrderedJson& message, const std::string& param, bool required) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    if (required) bad_request(param, fmt::format("Missing required parameter: '{}'.", param));
    return;
  }
  if (it->is_string()) return;
  if (!it->is_array()) wrong_type(param, "a string or an array of content parts", *it);
  check_length(param, *it, kMaxContentParts);
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    const OrderedJson& part = (*it)[i];
    if (!part.is_object()) wrong_type(p, "an object", part);
    const Fields f(part, p);
    const auto type = f.string("type");
    if (!type) bad_request(p + ".type", fmt::format("Missing required parameter: '{}.type'.", p));
    if (*type != "text")
      unsupported(
          p + ".type",
          fmt::format(
              "Content parts of type '{}' are not supported: strata serves text-only models.",
              *type));
    if (!f.string("text"))
      bad_request(p + ".text", fmt::format("Missing required parameter: '{}.text'.", p));
  }
}

OrderedJson parse_messages(const Fields& f) {
  const OrderedJson* messages = f.array("messages");
  if (messages == nullptr) bad_request("messages", "Missing required parameter: 'messages'.");
  if (messages->empty()) invalid_value("messages", "expected a non-empty array of messages.");
  check_length("messages", *messages, kMaxMessages);
  OrderedJson out = *messages;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string p = fmt::format("messages[{}]", i);
    OrderedJson& m = out[i];
    if (!m.is_object()) wrong_type(p, "an object", m);
    const Fields mf(m, p);
    const auto role = mf.string("role");
    if (!role) bad_request(p + ".role", fmt::format("Missing required parameter: '{}.role'.", p));
    if (*role == "developer") m["role"] = "system";  // OpenAI's newer name; templates know "system"
    const bool assistant = *role == "assistant";
    if (*role != "system" && *role != "developer" && *role != "user" && !assistant &&
        *role != "tool")
      invalid_value(
          p + ".role",
          fmt::format("'{}' is not one of system, developer, user, assistant, tool.", *role));
    if (assistant) {
      const OrderedJson* calls = mf.get("tool_calls");
      if (calls != nullptr) check_tool_calls(*calls, p + ".tool_calls");
      check_content(m, p + ".content", calls == nullptr || calls->empty());
      mf.string("reasoning_content");
      mf.string("reasoning");
    } else {
      check_content(m, p + ".content", true);
    }
    if (*role == "tool") mf.string("tool_call_id");
    mf.string("name");
  }
  return out;
}

OrderedJson parse_tools(const Fields& f) {
  const OrderedJson* tools = f.array("tools");
  if (tools == nullptr || tools->empty()) return nullptr;
  check_length("tools", *tools, kMaxTools);
  std::unordered_map<std::string, size_t> first_with_name;  // a hash, so n tools cost n lookups
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string p = fmt::format("tools[{}]", i);
    const OrderedJson& tool = (*tools)[i];
    if (!tool.is_object()) wrong_type(p, "an object", tool);
    const Fields tf(tool, p);
    const auto type = tf.string("type");
    if (type && *type != "function")
      unsupported(p + ".type",
                  fmt::format("Tools of type '{}' are not supported; use 'function'.", *type));
    const OrderedJson* fn = tf.object("function");
    if (fn == nullptr)
      bad_request(p + ".function", fmt::format("Missing required parameter: '{}.function'.", p));
    const Fields ff(*fn, p + ".function");
    const auto name = ff.string("name");
    if (!name || name->empty())
      bad_request(ff.param("name"),
                  fmt::format("Missing required parameter: '{}'.", ff.param("name")));
    // A call names its function; two of one name would make the call ambiguous.
    if (auto [it, added] = first_with_name.emplace(*name, i); !added)
      invalid_value(ff.param("name"),
                    fmt::format("'{}' is also the name of tools[{}]; tool names must be unique.",
                                *name, it->second));
    ff.string("description");
    ff.object("parameters");
    ff.boolean("strict");
  }
  return *tools;
}

void parse_tool_choice(const Fields& f, ChatCompletionRequest& r) {
  const OrderedJson* v = f.get("tool_choice");
  if (v == nullptr) return;
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "auto")
      r.tool_choice = ToolChoice::kAuto;
    else if (s == "none")
      r.tool_choice = ToolChoice::kNone;
    else if (s == "required")
      r.tool_choice = ToolChoice::kRequired;
    else
      invalid_value(
          "tool_choice",
          fmt::format("expected 'none', 'auto', 'required' or a named function, got '{}'.", s));
  } else if (v->is_object()) {
    const Fields cf(*v, "tool_choice");
    if (auto type = cf.string("type"); type && *type != "function")
      invalid_value("tool_choice.type", "only 'function' can be named.");
    const OrderedJson* fn = cf.object("function");
    const auto name =
        fn == nullptr ? std::nullopt : Fields(*fn, "tool_choice.function").string("name");
    if (!name)
      bad_request("tool_choice.function.name",
                  "Missing required parameter: 'tool_choice.function.name'.");
    r.tool_choice = ToolChoice::kNamed;
    r.tool_choice_name = *name;
  } else {
    wrong_type("tool_choice", "a string or an object", *v);
  }
  check_tool_choice(r, "'required' or a named function", "tool_choice");
}

// max_thinking_tokens, or its aliases thinking_budget and reasoning.max_tokens (the first given).
std::optional<int64_t> parse_thinking_budget(const Fields& f) {
  const auto budget = f.integer("max_thinking_tokens", 0, INT32_MAX);
  const auto alias = f.integer("thinking_budget", 0, INT32_MAX);
  std::optional<int64_t> reasoning_max;
  if (const OrderedJson* reasoning = f.object("reasoning"))
    reasoning_max = Fields(*reasoning, "reasoning").integer("max_tokens", 0, INT32_MAX);
  return budget ? budget : alias ? alias : reasoning_max;
}

// A JSON schema given in `param`: an object, or true / false.
const OrderedJson& checked_schema(const OrderedJson& schema, const std::string& param) {
  if (!schema.is_object() && !schema.is_boolean()) wrong_type(param, "an object", schema);
  return schema;
}

// The answer's shape: response_format, llama.cpp's json_schema (the schema itself) and grammar
// (GBNF text; "" means none, as in llama.cpp), or strata_grammar. One at most may constrain the
// answer (a response_format of type "text" does not); a second is a 400 naming it.
ResponseFormat parse_answer_shape(const Fields& f) {
  ResponseFormat shape;
  auto take = [&shape](ResponseFormat next) {
    if (shape.constrained() && next.constrained())
      invalid_value(next.param,
                    fmt::format("'{}' and '{}' both give the answer's shape; give only one.",
                                shape.param, next.param));
    if (!shape.constrained()) shape = std::move(next);
  };
  if (const OrderedJson* v = f.object("response_format"))
    take(parse_response_format(*v, "response_format"));
  if (const OrderedJson* v = f.get("json_schema")) {
    ResponseFormat r;
    r.type = "json_schema";
    r.schema = checked_schema(*v, "json_schema");
    r.param = "json_schema";
    take(std::move(r));
  }
  if (auto grammar = f.string("grammar"); grammar && !grammar->empty()) {
    ResponseFormat r;
    r.type = "gbnf";
    r.grammar = std::move(*grammar);
    r.param = "grammar";
    take(std::move(r));
  }
  if (const OrderedJson* v = f.object("strata_grammar"))
    take(parse_strata_grammar(*v, "strata_grammar"));
  return shape;
}

}  // namespace

runtime::SpeculativeParams parse_strata_speculative(const Fields& body) {
  if (const OrderedJson* ext = body.object("strata")) return parse_speculative(Fields(*ext, "strata"));
  return {};
}

void check_tool_choice(const ChatCompletionRequest& r, std::string_view choice, const std::string& name_param,
                       std::string_view tool) {
  if (r.tools.is_null() && (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kNamed))
    invalid_value("tool_choice", fmt::format("tool_choice {} needs 'tools'.", choice));
  if (r.tool_choice != ToolChoice::kNamed) return;
  for (const auto& t : r.tools)
    if (t["function"]["name"] == r.tool_choice_name) return;
  invalid_value(name_param, fmt::format("no {} named '{}' in 'tools'.", tool, r.tool_choice_name));
}

ResponseFormat parse_response_format(const OrderedJson& value, const std::string& param) {
  if (!value.is_object()) wrong_type(param, "an object", value);
  const Fields f(value, param);
  ResponseFormat r;
  r.param = param;
  const auto type = f.string("type");
  if (!type)
    bad_request(param + ".type", fmt::format("Missing required parameter: '{}.type'.", param));
  r.type = *type;
  if (r.type == "text") return r;
  if (r.type == "json_object") {
    // llama.cpp's server also takes a schema beside json_object: the answer then follows it, as a
    // json_schema's does.
    if (const OrderedJson* schema = f.get("schema")) {
      r.type = "json_schema";
      r.schema = checked_schema(*schema, param + ".schema");
    }
    return r;
  }
  if (r.type != "json_schema")
    invalid_value(param + ".type",
                  fmt::format("expected 'text', 'json_object' or 'json_schema', got '{}'.", r.type));
  // Chat nests the schema under json_schema; the Responses API puts it beside the type.
  const OrderedJson* nested = f.object("json_schema");
  const std::string at = nested != nullptr ? param + ".json_schema" : param;
  const Fields js(nested != nullptr ? *nested : value, at);
  if (auto name = js.string("name")) r.name = *name;
  r.strict = js.boolean("strict").value_or(false);
  const OrderedJson* schema = js.get("schema");
  if (schema == nullptr)
    bad_request(at + ".schema", fmt::format("Missing required parameter: '{}.schema'.", at));
  r.schema = checked_schema(*schema, at + ".schema");
  return r;
}

ResponseFormat parse_strata_grammar(const OrderedJson& value, const std::string& param) {
  if (!value.is_object()) wrong_type(param, "an object", value);
  const Fields f(value, param);
  const auto type = f.string("type").value_or("regex");
  if (type != "regex")
    invalid_value(param + ".type", fmt::format("expected 'regex', got '{}'.", type));
  const auto pattern = f.string("pattern");
  if (!pattern)
    bad_request(param + ".pattern", fmt::format("Missing required parameter: '{}.pattern'.", param));
  ResponseFormat r;
  r.param = param;
  r.type = "regex";
  r.pattern = *pattern;
  return r;
}

OrderedJson parse_body(std::string_view body) {
  LimitedJson parsed = parse_limited_json(body);
  if (!parsed.ok()) refuse_json(parsed, "The request body", "");
  OrderedJson j = std::move(parsed.value);
  if (!j.is_object())
    throw ApiError(
        400, fmt::format("The request body must be a JSON object, got {}.", json_type_name(j)), {},
        "invalid_json");
  return j;
}

ChatCompletionRequest parse_chat_request(const OrderedJson& body) {
  const Fields f(body, "");
  ChatCompletionRequest r;
  r.options = parse_options(f);
  r.messages = parse_messages(f);
  r.tools = parse_tools(f);
  parse_tool_choice(f, r);
  r.parallel_tool_calls = f.boolean("parallel_tool_calls").value_or(true);
  r.response_format = parse_answer_shape(f);
  const bool logprobs = f.boolean("logprobs").value_or(false);
  const auto top_logprobs = f.integer("top_logprobs", 0, 20);
  if (top_logprobs && !logprobs)
    invalid_value("top_logprobs", "top_logprobs is only allowed when 'logprobs' is true.");
  if (logprobs) r.options.logprobs = static_cast<int>(top_logprobs.value_or(0));
  r.max_thinking_tokens = parse_thinking_budget(f);
  if (const OrderedJson* kw = f.object("chat_template_kwargs")) r.chat_template_kwargs = *kw;
  if (auto effort = f.string("reasoning_effort")) {
    if (*effort != "none" && *effort != "minimal" && *effort != "low" && *effort != "medium" &&
        *effort != "high")
      invalid_value("reasoning_effort",
                    fmt::format("expected none, minimal, low, medium or high, got '{}'.", *effort));
    r.reasoning_effort = effort;
  }
  return r;
}

CompletionRequest parse_completion_request(const OrderedJson& body) {
  const Fields f(body, "");
  CompletionRequest r;
  r.options = parse_options(f);
  const OrderedJson* prompt = f.get("prompt");
  if (prompt == nullptr) bad_request("prompt", "Missing required parameter: 'prompt'.");
  auto token_ids = [](const OrderedJson& list, const std::string& param) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < list.size(); ++i) {
      const OrderedJson& id = list[i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        wrong_type(fmt::format("{}[{}]", param, i), "a token id (a non-negative integer)", id);
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    return ids;
  };
  if (prompt->is_string()) {
    r.prompt = prompt->get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    r.prompt = token_ids(*prompt, "prompt");
  } else if (prompt->is_array()) {
    if (prompt->size() != 1)
      unsupported("prompt",
                  "Only one prompt per request is supported; send several requests instead.");
    const OrderedJson& only = (*prompt)[0];
    if (only.is_string())
      r.prompt = only.get<std::string>();
    else if (only.is_array())
      r.prompt = token_ids(only, "prompt[0]");
    else
      wrong_type("prompt[0]", "a string or an array of token ids", only);
  } else {
    wrong_type("prompt", "a string, an array of strings or an array of token ids", *prompt);
  }
  r.echo = f.boolean("echo").value_or(false);
  if (auto best_of = f.integer("best_of", 1, 20); best_of && *best_of != 1)
    unsupported("best_of", "Only best_of=1 is supported.");
  if (auto suffix = f.string("suffix"); suffix && !suffix->empty())
    unsupported("suffix", "suffix (insertion) is not supported.");
  if (auto logprobs = f.integer("logprobs", 0, 5)) {
    if (r.echo)
      unsupported("logprobs",
                  "logprobs with echo are not supported: strata does not compute the "
                  "log-probabilities of prompt tokens.");
    r.options.logprobs = static_cast<int>(*logprobs);
  }
  r.response_format = parse_answer_shape(f);
  return r;
}

}  // namespace strata::server
