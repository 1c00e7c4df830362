// Anthropic Messages bodies checked and turned into chat requests. Content blocks are walked in
// order: a user message's text runs and tool results become user and tool messages in the order
// they came; an assistant message's blocks become one message (content, reasoning, tool calls).
#include "server/anthropic_request.h"

#include <fmt/format.h>

#include <unordered_map>

#include "server/api_error.h"
#include "server/request_fields.h"

namespace strata::server {
namespace {

std::string at(const std::string& list, size_t i) { return fmt::format("{}.{}", list, i); }

// A block of a type strata does not take: images and documents need a vision model; Anthropic's
// server-side tool blocks need its servers.
[[noreturn]] void unsupported_block(const std::string& param, const std::string& type) {
  if (type == "image" || type == "document")
    unsupported(param, fmt::format("Content blocks of type '{}' are not supported: strata serves "
                                   "text-only models.",
                                   type));
  unsupported(param, fmt::format("Content blocks of type '{}' are not supported here.", type));
}

// A content block's type; 400 when the block is not an object with one.
std::string block_type(const OrderedJson& block, const std::string& param) {
  if (!block.is_object()) wrong_type(param, "an object", block);
  const auto type = Fields(block, param).string("type");
  if (!type) missing_field(param + ".type");
  return *type;
}

// A list of text blocks (system, a tool result's content) as chat text parts.
OrderedJson text_parts(const OrderedJson& blocks, const std::string& param) {
  check_length(param, blocks, kMaxContentParts);
  OrderedJson parts = OrderedJson::array();
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string p = at(param, i);
    const std::string type = block_type(blocks[i], p);
    if (type != "text") unsupported_block(p + ".type", type);
    const auto text = Fields(blocks[i], p).string("text");
    if (!text) missing_field(p + ".text");
    parts.push_back({{"type", "text"}, {"text", *text}});
  }
  return parts;
}

// Chat content for text parts: one part as its string (what templates handle best), several as
// the list (joined or kept by the template, as for chat requests).
OrderedJson content_of(OrderedJson parts) {
  if (parts.empty()) return "";
  if (parts.size() == 1) return parts[0]["text"];
  return parts;
}

// The messages in chat form, and the names of the tool calls seen so far (a tool message carries
// its call's name, which some templates print).
struct Conversation {
  OrderedJson messages = OrderedJson::array();
  std::unordered_map<std::string, std::string> call_names;
};

void add_system(const Fields& f, Conversation& out) {
  const OrderedJson* system = f.get("system");
  if (system == nullptr) return;
  OrderedJson content;
  if (system->is_string()) {
    if (system->get_ref<const std::string&>().empty()) return;
    content = *system;
  } else if (system->is_array()) {
    OrderedJson parts = text_parts(*system, "system");
    if (parts.empty()) return;
    content = content_of(std::move(parts));
  } else {
    wrong_type("system", "a string or an array of text blocks", *system);
  }
  out.messages.push_back({{"role", "system"}, {"content", std::move(content)}});
}

// A system message among the messages (Claude Code sends its reminders so): chat templates take a
// system message only first, so its text joins the system prompt there, after what is already in
// it.
void add_late_system(const OrderedJson& blocks, const std::string& param, Conversation& out) {
  const std::string text = joined_text(text_parts(blocks, param));
  if (text.empty()) return;
  OrderedJson& messages = out.messages;
  if (messages.empty() || messages[0]["role"] != "system") {
    messages.insert(messages.begin(), OrderedJson{{"role", "system"}, {"content", text}});
    return;
  }
  OrderedJson& content = messages[0]["content"];
  const std::string before = content.is_string() ? content.get<std::string>() : joined_text(content);
  content = before + "\n\n" + text;
}

// A tool_result block as a tool message.
OrderedJson tool_message(const OrderedJson& block, const std::string& p, const Conversation& conv) {
  const Fields f(block, p);
  const auto id = f.string("tool_use_id");
  if (!id) missing_field(p + ".tool_use_id");
  std::string text;
  if (const OrderedJson* content = f.get("content")) {
    if (content->is_string())
      text = content->get<std::string>();
    else if (content->is_array())
      text = joined_text(text_parts(*content, p + ".content"));
    else
      wrong_type(p + ".content", "a string or an array of text blocks", *content);
  }
  if (f.boolean("is_error").value_or(false)) text = "Error: " + text;
  OrderedJson message = {{"role", "tool"}, {"tool_call_id", *id}, {"content", std::move(text)}};
  if (auto name = conv.call_names.find(*id); name != conv.call_names.end())
    message["name"] = name->second;
  return message;
}

// A user message's blocks: each run of text blocks a user message, each tool result a tool
// message, in their order.
void add_user(const OrderedJson& blocks, const std::string& param, Conversation& out) {
  OrderedJson text = OrderedJson::array();
  auto flush = [&] {
    if (text.empty()) return;
    out.messages.push_back({{"role", "user"}, {"content", content_of(std::move(text))}});
    text = OrderedJson::array();
  };
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string p = at(param, i);
    const OrderedJson& block = blocks[i];
    const std::string type = block_type(block, p);
    if (type == "text") {
      const auto t = Fields(block, p).string("text");
      if (!t) missing_field(p + ".text");
      text.push_back({{"type", "text"}, {"text", *t}});
    } else if (type == "tool_result") {
      flush();
      out.messages.push_back(tool_message(block, p, out));
    } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
      invalid_value(p + ".type", fmt::format("'{}' blocks belong in assistant messages.", type));
    } else {
      unsupported_block(p + ".type", type);
    }
  }
  flush();
}

