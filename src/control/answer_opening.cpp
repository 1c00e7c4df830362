#include "control/answer_opening.h"

#include <utility>

#include "core/error.h"

namespace strata::control {

AnswerOpening::AnswerOpening(OpeningSettings settings, runtime::TokenController* inner)
    : s_(std::move(settings)),
      inner_(inner),
      phase_(s_.starts_in_reasoning ? Phase::kReasoning : Phase::kBefore) {
  check(!s_.opening.empty(), ErrorKind::kInternal, "an answer opening needs tokens");
  check(static_cast<bool>(s_.blank), ErrorKind::kInternal,
        "an answer opening needs a blank-token test");
}

void AnswerOpening::track(int32_t token) {
  if (phase_ == Phase::kBefore && token == s_.think_open && s_.think_open >= 0) {
    phase_ = Phase::kReasoning;
  } else if (phase_ == Phase::kReasoning && token == s_.think_close && s_.think_close >= 0) {
    phase_ = Phase::kAfterReasoning;
  }
}

runtime::ControlDecision AnswerOpening::replace() {
  phase_ = Phase::kOpened;
  replaced_ = true;
  runtime::ControlDecision d;
  d.keep = false;
  d.inject = s_.opening;
  return d;
}

runtime::ControlDecision AnswerOpening::on_sampled(int32_t token) {
  const bool answer_starts = (phase_ == Phase::kBefore || phase_ == Phase::kAfterReasoning) &&
                             !(phase_ == Phase::kBefore && token == s_.think_open) &&
                             !s_.blank(token);
  if (!answer_starts) {
    track(token);
    return inner_ != nullptr ? inner_->on_sampled(token) : runtime::ControlDecision{};
  }
  if (token != s_.opening.front()) return replace();
  // The model opens the call itself: keep its token and add the rest, unless the inner controller
  // changes or ends the answer here.
  phase_ = Phase::kOpened;
  runtime::ControlDecision d =
      inner_ != nullptr ? inner_->on_sampled(token) : runtime::ControlDecision{};
  if (d.keep && d.inject.empty() && !d.stop)
    d.inject.assign(s_.opening.begin() + 1, s_.opening.end());
  return d;
}

void AnswerOpening::on_injected(int32_t token) {
  track(token);
  if (inner_ != nullptr) inner_->on_injected(token);
}

std::optional<runtime::ControlDecision> AnswerOpening::on_end(int32_t token) {
  if (phase_ == Phase::kBefore || phase_ == Phase::kAfterReasoning) return replace();
  return inner_ != nullptr ? inner_->on_end(token) : std::nullopt;
}

}  // namespace strata::control
