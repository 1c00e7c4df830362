// Builders for the Responses API's response object, output items and stream events, field order as
// OpenAI sends them.
#include "server/responses_response.h"

namespace strata::server {
namespace {

OrderedJson reasoning_item(const std::string& id, const std::string& text, const char* status) {
  OrderedJson content = OrderedJson::array();
  if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", OrderedJson::array()},
          {"content", std::move(content)},
          {"status", status}};
}

OrderedJson output_text(const std::string& text) {
  return {{"type", "output_text"},
          {"annotations", OrderedJson::array()},
          {"logprobs", OrderedJson::array()},
          {"text", text}};
}

OrderedJson message_item(const std::string& id, const std::string& text, const char* status,
                         bool with_part = true) {
  OrderedJson content = OrderedJson::array();
  if (with_part) content.push_back(output_text(text));
  return {{"id", id},
          {"type", "message"},
          {"status", status},
          {"content", std::move(content)},
          {"role", "assistant"}};
}

OrderedJson function_call_item(const std::string& id, const text::chat::ToolCall& call,
                               const char* status, const std::string& arguments) {
  return {{"id", id},           {"type", "function_call"},
          {"status", status},   {"arguments", arguments},
          {"call_id", call.id}, {"name", call.name}};
}

const char* item_status(bool incomplete) { return incomplete ? "incomplete" : "completed"; }

}  // namespace

std::string response_status(const std::string& finish_reason) {
  return finish_reason == "length" ? "incomplete" : "completed";
}

OrderedJson responses_usage_json(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}, {"cache_write_tokens", 0}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

OrderedJson response_output_json(const text::chat::ParsedMessage& m, bool incomplete) {
  OrderedJson output = OrderedJson::array();
  const bool content = !m.content.empty(), calls = m.has_tool_calls();
  if (!m.reasoning_content.empty())
    output.push_back(reasoning_item(new_response_id("rs_"), m.reasoning_content,
                                    item_status(incomplete && !content && !calls)));
  if (content)
    output.push_back(
        message_item(new_response_id("msg_"), m.content, item_status(incomplete && !calls)));
  for (const auto& call : m.tool_calls)
    output.push_back(function_call_item(new_response_id("fc_"), call, "completed", call.arguments));
  return output;
}

OrderedJson response_json(const ResponseHeader& h, const OrderedJson& settings,
                          const std::string& status, OrderedJson output, const Usage* usage,
                          OrderedJson error) {
  OrderedJson j = {
      {"id", h.id},
      {"object", "response"},
      {"created_at", h.created},
      {"status", status},
      {"background", false},
      {"error", std::move(error)},
      {"incomplete_details", status == "incomplete" ? OrderedJson{{"reason", "max_output_tokens"}}
                                                    : OrderedJson(nullptr)}};
  auto setting = [&](const char* key) {
    auto it = settings.find(key);
    j[key] = it == settings.end() ? OrderedJson(nullptr) : *it;
  };
  setting("instructions");
  setting("max_output_tokens");
  j["model"] = h.model;
  j["output"] = std::move(output);
  for (const char* key : {"parallel_tool_calls", "previous_response_id", "reasoning", "store",
                          "temperature", "text", "tool_choice", "tools", "top_p", "truncation"})
    setting(key);
  j["usage"] = usage == nullptr ? OrderedJson(nullptr) : responses_usage_json(*usage);
  setting("user");
  setting("metadata");
  return j;
}

std::string ResponsesStream::event(const char* type, OrderedJson fields) {
  OrderedJson data = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) data[key] = std::move(value);
  return std::string("event: ") + type + "\ndata: " + dump(data) + "\n\n";
}

std::string ResponsesStream::start() {
  response_ = response_json(header_, settings_, "in_progress", OrderedJson::array(), nullptr);
  std::string out = event("response.created", {{"response", response_}});
  return out + event("response.in_progress", {{"response", response_}});
}

