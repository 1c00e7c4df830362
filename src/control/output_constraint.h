// Structured output in the token stream: the runtime's OutputConstraint for a chat answer. The
// answer must match a compiled constraint (response_format's JSON schema, json_object, or the
// grammar field), and each tool call, from what opens it (a tag such as <tool_call>, or for Llama 3
// the answer's first bytes or the end of the call before), must match the tool-call grammar of the
// declared tools. Reasoning stays free: with the prompt's reasoning block open, nothing is
// constrained until its close tag. A token that breaks the constraint can only be one the mask did
// not choose (a controller's injected token, or the free token in which a bare Llama 3 call's
// opening completes); the constraint then gives up (free text from there) rather than fail the
// answer.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/engine.h"
#include "text/structured/token_mask.h"

namespace strata::control {

struct ConstraintSettings {
  std::shared_ptr<text::structured::TokenConstraint> answer;     // null: the answer is free
  std::shared_ptr<text::structured::TokenConstraint> tool_call;  // null: calls are free
  std::string call_open = "<tool_call>";  // the text that opens a call (tool_call's start)
  int32_t call_open_id = -1;              // its token, when it is one (a special token may be)
  // Llama 3: a call may also open the answer, as bare JSON. Given the answer's text so far, its
  // leading whitespace dropped: true once it has begun a call, false once it cannot, nullopt while
  // undecided (the output parser's own test, so that the two agree; it must read a run of
  // whitespace as it reads one byte of it). The call's text, from the answer's first byte on, is
  // then tool_call's. Null: calls open only at call_open.
  std::function<std::optional<bool>(std::string_view)> bare_call;
  // Llama 3: calls may follow one another with only these bytes between them; a byte a call can
  // begin with opens the next, any other ends the run (free text). Empty: each call needs
  // call_open.
  std::string call_separators;
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
  // An emitted token broke the constraint (only one the mask did not choose can).
  bool broken() const { return phase_ == Phase::kBroken; }

 private:
  // kOpening: the answer's start, while a bare call may still begin (bare_call); kBetween: right
  // after a call, while the next may follow (call_separators).
  enum class Phase { kReasoning, kOpening, kFree, kBetween, kAnswer, kCall, kDone, kBroken };
  void after_reasoning();
  void after_call();
  void read_free(std::string_view bytes);  // text outside a call: finds where the next one opens
  void open_call(std::string_view text);   // the call's text so far (after its opening tag)
  void set_ends(std::span<uint32_t> words) const;

  ConstraintSettings s_;
  Phase phase_;
  std::optional<text::structured::Matcher> matcher_;
  std::string window_;   // the last bytes of free text, to find a call's opening tag
  std::string opening_;  // kOpening: the answer's text so far, leading whitespace dropped
};

// Compiled constraints of one model's vocabulary, the most recent `capacity` kept by key (a
// schema's text), so the requests that repeat a schema share its automaton and cached masks.
// Thread-safe.
class ConstraintCache {
 public:
  // writable_special: the special tokens a constraint may write (their text), such as markup
  // inside a tool call (text/structured/tool_call_grammar.h); other special tokens never are.
  ConstraintCache(const text::Tokenizer& tokenizer, size_t capacity = 32,
                  std::vector<std::string> writable_special = {});
  // The vocabulary (built on first use).
  std::shared_ptr<const text::structured::Vocabulary> vocabulary();
  // The constraint under `key`, or build(): compiled once, with the mask of its start state.
  // Throws build()'s errors, and Error(kInvalidInput) for a grammar whose start state or first
  // mask is over the automaton's work budget.
  std::shared_ptr<text::structured::TokenConstraint> get(
      const std::string& key, const std::function<text::structured::Grammar()>& build);

 private:
  const text::Tokenizer& tokenizer_;
  size_t capacity_;
  std::vector<std::string> writable_special_;
  std::mutex mutex_;
  std::shared_ptr<const text::structured::Vocabulary> vocabulary_;
  std::list<std::pair<std::string, std::shared_ptr<text::structured::TokenConstraint>>> recent_;
};

}  // namespace strata::control
