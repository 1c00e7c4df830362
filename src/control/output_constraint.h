// Structured output in the token stream: the runtime's OutputConstraint for a chat answer. The
// answer must match a compiled constraint (response_format's JSON schema, json_object, or the
// grammar field), and each tool call, from its opening tag, must match the tool-call grammar of the
// declared tools. Reasoning stays free: with the prompt's reasoning block open, nothing is
// constrained until its close tag. A token that breaks the constraint can only be injected (a
// controller's); the constraint then gives up (free text from there) rather than fail the answer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <list>
#include <vector>

#include "runtime/engine.h"
#include "text/structured/token_mask.h"

namespace strata::control {

struct ConstraintSettings {
  std::shared_ptr<text::structured::TokenConstraint> answer;     // null: the answer is free
  std::shared_ptr<text::structured::TokenConstraint> tool_call;  // null: calls are free
  std::string call_open = "<tool_call>";  // the text that opens a call (tool_call's start)
  int32_t call_open_id = -1;              // its token, when it is one (a special token may be)
  bool single_call = false;               // parallel_tool_calls false: the answer ends after one
  std::vector<int32_t> end_ids;           // allowed once the answer's text is complete
  bool starts_in_reasoning = false;
  int32_t think_close = -1;
};

class OutputConstraint final : public runtime::OutputConstraint {
 public:
  explicit OutputConstraint(ConstraintSettings settings);
  bool allowed(std::span<uint32_t> words) override;
  void on_emitted(int32_t token) override;
  // An emitted token broke the constraint (only an injected one can).
  bool broken() const { return phase_ == Phase::kBroken; }

 private:
  enum class Phase { kReasoning, kFree, kAnswer, kCall, kDone, kBroken };
  void after_reasoning();
  void open_call(std::string_view rest);
  void set_ends(std::span<uint32_t> words) const;

  ConstraintSettings s_;
  Phase phase_;
  std::optional<text::structured::Matcher> matcher_;
  std::string window_;  // the last bytes of free text, to find a call's opening tag
};

// Compiled constraints of one model's vocabulary, the most recent `capacity` kept by key (a
// schema's text), so the requests that repeat a schema share its automaton and cached masks.
// Thread-safe.
class ConstraintCache {
 public:
  ConstraintCache(const text::Tokenizer& tokenizer, size_t capacity = 32);
  // The vocabulary (built on first use).
  std::shared_ptr<const text::structured::Vocabulary> vocabulary();
  // The constraint under `key`, or build(): compiled once.
  std::shared_ptr<text::structured::TokenConstraint> get(
      const std::string& key, const std::function<text::structured::Grammar()>& build);

 private:
  const text::Tokenizer& tokenizer_;
  size_t capacity_;
  std::mutex mutex_;
  std::shared_ptr<const text::structured::Vocabulary> vocabulary_;
  std::list<std::pair<std::string, std::shared_ptr<text::structured::TokenConstraint>>> recent_;
};

}  // namespace strata::control
