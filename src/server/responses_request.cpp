// Responses bodies checked and turned into chat requests. Input items are walked in order: the
// assistant's items of one turn (reasoning, a message, function calls) become one assistant
// message; user, system and tool items each their own.
#include "server/responses_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "server/api_error.h"
#include "server/request_fields.h"

namespace strata::server {
namespace {

// OpenAI's caps on metadata: 16 pairs, keys up to 64 characters, values up to 512.
constexpr size_t kMaxMetadata = 16;
constexpr size_t kMaxMetadataKey = 64;
constexpr size_t kMaxMetadataValue = 512;

std::string at(const std::string& list, size_t i) { return fmt::format("{}[{}]", list, i); }

OrderedJson or_null(const OrderedJson* v) { return v == nullptr ? OrderedJson(nullptr) : *v; }

// A part or item of a type strata does not take: images, files and audio need other models;
// OpenAI's hosted tools need its servers.
[[noreturn]] void unsupported_type(const std::string& param, const std::string& what,
                                   const std::string& type) {
  if (type.starts_with("input_image") || type.starts_with("input_file") ||
      type.starts_with("input_audio"))
    unsupported(param, fmt::format("{} of type '{}' are not supported: strata serves text-only "
                                   "models.",
                                   what, type));
  unsupported(param, fmt::format("{} of type '{}' are not supported: strata runs function tools "
                                 "only.",
                                 what, type));
}

std::string required_string(const Fields& f, const char* key) {
  const auto s = f.string(key);
  if (!s) missing_field(f.param(key));
  return *s;
}

// Content parts as chat text parts: input_text and output_text (and a refusal's text).
OrderedJson text_parts(const OrderedJson& parts, const std::string& param) {
  check_length(param, parts, kMaxContentParts);
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string p = at(param, i);
    const OrderedJson& part = parts[i];
    if (!part.is_object()) wrong_type(p, "an object", part);
    const Fields f(part, p);
    const std::string type = required_string(f, "type");
    if (type == "input_text" || type == "output_text")
      out.push_back({{"type", "text"}, {"text", required_string(f, "text")}});
    else if (type == "refusal")
      out.push_back({{"type", "text"}, {"text", required_string(f, "refusal")}});
    else
      unsupported_type(p + ".type", "Content parts", type);
  }
  return out;
}

// A message's content (a string or parts) as chat content: one part as its string, several as
// the list (templates join or keep them, as for chat requests).
OrderedJson content_of(const OrderedJson* content, const std::string& param) {
  if (content == nullptr) missing_field(param);
  if (content->is_string()) return *content;
  if (!content->is_array()) wrong_type(param, "a string or an array of content parts", *content);
  OrderedJson parts = text_parts(*content, param);
  if (parts.empty()) return "";
  if (parts.size() == 1) return parts[0]["text"];
  return parts;
}

std::string text_of(const OrderedJson& content) {
  return content.is_string() ? content.get<std::string>() : joined_text(content);
}

bool blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

// The conversation in chat form, built item by item.
class Conversation {
 public:
  void add(const OrderedJson& item, const std::string& p) {
    if (!item.is_object()) wrong_type(p, "an object", item);
    const Fields f(item, p);
    std::optional<std::string> type = f.string("type");
    if (!type && f.get("role") != nullptr) type = "message";  // an "easy" input message
    if (!type) missing_field(p + ".type");
    if (*type == "message")
      add_message(f, p);
    else if (*type == "function_call")
      add_call(f, p);
    else if (*type == "function_call_output")
      add_output(f, p);
    else if (*type == "reasoning")
      add_reasoning(f, p);
    else if (*type == "item_reference")
      unsupported(p + ".type",
                  "Items of type 'item_reference' are not supported: send the item itself, or "
                  "previous_response_id.");
    else
      unsupported_type(p + ".type", "Input items", *type);
  }

  // The messages, with instructions and every system or developer message joined, in order, as
  // one first system message: chat templates take a system message only first (agents send
  // developer messages later in a conversation too; the Messages route joins them alike).
  OrderedJson finish(const std::optional<std::string>& instructions) {
    flush();
    std::string system = instructions.value_or("");
    bool any_system = instructions.has_value();
    OrderedJson out = OrderedJson::array({nullptr});  // the system message's place
    for (OrderedJson& message : messages_) {
      if (message["role"] != "system") {
        out.push_back(std::move(message));
        continue;
      }
      const std::string text = message["content"].get<std::string>();
      if (!system.empty() && !text.empty()) system += "\n\n";
      system += text;
      any_system = true;
    }
    if (any_system)
      out[0] = {{"role", "system"}, {"content", std::move(system)}};
    else
      out.erase(out.begin());
    return out;
  }