// An assistant message's blocks as one message: text as content, thinking as reasoning_content,
// tool_use blocks as tool_calls.
void add_assistant(const OrderedJson& blocks, const std::string& param, Conversation& out) {
  OrderedJson text = OrderedJson::array();
  OrderedJson calls = OrderedJson::array();
  std::string reasoning;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string p = at(param, i);
    const OrderedJson& block = blocks[i];
    const std::string type = block_type(block, p);
    const Fields f(block, p);
    if (type == "text") {
      const auto t = f.string("text");
      if (!t) missing_field(p + ".text");
      text.push_back({{"type", "text"}, {"text", *t}});
    } else if (type == "thinking") {
      const auto thinking = f.string("thinking");
      if (!thinking) missing_field(p + ".thinking");
      f.string("signature");  // a string when given; strata's own, or another's: not checked
      if (!reasoning.empty()) reasoning += "\n";
      reasoning += *thinking;
    } else if (type == "redacted_thinking") {
      continue;  // encrypted thinking of another model: nothing to render
    } else if (type == "tool_use") {
      const auto id = f.string("id");
      if (!id) missing_field(p + ".id");
      const auto name = f.string("name");
      if (!name || name->empty()) missing_field(p + ".name");
      const OrderedJson* input = f.object("input");
      if (input == nullptr) missing_field(p + ".input");
      if (calls.size() == kMaxToolCalls)
        invalid_value(param, fmt::format("at most {} tool_use blocks a message.", kMaxToolCalls));
      calls.push_back({{"id", *id},
                       {"type", "function"},
                       {"function", {{"name", *name}, {"arguments", *input}}}});
      out.call_names[*id] = *name;
    } else if (type == "tool_result") {
      invalid_value(p + ".type", "'tool_result' blocks belong in user messages.");
    } else {
      unsupported_block(p + ".type", type);
    }
  }
  OrderedJson message = {{"role", "assistant"}, {"content", content_of(std::move(text))}};
  if (!reasoning.empty()) message["reasoning_content"] = std::move(reasoning);
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  out.messages.push_back(std::move(message));
}