std::string ResponsesStream::open_text(Open kind) {
  std::string out = close(false);
  open_ = kind;
  text_.clear();
  const bool reasoning = kind == Open::kReasoning;
  item_ = reasoning ? reasoning_item(new_response_id("rs_"), "", "in_progress")
                    : message_item(new_response_id("msg_"), "", "in_progress", false);
  const OrderedJson part =
      reasoning ? OrderedJson{{"type", "reasoning_text"}, {"text", ""}} : output_text("");
  const size_t index = output_.size();
  out += event("response.output_item.added", {{"output_index", index}, {"item", item_}});
  out += event(
      "response.content_part.added",
      {{"item_id", item_["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  return out;
}

std::string ResponsesStream::close(bool incomplete) {
  if (open_ == Open::kNone) return {};
  const bool reasoning = open_ == Open::kReasoning;
  open_ = Open::kNone;
  const size_t index = output_.size();
  const OrderedJson id = item_["id"];
  const char* status = item_status(incomplete);
  OrderedJson item =
      reasoning ? reasoning_item(id, text_, status) : message_item(id, text_, status);
  const OrderedJson part =
      reasoning ? OrderedJson{{"type", "reasoning_text"}, {"text", text_}} : output_text(text_);
  OrderedJson done = {{"item_id", id}, {"output_index", index}, {"content_index", 0}};
  if (!reasoning) done["logprobs"] = OrderedJson::array();
  done["text"] = text_;
  std::string out =
      event(reasoning ? "response.reasoning_text.done" : "response.output_text.done", done);
  out += event("response.content_part.done",
               {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  return out;
}

std::string ResponsesStream::call(const text::chat::ToolCall& c) {
  // A call arrives whole: its item opens, carries the arguments as one delta, and closes.
  std::string out = close(false);
  const size_t index = output_.size();
  const std::string id = new_response_id("fc_");
  out += event("response.output_item.added",
               {{"output_index", index}, {"item", function_call_item(id, c, "in_progress", "")}});
  out += event("response.function_call_arguments.delta",
               {{"item_id", id}, {"output_index", index}, {"delta", c.arguments}});
  out += event(
      "response.function_call_arguments.done",
      {{"item_id", id}, {"output_index", index}, {"name", c.name}, {"arguments", c.arguments}});
  OrderedJson item = function_call_item(id, c, "completed", c.arguments);
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  return out;
}

std::string ResponsesStream::delta(const text::chat::ParsedDelta& d) {
  // Within one delta the parser settled the text in this order: reasoning, content, tool calls.
  std::string out;
  auto text = [&](Open kind, const std::string& piece, const char* type) {
    if (piece.empty()) return;
    if (open_ != kind) out += open_text(kind);
    text_ += piece;
    OrderedJson fields = {{"item_id", item_["id"]},
                          {"output_index", output_.size()},
                          {"content_index", 0},
                          {"delta", piece}};
    if (kind == Open::kMessage) fields["logprobs"] = OrderedJson::array();
    out += event(type, std::move(fields));
  };
  text(Open::kReasoning, d.reasoning_content, "response.reasoning_text.delta");
  text(Open::kMessage, d.content, "response.output_text.delta");
  for (const auto& c : d.tool_calls) out += call(c);
  return out;
}

std::string ResponsesStream::finish(const std::string& finish_reason, const Usage& usage,
                                    const OrderedJson& strata) {
  const std::string status = response_status(finish_reason);
  std::string out = close(status == "incomplete");
  response_ = response_json(header_, settings_, status, output_, &usage);
  if (!strata.is_null()) response_["strata"] = strata;
  return out + event(status == "incomplete" ? "response.incomplete" : "response.completed",
                     {{"response", response_}});
}

std::string ResponsesStream::fail(const ApiError& e) {
  std::string out = close(true);
  const OrderedJson code = e.code().empty() ? OrderedJson(nullptr) : OrderedJson(e.code());
  out += event("error",
               {{"code", code},
                {"message", e.what()},
                {"param", e.param().empty() ? OrderedJson(nullptr) : OrderedJson(e.param())}});
  // The response's error code, from the API's list: the server's fault, or the request's (such as
  // an output constraint too ambiguous to follow, found mid-answer).
  const char* failed_code = e.status() >= 500 ? "server_error" : "invalid_prompt";
  response_ = response_json(header_, settings_, "failed", output_, nullptr,
                            {{"code", failed_code}, {"message", e.what()}});
  return out + event("response.failed", {{"response", response_}});
}

}  // namespace strata::server
