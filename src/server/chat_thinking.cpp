// Reading a chat request for think control, and building its controller.
#include "server/chat_thinking.h"

#include "core/log.h"

namespace strata::server {

namespace {

std::string content_text(const OrderedJson& message) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  std::string text;  // a list of text parts (checked by the request parser)
  for (const auto& part : *it) {
    if (!text.empty()) text += "\n";
    text += part.value("text", "");
  }
  return text;
}

bool ends_with_closed_block(std::string_view text, std::string_view close) {
  const size_t end = text.find_last_not_of(" \t\r\n");
  return end != std::string_view::npos && text.substr(0, end + 1).ends_with(close);
}

}  // namespace

control::TaskSignals task_signals(const ChatCompletionRequest& request) {
  control::TaskSignals task;
  task.response_format = request.response_format.type;
  for (const auto& message : request.messages) {
    const std::string role = message.value("role", "");
    if (role == "system") {
      if (!task.system_prompt.empty()) task.system_prompt += "\n";
      task.system_prompt += content_text(message);
    } else if (role == "user") {
      task.last_user_message = content_text(message);
    }
  }
  return task;
}

bool thinking_set_by_request(const ChatCompletionRequest& request) {
  return request.chat_template_kwargs.contains("enable_thinking") ||
         request.reasoning_effort.has_value();
}

std::unique_ptr<control::ThinkController> make_think_controller(
    const control::ThinkControlConfig& config, const text::Tokenizer& tokenizer,
    const text::chat::RenderedPrompt& prompt, const control::TaskSignals& task,
    int64_t max_thinking_tokens, int64_t max_answer_tokens) {
  const std::optional<int32_t> open = tokenizer.token_id("<think>");
  const std::optional<int32_t> close = tokenizer.token_id("</think>");
  if (!close) return nullptr;
  if (!prompt.starts_in_reasoning && ends_with_closed_block(prompt.text, "</think>"))
    return nullptr;  // thinking is off
  control::ThinkSettings s;
  s.starts_in_reasoning = prompt.starts_in_reasoning;
  s.think_open = open.value_or(-1);
  s.think_close = *close;
  s.max_thinking_tokens = max_thinking_tokens;
  s.max_answer_tokens = max_answer_tokens;
  s.escape_tokens = tokenizer.encode(config.close + control::choose_escape(config, task).hint);
  s.loop = config.loop;
  s.answer_loop = config.answer_loop;
  if (s.escape_tokens.empty() || s.escape_tokens.front() != *close) {
    log::warn("think control off: the escape text '{}' does not start with the </think> token",
              config.close);
    return nullptr;
  }
  return std::make_unique<control::ThinkController>(std::move(s));
}

OrderedJson strata_extension_json(bool routed, const std::optional<control::ThinkReport>& think) {
  const control::ThinkReport report = think.value_or(control::ThinkReport{});
  return {{"thinking",
           {{"routed", routed},
            {"budget_closed", report.budget_closed},
            {"loop_escaped", report.loop_escaped},
            {"answer_loop_stopped", report.answer_loop_stopped},
            {"reasoning_tokens", report.reasoning_tokens}}}};
}

}  // namespace strata::server