void add_messages(const Fields& f, Conversation& out) {
  const OrderedJson* messages = f.array("messages");
  if (messages == nullptr) missing_field("messages");
  if (messages->empty()) invalid_value("messages", "at least one message is required.");
  check_length("messages", *messages, kMaxMessages);
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string p = at("messages", i);
    const OrderedJson& m = (*messages)[i];
    if (!m.is_object()) wrong_type(p, "an object", m);
    const Fields mf(m, p);
    const auto role = mf.string("role");
    if (!role) missing_field(p + ".role");
    if (*role != "user" && *role != "assistant" && *role != "system")
      invalid_value(p + ".role", fmt::format("expected 'user', 'assistant' or 'system', got '{}'.", *role));
    const OrderedJson* content = mf.get("content");
    if (content == nullptr) missing_field(p + ".content");
    if (!content->is_string() && !content->is_array())
      wrong_type(p + ".content", "a string or an array of content blocks", *content);
    if (content->is_array()) check_length(p + ".content", *content, kMaxContentParts);
    const OrderedJson blocks = content->is_string()
                                   ? OrderedJson::array({{{"type", "text"}, {"text", *content}}})
                                   : *content;
    if (*role == "user")
      add_user(blocks, p + ".content", out);
    else if (*role == "assistant")
      add_assistant(blocks, p + ".content", out);
    else
      add_late_system(blocks, p + ".content", out);
  }
  if (messages->back().value("role", "") == "assistant")
    unsupported("messages",
                "A final assistant message (a prefill for the answer to continue) is not "
                "supported; end the messages with a user message.");
}

