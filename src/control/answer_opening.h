// Forcing how an answer opens, for tool_choice "required" or a named function: the answer's first
// token that is not blank must begin the opening (a tool call's start tag, and the function's name
// when one is named), and the model writes the rest of the call. Reasoning passes untouched, so do
// blank tokens (the whitespace a model writes between </think> and its call), and an end token
// that comes before the answer is replaced by the opening.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "runtime/engine.h"

namespace strata::control {

struct OpeningSettings {
  std::vector<int32_t> opening;        // the tokens the answer must begin with; not empty
  std::function<bool(int32_t)> blank;  // whether a token's text is whitespace only
  bool starts_in_reasoning = false;    // the prompt opened a reasoning block
  int32_t think_open = -1;             // the reasoning tags' token ids (-1: none)
  int32_t think_close = -1;
};

// Wraps the request's other controller (`inner`, may be null; the think controller), which sees
// every token as it would alone except the one the opening replaces; the opening's tokens reach it
// as injected ones.
class AnswerOpening final : public runtime::TokenController {
 public:
  AnswerOpening(OpeningSettings settings, runtime::TokenController* inner);

  runtime::ControlDecision on_sampled(int32_t token) override;
  void on_injected(int32_t token) override;
  std::optional<runtime::ControlDecision> on_end(int32_t token) override;

  // Whether the model's own first answer token was replaced by the opening.
  bool replaced() const { return replaced_; }

 private:
  // kBefore: nothing yet (the model may open a reasoning block); kAfterReasoning: the block has
  // closed and the answer has not begun; kOpened: the opening is settled.
  enum class Phase { kBefore, kReasoning, kAfterReasoning, kOpened };
  void track(int32_t token);  // reasoning tags, sampled or injected
  runtime::ControlDecision replace();

  OpeningSettings s_;
  runtime::TokenController* inner_;
  Phase phase_;
  bool replaced_ = false;
};

}  // namespace strata::control
