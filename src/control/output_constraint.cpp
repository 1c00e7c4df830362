// The answer's and tool calls' constraints in the token stream.
#include "control/output_constraint.h"

#include <algorithm>
#include <utility>

#include "core/log.h"
#include "text/structured/automaton.h"

namespace strata::control {

namespace st = text::structured;

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

OutputConstraint::OutputConstraint(ConstraintSettings settings) : s_(std::move(settings)) {
  if (s_.starts_in_reasoning && s_.think_close >= 0) {
    phase_ = Phase::kReasoning;
  } else {
    phase_ = Phase::kFree;
    after_reasoning();
  }
}

void OutputConstraint::after_reasoning() {
  phase_ = Phase::kFree;
  if (s_.answer) {
    matcher_.emplace(s_.answer);
    phase_ = Phase::kAnswer;
  } else if (s_.tool_call && s_.bare_call) {
    phase_ = Phase::kOpening;
  }
}

void OutputConstraint::after_call() {
  if (s_.single_call) {
    phase_ = Phase::kDone;
  } else {
    phase_ = s_.call_separators.empty() ? Phase::kFree : Phase::kBetween;
  }
}

void OutputConstraint::open_call(std::string_view text) {
  matcher_.emplace(s_.tool_call);
  phase_ = Phase::kCall;
  window_.clear();
  opening_.clear();
  if (text.empty()) return;
  if (!matcher_->advance(text)) {
    log::warn("structured output: a tool call's opening broke its grammar; the call is free");
    phase_ = Phase::kBroken;
  } else if (matcher_->finished()) {
    after_call();
  }
}

void OutputConstraint::read_free(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (phase_ == Phase::kOpening) {
      if (opening_.empty() && is_space(c)) continue;
      // A run of whitespace decides nothing its first byte did not: the test skips runs whole.
      const bool same_run = is_space(c) && is_space(opening_.back());
      opening_.push_back(c);
      if (same_run) continue;
      const std::optional<bool> call = s_.bare_call(opening_);
      if (!call) continue;
      if (*call) {
        open_call(opening_ + std::string(bytes.substr(i + 1)));
        return;
      }
      // Not a call: the answer is free text, read again from its start for an opening tag.
      phase_ = Phase::kFree;
      read_free(std::exchange(opening_, std::string()) + std::string(bytes.substr(i + 1)));
      return;
    }
    if (phase_ == Phase::kBetween) {
      if (s_.call_separators.find(c) != std::string::npos) continue;
      if (st::Matcher(s_.tool_call).advance(bytes.substr(i, 1))) {
        open_call(bytes.substr(i));
        return;
      }
      phase_ = Phase::kFree;  // the run of calls is over; this byte is free text
    }
    window_.push_back(c);
    if (window_.size() > s_.call_open.size())
      window_.erase(0, window_.size() - s_.call_open.size());
    if (window_ == s_.call_open) {
      open_call(bytes.substr(i + 1));
      return;
    }
  }
}

void OutputConstraint::set_ends(std::span<uint32_t> words) const {
  for (int32_t id : s_.end_ids)
    if (id >= 0 && static_cast<size_t>(id) / 32 < words.size()) words[id / 32] |= 1u << (id % 32);
}

bool OutputConstraint::allowed(std::span<uint32_t> words) {
  switch (phase_) {
    case Phase::kAnswer:
      matcher_->mask(words);
      if (matcher_->accepts()) set_ends(words);
      return true;
    case Phase::kCall:
      matcher_->mask(words);
      return true;
    case Phase::kDone:
      std::fill(words.begin(), words.end(), 0u);
      set_ends(words);
      return true;
    default:
      return false;
  }
}

void OutputConstraint::on_emitted(int32_t token) {
  switch (phase_) {
    case Phase::kReasoning:
      if (token == s_.think_close) after_reasoning();
      return;
    case Phase::kAnswer:
      if (!matcher_->advance(token)) {
        log::warn("structured output: token {} broke the answer's constraint; the rest is free",
                  token);
        phase_ = Phase::kBroken;
      }
      return;
    case Phase::kCall:
      if (!matcher_->advance(token)) {
        log::warn("structured output: token {} broke a tool call's constraint", token);
        phase_ = Phase::kBroken;
      } else if (matcher_->finished()) {
        after_call();
      }
      return;
    case Phase::kOpening:
    case Phase::kFree:
    case Phase::kBetween: {
      if (!s_.tool_call) return;
      if (token == s_.call_open_id) {
        open_call({});
        return;
      }
      const st::Vocabulary& v = s_.tool_call->vocabulary();
      if (token >= 0 && static_cast<size_t>(token) < v.size()) read_free(v.bytes(token));
      return;
    }
    default:
      return;
  }
}

ConstraintCache::ConstraintCache(const text::Tokenizer& tokenizer, size_t capacity,
                                 std::vector<std::string> writable_special)
    : tokenizer_(tokenizer), capacity_(capacity), writable_special_(std::move(writable_special)) {}

std::shared_ptr<const st::Vocabulary> ConstraintCache::vocabulary() {
  std::lock_guard lock(mutex_);
  if (!vocabulary_) vocabulary_ = st::Vocabulary::from_tokenizer(tokenizer_, writable_special_);
  return vocabulary_;
}

std::shared_ptr<st::TokenConstraint> ConstraintCache::get(
    const std::string& key, const std::function<st::Grammar()>& build) {
  {
    std::lock_guard lock(mutex_);
    for (auto it = recent_.begin(); it != recent_.end(); ++it)
      if (it->first == key) {
        recent_.splice(recent_.begin(), recent_, it);
        return it->second;
      }
  }
  // Compiled outside the lock (a schema may take a while); two racing requests compile twice.
  // The start state's mask is computed here too, on the request's thread rather than the
  // engine's: a grammar too ambiguous for the work budget fails there, and is not kept.
  auto compiled = std::make_shared<st::TokenConstraint>(build(), vocabulary());
  std::vector<uint32_t> words(compiled->vocabulary().words());
  compiled->mask(compiled->start(), words);
  std::lock_guard lock(mutex_);
  recent_.emplace_front(key, compiled);
  if (recent_.size() > capacity_) recent_.pop_back();
  return compiled;
}

}  // namespace strata::control