// Custom tools as chat function tools; Anthropic's own tool types are refused.
OrderedJson parse_tools(const Fields& f) {
  const OrderedJson* tools = f.array("tools");
  if (tools == nullptr || tools->empty()) return nullptr;
  check_length("tools", *tools, kMaxTools);
  OrderedJson out = OrderedJson::array();
  std::unordered_map<std::string, size_t> first_with_name;
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string p = at("tools", i);
    const OrderedJson& tool = (*tools)[i];
    if (!tool.is_object()) wrong_type(p, "an object", tool);
    const Fields tf(tool, p);
    if (auto type = tf.string("type"); type && *type != "custom")
      unsupported(p + ".type",
                  fmt::format("Tools of type '{}' are not supported; give a custom tool (a name, "
                              "a description and an input_schema).",
                              *type));
    const auto name = tf.string("name");
    if (!name || name->empty()) missing_field(p + ".name");
    if (auto [it, added] = first_with_name.emplace(*name, i); !added)
      invalid_value(p + ".name",
                    fmt::format("'{}' is also the name of tools.{}; tool names must be unique.",
                                *name, it->second));
    const OrderedJson* schema = tf.object("input_schema");
    if (schema == nullptr) missing_field(p + ".input_schema");
    OrderedJson function = {{"name", *name}};
    if (auto description = tf.string("description")) function["description"] = *description;
    function["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

void parse_tool_choice(const Fields& f, ChatCompletionRequest& r) {
  const OrderedJson* choice = f.object("tool_choice");
  if (choice == nullptr) return;
  const Fields cf(*choice, "tool_choice");
  const auto type = cf.string("type");
  if (!type) missing_field("tool_choice.type");
  if (*type == "auto") {
    r.tool_choice = ToolChoice::kAuto;
  } else if (*type == "any") {
    r.tool_choice = ToolChoice::kRequired;
  } else if (*type == "none") {
    r.tool_choice = ToolChoice::kNone;
  } else if (*type == "tool") {
    const auto name = cf.string("name");
    if (!name) missing_field("tool_choice.name");
    r.tool_choice = ToolChoice::kNamed;
    r.tool_choice_name = *name;
  } else {
    invalid_value("tool_choice.type",
                  fmt::format("expected 'auto', 'any', 'tool' or 'none', got '{}'.", *type));
  }
  if (cf.boolean("disable_parallel_tool_use").value_or(false)) r.parallel_tool_calls = false;
  check_tool_choice(r, fmt::format("'{}'", *type), "tool_choice.name");
}

// thinking: {type: "enabled", budget_tokens} turns thinking on with that budget (of all output
// tokens, which max_tokens caps, so it must leave room below max_tokens); "disabled" off;
// "adaptive" and "between_tools" on with the server's budget (the model decides how much to
// think). `display` is not honoured: thinking is always returned.
void parse_thinking(const Fields& f, MessagesRoute route, ChatCompletionRequest& r) {
  const OrderedJson* thinking = f.object("thinking");
  if (thinking == nullptr) return;
  const Fields tf(*thinking, "thinking");
  const auto type = tf.string("type");
  if (!type) missing_field("thinking.type");
  if (*type == "enabled") {
    const auto budget = tf.integer("budget_tokens", 1, INT32_MAX);
    if (!budget) missing_field("thinking.budget_tokens");
    if (route == MessagesRoute::kCreate && r.options.max_tokens && *budget >= *r.options.max_tokens)
      invalid_value("thinking.budget_tokens",
                    fmt::format("budget_tokens ({}) must be less than max_tokens ({}).", *budget,
                                *r.options.max_tokens));
    r.chat_template_kwargs["enable_thinking"] = true;
    r.max_thinking_tokens = *budget;
  } else if (*type == "adaptive" || *type == "between_tools") {
    r.chat_template_kwargs["enable_thinking"] = true;
  } else if (*type == "disabled") {
    r.chat_template_kwargs["enable_thinking"] = false;
  } else {
    invalid_value(
        "thinking.type",
        fmt::format("expected 'enabled', 'disabled', 'adaptive' or 'between_tools', got '{}'.",
                    *type));
  }
}

std::vector<std::string> parse_stop_sequences(const Fields& f) {
  const OrderedJson* v = f.array("stop_sequences");
  if (v == nullptr) return {};
  check_length("stop_sequences", *v, kMaxStops);
  std::vector<std::string> stops;
  for (size_t i = 0; i < v->size(); ++i) {
    const OrderedJson& s = (*v)[i];
    if (!s.is_string()) wrong_type(at("stop_sequences", i), "a string", s);
    stops.push_back(s.get<std::string>());
  }
  return stops;
}

GenerationOptions parse_options(const Fields& f, MessagesRoute route) {
  GenerationOptions o;
  const auto model = f.string("model");
  if (!model) missing_field("model");
  o.model = *model;
  if (route == MessagesRoute::kCreate) {
    o.max_tokens = f.integer("max_tokens", 1, INT32_MAX);
    if (!o.max_tokens) missing_field("max_tokens");
    o.stream = f.boolean("stream").value_or(false);
  }
  runtime::SamplingParams& s = o.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 0, 1).value_or(1.0));
  s.top_p = static_cast<float>(f.number("top_p", 0, 1).value_or(1.0));
  s.top_k = static_cast<int>(f.integer("top_k", 0, INT32_MAX).value_or(0));
  runtime::normalize_greedy(s);
  if (auto problem = runtime::find_sampling_problem(s))
    invalid_value(problem->field, problem->message + ".");
  o.stop = parse_stop_sequences(f);
  if (const OrderedJson* metadata = f.object("metadata"))
    if (auto user = Fields(*metadata, "metadata").string("user_id")) o.user = *user;
  o.speculative = parse_strata_speculative(f);
  return o;
}

}  // namespace

ChatCompletionRequest parse_messages_request(const OrderedJson& body, MessagesRoute route) {
  const Fields f(body, "");
  ChatCompletionRequest r;
  r.options = parse_options(f, route);
  r.max_tokens_caps_all_output = true;
  Conversation conversation;
  add_system(f, conversation);
  add_messages(f, conversation);
  r.messages = std::move(conversation.messages);
  r.tools = parse_tools(f);
  parse_tool_choice(f, r);
  parse_thinking(f, route, r);
  // Anthropic's structured outputs: output_format {"type": "json_schema", "schema"} (the schema
  // beside the type, which parse_response_format reads), constraining the answer as chat's
  // response_format does.
  if (const OrderedJson* format = f.object("output_format"))
    r.response_format = parse_response_format(*format, "output_format");
  return r;
}

}  // namespace strata::server