 private:
  void add_message(const Fields& f, const std::string& p) {
    const std::string role = required_string(f, "role");
    OrderedJson content = content_of(f.get("content"), p + ".content");
    f.string("id");
    f.string("status");
    if (role == "assistant") {
      if (assistant_ && (has_content() || assistant_->contains("tool_calls"))) flush();
      assistant()["content"] = text_of(content);
      return;
    }
    flush();
    if (role == "user")
      messages_.push_back({{"role", "user"}, {"content", std::move(content)}});
    else if (role == "system" || role == "developer")
      messages_.push_back({{"role", "system"}, {"content", text_of(content)}});
    else
      invalid_value(p + ".role",
                    fmt::format("expected 'user', 'assistant', 'system' or 'developer', got "
                                "'{}'.",
                                role));
  }

  void add_call(const Fields& f, const std::string& p) {
    const std::string call_id = required_string(f, "call_id");
    const std::string name = required_string(f, "name");
    if (name.empty()) invalid_value(p + ".name", "a function call names its function.");
    const std::string arguments = required_string(f, "arguments");
    // The template gets the object the text encodes (text::chat::normalize_messages parses it
    // again under the same limits; blank text means {}); refused here, the 400 names the field.
    if (!blank(arguments)) {
      const LimitedJson parsed = parse_limited_json(arguments);
      if (!parsed.ok()) refuse_json(parsed, fmt::format("'{}.arguments'", p), p + ".arguments");
    }
    f.string("id");
    f.string("status");
    OrderedJson& message = assistant();
    OrderedJson& calls = message["tool_calls"];
    if (calls.is_null()) calls = OrderedJson::array();
    if (calls.size() == kMaxToolCalls)
      invalid_value(p, fmt::format("at most {} function calls a turn.", kMaxToolCalls));
    calls.push_back({{"id", call_id},
                     {"type", "function"},
                     {"function", {{"name", name}, {"arguments", arguments}}}});
    call_names_[call_id] = name;
  }

  void add_output(const Fields& f, const std::string& p) {
    const std::string call_id = required_string(f, "call_id");
    const OrderedJson* output = f.get("output");
    if (output == nullptr) missing_field(p + ".output");
    std::string text;
    if (output->is_string())
      text = output->get<std::string>();
    else if (output->is_array())
      text = joined_text(text_parts(*output, p + ".output"));
    else
      wrong_type(p + ".output", "a string or an array of content parts", *output);
    f.string("id");
    f.string("status");
    flush();
    OrderedJson message = {{"role", "tool"}, {"tool_call_id", call_id}, {"content", text}};
    if (auto name = call_names_.find(call_id); name != call_names_.end())
      message["name"] = name->second;
    messages_.push_back(std::move(message));
  }

  // The text of a list of {type, text} parts of one type.
  static std::string part_texts(const Fields& f, const char* key, const char* part_type) {
    const OrderedJson* parts = f.array(key);
    if (parts == nullptr) return {};
    const std::string param = f.param(key);
    check_length(param, *parts, kMaxContentParts);
    std::string text;
    for (size_t i = 0; i < parts->size(); ++i) {
      const std::string p = at(param, i);
      const OrderedJson& part = (*parts)[i];
      if (!part.is_object()) wrong_type(p, "an object", part);
      const Fields pf(part, p);
      const std::string type = required_string(pf, "type");
      if (type != part_type)
        invalid_value(p + ".type", fmt::format("expected '{}', got '{}'.", part_type, type));
      if (!text.empty()) text += "\n";
      text += required_string(pf, "text");
    }
    return text;
  }

  // The reasoning text (its content, which is what a model thought, else its summary) opens the
  // next assistant message.
  void add_reasoning(const Fields& f, const std::string&) {
    const std::string summary = part_texts(f, "summary", "summary_text");
    const std::string content = part_texts(f, "content", "reasoning_text");
    f.string("id");
    f.string("encrypted_content");  // another server's: strata cannot read it
    f.string("status");
    const std::string& text = content.empty() ? summary : content;
    if (assistant_ && (has_content() || assistant_->contains("tool_calls"))) flush();
    if (text.empty()) return;
    OrderedJson& message = assistant();
    std::string reasoning = message.value("reasoning_content", "");
    if (!reasoning.empty()) reasoning += "\n";
    message["reasoning_content"] = reasoning + text;
  }

