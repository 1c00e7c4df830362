// Think-aware generation control: a thinking budget separate from max_tokens, a loop detector scoped
// to the thinking block, a task-aware escape hint injected when thinking must end, an answer-phase
// loop guard, and the retrieval router that turns thinking on for long-context questions. The rules
// and strings are data (configs/think_control.json, built in as the default; a server may load
// another file).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "control/loop_detector.h"
#include "core/json.h"
#include "runtime/engine.h"

namespace strata::text {
class Regex;
}

namespace strata::control {

// A PCRE2 pattern compiled once, when the config is read (an invalid one throws there), and shared
// by every request that searches with it. Empty: matches nothing.
class Pattern {
 public:
  Pattern() = default;
  explicit Pattern(std::string source);

  bool empty() const { return source_.empty(); }
  const std::string& source() const { return source_; }
  bool found_in(std::string_view text) const;  // some non-empty match in text

 private:
  std::string source_;
  std::shared_ptr<const text::Regex> re_;
};

struct EscapeRule {
  std::string task;                         // "json", "sql", "code", ...
  std::vector<std::string> response_formats;  // OpenAI response_format types that select it
  Pattern prompt_pattern;                     // searched in the last user message (and system)
  std::string hint;                         // text injected after the closing tag
};

struct RouterConfig {
  bool enabled = true;
  int64_t min_system_chars = 3000;
  int64_t max_user_chars = 200;
  Pattern question_pattern;
};

struct ThinkControlConfig {
  int64_t max_thinking_tokens = 32768;
  LoopConfig loop;
  LoopConfig answer_loop;
  std::string close;  // "</think>\n\n"
  std::vector<EscapeRule> rules;  // first match wins
  EscapeRule fallback;
  RouterConfig router;

  static ThinkControlConfig from_json(const Json& j);  // throws Error(kInvalidInput) naming the field
  static const ThinkControlConfig& defaults();         // configs/think_control.json, built in
};

// What the request says about the task, for the escape hint.
struct TaskSignals {
  std::string response_format;  // "", "text", "json_object", "json_schema"
  std::string system_prompt;
  std::string last_user_message;
};

// The rule whose hint fits the task (config.fallback when none matches).
const EscapeRule& choose_escape(const ThinkControlConfig& config, const TaskSignals& task);

// The retrieval router: true when thinking was not set by the request, the system prompt is long,
// and the last user message is a short question.
bool route_thinking_on(const RouterConfig& config, const TaskSignals& task, bool thinking_set_by_request);

// Per-request settings of the controller.
struct ThinkSettings {
  bool starts_in_reasoning = false;  // the prompt opened a think block
  int32_t think_open = -1;           // token ids of <think> and </think> (-1: the vocabulary has none)
  int32_t think_close = -1;
  int64_t max_thinking_tokens = 32768;
  int64_t max_answer_tokens = 256;   // max_tokens: counts only answer tokens (injected ones included)
  std::vector<int32_t> escape_tokens;  // close + hint, tokenized; must start with think_close
  LoopConfig loop;
  LoopConfig answer_loop;
};

// What happened, for usage, logs and metrics.
struct ThinkReport {
  int64_t reasoning_tokens = 0;  // thinking tokens, the closing tag included
  int64_t answer_tokens = 0;
  bool budget_closed = false;        // thinking hit its budget and was closed by us
  bool loop_escaped = false;         // a loop in the thinking block was escaped
  bool answer_loop_stopped = false;  // the answer repeated itself and was stopped
  LoopMatch loop;
};

class ThinkController final : public runtime::TokenController {
 public:
  explicit ThinkController(ThinkSettings settings);

  runtime::ControlDecision on_sampled(int32_t token) override;
  void on_injected(int32_t token) override;

  const ThinkReport& report() const { return report_; }
  bool thinking() const { return phase_ == Phase::kThinking; }
  // Engine cap that lets both phases use their full budgets.
  int64_t engine_max_tokens() const;

 private:
  enum class Phase { kBeforeThinking, kThinking, kAnswer };
  runtime::ControlDecision escape();
  runtime::ControlDecision answer_token(int32_t token);

  ThinkSettings s_;
  Phase phase_;
  LoopDetector thinking_loops_;
  LoopDetector answer_loops_;
  ThinkReport report_;
};

}  // namespace strata::control
