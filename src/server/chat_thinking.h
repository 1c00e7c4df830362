// Think control for chat requests: what a request says about its task (for the escape hint and
// the retrieval router), the per-request ThinkController (thinking and answer budgets, the
// vocabulary's think tokens, the escape text), and the "strata" extension object that reports it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "control/think_control.h"
#include "server/openai_request.h"
#include "text/chat/chat_template.h"
#include "text/tokenizer.h"

namespace strata::server {

// response_format, the system prompt (all system messages) and the last user message, their
// content parts flattened.
control::TaskSignals task_signals(const ChatCompletionRequest& request);

// The request chose thinking itself: chat_template_kwargs.enable_thinking or reasoning_effort.
bool thinking_set_by_request(const ChatCompletionRequest& request);

// The controller for a rendered prompt, or null where it has nothing to do: the vocabulary has no
// <think> / </think> tokens, or the prompt switched thinking off (it ends with a closed think
// block, as Qwen3's template writes for enable_thinking=false).
std::unique_ptr<control::ThinkController> make_think_controller(
    const control::ThinkControlConfig& config, const text::Tokenizer& tokenizer,
    const text::chat::RenderedPrompt& prompt, const control::TaskSignals& task,
    int64_t max_thinking_tokens, int64_t max_answer_tokens);

// {"thinking": {"routed", "budget_closed", "loop_escaped", "answer_loop_stopped",
// "reasoning_tokens"}}; `think` may be empty (no controller ran).
OrderedJson strata_extension_json(bool routed, const std::optional<control::ThinkReport>& think);

}  // namespace strata::server