  bool has_content() const {
    auto it = assistant_->find("content");
    return it != assistant_->end() && !it->get<std::string>().empty();
  }

  OrderedJson& assistant() {
    if (!assistant_) assistant_ = OrderedJson{{"role", "assistant"}, {"content", ""}};
    return *assistant_;
  }

  void flush() {
    if (!assistant_) return;
    messages_.push_back(std::move(*assistant_));
    assistant_.reset();
  }

  OrderedJson messages_ = OrderedJson::array();
  std::optional<OrderedJson> assistant_;  // the assistant's turn being gathered
  std::unordered_map<std::string, std::string> call_names_;
};

// The input as items: a string as one user message.
OrderedJson input_items(const Fields& f) {
  const OrderedJson* input = f.get("input");
  if (input == nullptr) return OrderedJson::array();
  if (input->is_string())
    return OrderedJson::array(
        {{{"type", "message"}, {"role", "user"}, {"content", input->get<std::string>()}}});
  if (!input->is_array()) wrong_type("input", "a string or an array of input items", *input);
  check_length("input", *input, kMaxMessages);
  return *input;
}

// Function tools in chat's shape, and every tool as the response repeats them; tools of other
// types are left out of the prompt.
void parse_tools(const Fields& f, ResponsesRequest& r) {
  OrderedJson echo = OrderedJson::array();
  const OrderedJson* tools = f.array("tools");
  if (tools != nullptr && !tools->empty()) {
    check_length("tools", *tools, kMaxTools);
    OrderedJson chat = OrderedJson::array();
    std::unordered_map<std::string, size_t> first_with_name;
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string p = at("tools", i);
      const OrderedJson& tool = (*tools)[i];
      if (!tool.is_object()) wrong_type(p, "an object", tool);
      const Fields tf(tool, p);
      const std::string type = required_string(tf, "type");
      if (type != "function") {
        // Hosted tools (web_search, file_search, ...), namespaces and custom tools: nothing here
        // runs them, so the model is not shown them; the response repeats them as given. (Codex
        // CLI offers a web search and a namespace beside its function tools.)
        echo.push_back(tool);
        continue;
      }
      const std::string name = required_string(tf, "name");
      if (name.empty()) invalid_value(p + ".name", "a tool needs a name.");
      if (auto [it, added] = first_with_name.emplace(name, i); !added)
        invalid_value(p + ".name",
                      fmt::format("'{}' is also the name of tools[{}]; tool names must be unique.",
                                  name, it->second));
      const auto description = tf.string("description");
      const OrderedJson* parameters = tf.object("parameters");
      const auto strict = tf.boolean("strict");
      // strict is a promise about decoding, not part of what the model is shown: the template
      // gets the function as the chat route's clients describe it.
      OrderedJson function = {{"name", name}};
      if (description) function["description"] = *description;
      if (parameters != nullptr) function["parameters"] = *parameters;
      chat.push_back({{"type", "function"}, {"function", std::move(function)}});
      echo.push_back({{"type", "function"},
                      {"name", name},
                      {"description", description ? OrderedJson(*description) : nullptr},
                      {"parameters", or_null(parameters)},
                      {"strict", strict ? OrderedJson(*strict) : nullptr}});
    }
    r.chat.tools = std::move(chat);
  }
  r.settings["tools"] = std::move(echo);
}

void parse_tool_choice(const Fields& f, ResponsesRequest& r) {
  ChatCompletionRequest& c = r.chat;
  const OrderedJson* v = f.get("tool_choice");
  r.settings["tool_choice"] = v == nullptr ? OrderedJson("auto") : *v;
  if (v == nullptr) return;
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "auto")
      c.tool_choice = ToolChoice::kAuto;
    else if (s == "none")
      c.tool_choice = ToolChoice::kNone;
    else if (s == "required")
      c.tool_choice = ToolChoice::kRequired;
    else
      invalid_value("tool_choice",
                    fmt::format("expected 'none', 'auto', 'required' or a function, got '{}'.", s));
  } else if (v->is_object()) {
    const Fields cf(*v, "tool_choice");
    const std::string type = required_string(cf, "type");
    if (type != "function")
      unsupported("tool_choice.type",
                  fmt::format("tool_choice of type '{}' is not supported; name a function.", type));
    c.tool_choice = ToolChoice::kNamed;
    c.tool_choice_name = required_string(cf, "name");
  } else {
    wrong_type("tool_choice", "a string or an object", *v);
  }
  check_tool_choice(c, "'required' or a named function", "tool_choice.name", "function");
}

// reasoning.effort onto thinking: none and minimal off; low, medium and high on with a quarter,
// half or all of the server's thinking budget (xhigh and max: all of it too).
void parse_reasoning(const Fields& f, int64_t server_budget, ResponsesRequest& r) {
  OrderedJson echo = {{"effort", nullptr}, {"summary", nullptr}};
  if (const OrderedJson* reasoning = f.object("reasoning")) {
    const Fields rf(*reasoning, "reasoning");
    for (const char* key : {"summary", "generate_summary"})
      if (auto summary = rf.string(key)) {
        if (*summary != "auto" && *summary != "concise" && *summary != "detailed")
          invalid_value(rf.param(key), fmt::format("expected 'auto', 'concise' or 'detailed', "
                                                   "got '{}'.",
                                                   *summary));
        echo["summary"] = *summary;
      }
    if (auto effort = rf.string("effort")) {
      ChatCompletionRequest& c = r.chat;
      int64_t budget = 0;  // 0: thinking off
      if (*effort == "low")
        budget = server_budget / 4;
      else if (*effort == "medium")
        budget = server_budget / 2;
      else if (*effort == "high" || *effort == "xhigh" || *effort == "max")
        budget = server_budget;
      else if (*effort != "none" && *effort != "minimal")
        invalid_value("reasoning.effort",
                      fmt::format("expected none, minimal, low, medium, high, xhigh or max, got "
                                  "'{}'.",
                                  *effort));
      const bool on = *effort != "none" && *effort != "minimal";
      c.chat_template_kwargs["enable_thinking"] = on;
      if (on) {
        c.max_thinking_tokens = std::max<int64_t>(budget, 1);
        // Templates that read an effort (gpt-oss) know low, medium and high.
        c.reasoning_effort = *effort == "low" || *effort == "medium" ? *effort : "high";
      }
      echo["effort"] = *effort;
    }
  }
  r.settings["reasoning"] = std::move(echo);
}

// text.format, checked by chat's own code (which reads its flat shape); verbosity is a hint strata
// accepts and repeats.
void parse_text(const Fields& f, ResponsesRequest& r) {
  OrderedJson echo = {{"format", {{"type", "text"}}}};
  if (const OrderedJson* text = f.object("text")) {
    const Fields tf(*text, "text");
    if (const OrderedJson* format = tf.object("format")) {
      // parse_response_format reads the flat shape too (the schema beside the type).
      r.chat.response_format = parse_response_format(*format, "text.format");
      echo["format"] = *format;
    }
    if (auto verbosity = tf.string("verbosity")) {
      if (*verbosity != "low" && *verbosity != "medium" && *verbosity != "high")
        invalid_value("text.verbosity",
                      fmt::format("expected 'low', 'medium' or 'high', got '{}'.", *verbosity));
      echo["verbosity"] = *verbosity;
    }
  }
  r.settings["text"] = std::move(echo);
}

OrderedJson parse_metadata(const Fields& f) {
  const OrderedJson* metadata = f.object("metadata");
  if (metadata == nullptr) return OrderedJson::object();
  if (metadata->size() > kMaxMetadata)
    invalid_value("metadata", fmt::format("at most {} key-value pairs.", kMaxMetadata));
  for (const auto& [key, value] : metadata->items()) {
    const std::string p = "metadata." + key;
    if (key.size() > kMaxMetadataKey)
      invalid_value("metadata", fmt::format("keys are at most {} characters.", kMaxMetadataKey));
    if (!value.is_string()) wrong_type(p, "a string", value);
    if (value.get_ref<const std::string&>().size() > kMaxMetadataValue)
      invalid_value(p, fmt::format("values are at most {} characters.", kMaxMetadataValue));
  }
  return *metadata;
}

GenerationOptions parse_options(const Fields& f) {
  GenerationOptions o;
  if (auto model = f.string("model")) o.model = *model;
  o.max_tokens = f.integer("max_output_tokens", 1, INT32_MAX);
  runtime::SamplingParams& s = o.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 0, 2).value_or(1.0));
  s.top_p = static_cast<float>(f.number("top_p", 0, 1).value_or(1.0));
  runtime::normalize_greedy(s);
  if (auto problem = runtime::find_sampling_problem(s))
    invalid_value(problem->field, problem->message + ".");
  o.stream = f.boolean("stream").value_or(false);
  if (const OrderedJson* so = f.object("stream_options")) {
    if (!o.stream)
      invalid_value("stream_options", "stream_options is only allowed when 'stream' is true.");
    Fields(*so, "stream_options").boolean("include_obfuscation");  // nothing to obfuscate
  }
  if (auto user = f.string("user")) o.user = *user;
  o.speculative = parse_strata_speculative(f);
  return o;
}

// Fields OpenAI defines that strata does not honour: a 400 when they ask for something.
void refuse_unsupported(const Fields& f) {
  if (f.boolean("background").value_or(false))
    unsupported("background", "Background responses are not supported; use stream instead.");
  if (f.get("conversation") != nullptr)
    unsupported("conversation",
                "Conversations are not supported; continue a response with previous_response_id.");
  if (f.get("prompt") != nullptr)
    unsupported("prompt", "Prompt templates are not supported; send instructions and input.");
  if (f.integer("max_tool_calls", 1, INT32_MAX))
    unsupported("max_tool_calls",
                "max_tool_calls is not supported; parallel_tool_calls: false "
                "allows one call a turn.");
  if (f.integer("top_logprobs", 0, 20).value_or(0) > 0)
    unsupported("top_logprobs",
                "top_logprobs is not supported on /v1/responses yet; use "
                "/v1/chat/completions for log-probabilities.");
  if (const OrderedJson* include = f.array("include"))
    for (size_t i = 0; i < include->size(); ++i)
      if (!(*include)[i].is_string()) wrong_type(at("include", i), "a string", (*include)[i]);
  if (auto truncation = f.string("truncation");
      truncation && *truncation != "auto" && *truncation != "disabled")
    invalid_value("truncation",
                  fmt::format("expected 'auto' or 'disabled', got '{}'.", *truncation));
  f.string("safety_identifier");
  f.string("prompt_cache_key");  // the prefix cache needs no key
  f.string("prompt_cache_retention");
  f.string("service_tier");
}

}  // namespace

ResponsesRequest parse_responses_request(const OrderedJson& body, int64_t server_thinking_budget,
                                         const ConversationLookup& previous) {
  const Fields f(body, "");
  ResponsesRequest r;
  ChatCompletionRequest& c = r.chat;
  c.options = parse_options(f);
  c.max_tokens_caps_all_output = true;  // max_output_tokens counts reasoning tokens too
  refuse_unsupported(f);
  r.store = f.boolean("store").value_or(true);
  const auto instructions = f.string("instructions");

  OrderedJson input = input_items(f);
  Conversation conversation;
  if (auto id = f.string("previous_response_id")) {
    r.previous_response_id = *id;
    std::optional<OrderedJson> before = previous ? previous(*id) : std::nullopt;
    if (!before)
      throw ApiError(404, fmt::format("Previous response with id '{}' not found.", *id),
                     "previous_response_id", "previous_response_not_found");
    for (const OrderedJson& item : *before) conversation.add(item, "previous_response_id");
    r.conversation = std::move(*before);
  } else if (f.get("input") == nullptr) {
    missing_field("input");
  } else if (input.empty()) {
    invalid_value("input", "expected a string or at least one input item.");
  }
  for (size_t i = 0; i < input.size(); ++i) conversation.add(input[i], at("input", i));
  for (OrderedJson& item : input) r.conversation.push_back(std::move(item));
  c.messages = conversation.finish(instructions);

  parse_tools(f, r);
  parse_tool_choice(f, r);
  c.parallel_tool_calls = f.boolean("parallel_tool_calls").value_or(true);
  parse_reasoning(f, server_thinking_budget, r);
  parse_text(f, r);

  // What the response repeats, in the order OpenAI's response object lists it.
  OrderedJson s = OrderedJson::object();
  s["instructions"] = instructions ? OrderedJson(*instructions) : nullptr;
  s["max_output_tokens"] = c.options.max_tokens ? OrderedJson(*c.options.max_tokens) : nullptr;
  s["parallel_tool_calls"] = c.parallel_tool_calls;
  s["previous_response_id"] =
      r.previous_response_id.empty() ? OrderedJson(nullptr) : OrderedJson(r.previous_response_id);
  s["reasoning"] = r.settings["reasoning"];
  s["store"] = r.store;
  s["temperature"] = f.number("temperature", 0, 2).value_or(1.0);
  s["text"] = r.settings["text"];
  s["tool_choice"] = r.settings["tool_choice"];
  s["tools"] = r.settings["tools"];
  s["top_p"] = f.number("top_p", 0, 1).value_or(1.0);
  s["truncation"] = f.string("truncation").value_or("disabled");
  s["user"] = c.options.user.empty() ? OrderedJson(nullptr) : OrderedJson(c.options.user);
  s["metadata"] = parse_metadata(f);
  r.settings = std::move(s);
  return r;
}

}  // namespace strata::server
