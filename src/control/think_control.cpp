// ThinkController and the escape-hint / router rules.
#include "control/think_control.h"

#include "core/error.h"
#include "text/regex.h"

namespace strata::control {

Pattern::Pattern(std::string source) : source_(std::move(source)) {
  if (!source_.empty()) re_ = std::make_shared<const text::Regex>(source_);
}

bool Pattern::found_in(std::string_view text) const {
  if (!re_ || text.empty()) return false;
  bool found = false;
  re_->for_each_match(text, [&](size_t, size_t) { found = true; });
  return found;
}

namespace {

LoopConfig loop_from_json(const Json& j, const char* where) {
  check(j.is_object(), ErrorKind::kInvalidInput, "think control config: '{}' must be an object", where);
  LoopConfig c;
  c.min_period = get_or<int>(j, "min_period", c.min_period);
  c.max_period = get_or<int>(j, "max_period", c.max_period);
  c.repeats = get_or<int>(j, "repeats", c.repeats);
  c.min_span = get_or<int>(j, "min_span", c.min_span);
  c.tolerance = get_or<double>(j, "tolerance", c.tolerance);
  c.exact_below = get_or<int>(j, "exact_below", c.exact_below);
  LoopDetector check_valid(c);  // throws on bad values
  return c;
}

EscapeRule rule_from_json(const Json& j) {
  check(j.is_object() && j.contains("hint") && j["hint"].is_string(), ErrorKind::kInvalidInput,
        "think control config: each escape rule needs a string 'hint'");
  EscapeRule r;
  r.task = get_or<std::string>(j, "task", "");
  r.hint = j["hint"].get<std::string>();
  r.prompt_pattern = Pattern(get_or<std::string>(j, "prompt_pattern", ""));
  if (auto it = j.find("response_format"); it != j.end())
    for (const auto& f : *it) r.response_formats.push_back(f.get<std::string>());
  return r;
}

}  // namespace

extern const char* const kDefaultThinkControlJson;  // think_control_default.cpp (generated)

ThinkControlConfig ThinkControlConfig::from_json(const Json& j) {
  try {
    ThinkControlConfig c;
    c.max_thinking_tokens = get_or<int64_t>(j, "max_thinking_tokens", c.max_thinking_tokens);
    check(c.max_thinking_tokens >= 0, ErrorKind::kInvalidInput, "max_thinking_tokens must be >= 0");
    c.loop = loop_from_json(j.value("loop", Json::object()), "loop");
    c.answer_loop = loop_from_json(j.value("answer_loop", Json::object()), "answer_loop");
    const Json& e = j.at("escape");
    c.close = e.at("close").get<std::string>();
    for (const auto& r : e.value("rules", Json::array())) c.rules.push_back(rule_from_json(r));
    c.fallback = rule_from_json(e.at("default"));
    const Json r = j.value("router", Json::object());
    c.router.enabled = get_or<bool>(r, "enabled", false);
    c.router.min_system_chars = get_or<int64_t>(r, "min_system_chars", c.router.min_system_chars);
    c.router.max_user_chars = get_or<int64_t>(r, "max_user_chars", c.router.max_user_chars);
    c.router.question_pattern = Pattern(get_or<std::string>(r, "question_pattern", ""));
    return c;
  } catch (const Json::exception& e) {
    fail(ErrorKind::kInvalidInput, "think control config: {}", e.what());
  }
}

const ThinkControlConfig& ThinkControlConfig::defaults() {
  static const ThinkControlConfig config = from_json(parse_json(kDefaultThinkControlJson, "think_control.json"));
  return config;
}

const EscapeRule& choose_escape(const ThinkControlConfig& config, const TaskSignals& task) {
  for (const EscapeRule& r : config.rules) {
    for (const std::string& f : r.response_formats)
      if (f == task.response_format) return r;
    if (r.prompt_pattern.found_in(task.last_user_message) ||
        r.prompt_pattern.found_in(task.system_prompt))
      return r;
  }
  return config.fallback;
}

bool route_thinking_on(const RouterConfig& config, const TaskSignals& task, bool thinking_set_by_request) {
  if (!config.enabled || thinking_set_by_request) return false;
  if (static_cast<int64_t>(task.system_prompt.size()) <= config.min_system_chars) return false;
  if (task.last_user_message.empty() || static_cast<int64_t>(task.last_user_message.size()) >= config.max_user_chars)
    return false;
  return config.question_pattern.empty() ||
         config.question_pattern.found_in(task.last_user_message);
}

ThinkController::ThinkController(ThinkSettings settings)
    : s_(std::move(settings)),
      phase_(s_.starts_in_reasoning ? Phase::kThinking : Phase::kBeforeThinking),
      thinking_loops_(s_.loop),
      answer_loops_(s_.answer_loop) {
  check(s_.escape_tokens.empty() || s_.escape_tokens.front() == s_.think_close, ErrorKind::kInternal,
        "the escape text must start with the closing think tag");
  check(s_.max_answer_tokens >= 0 && s_.max_thinking_tokens >= 0, ErrorKind::kInvalidInput,
        "token budgets must be >= 0");
}

int64_t ThinkController::engine_max_tokens() const {
  // Thinking, the escape text, then the answer; the engine's own cap is only a backstop.
  return s_.max_thinking_tokens + static_cast<int64_t>(s_.escape_tokens.size()) + s_.max_answer_tokens + 1;
}

runtime::ControlDecision ThinkController::escape() {
  runtime::ControlDecision d;
  d.keep = false;
  d.inject = s_.escape_tokens;
  if (d.inject.empty()) {  // no closing tag in this vocabulary: nothing to inject, end instead
    d.stop = true;
    d.reason = runtime::FinishReason::kLength;
  }
  return d;
}

runtime::ControlDecision ThinkController::answer_token(int32_t token) {
  runtime::ControlDecision d;
  if (report_.answer_tokens >= s_.max_answer_tokens) {
    d.keep = false;
    d.stop = true;
    d.reason = runtime::FinishReason::kLength;
    return d;
  }
  ++report_.answer_tokens;
  if (answer_loops_.push(token)) {
    report_.answer_loop_stopped = true;
    report_.loop = answer_loops_.last_match();
    d.stop = true;
    d.reason = runtime::FinishReason::kStop;
  } else if (report_.answer_tokens >= s_.max_answer_tokens) {
    d.stop = true;
    d.reason = runtime::FinishReason::kLength;
  }
  return d;
}

runtime::ControlDecision ThinkController::on_sampled(int32_t token) {
  switch (phase_) {
    case Phase::kThinking: {
      if (token == s_.think_close) {
        ++report_.reasoning_tokens;
        phase_ = Phase::kAnswer;
        return {};
      }
      if (report_.reasoning_tokens >= s_.max_thinking_tokens) {
        report_.budget_closed = true;
        return escape();
      }
      if (thinking_loops_.push(token)) {
        report_.loop_escaped = true;
        report_.loop = thinking_loops_.last_match();
        return escape();  // the looping token is dropped; the hint takes its place
      }
      ++report_.reasoning_tokens;
      return {};
    }
    case Phase::kBeforeThinking:
      if (token == s_.think_open && s_.think_open >= 0) {  // the model opens its own think block
        phase_ = Phase::kThinking;
        ++report_.reasoning_tokens;
        thinking_loops_.reset();
        return {};
      }
      return answer_token(token);
    case Phase::kAnswer:
      return answer_token(token);
  }
  return {};
}

void ThinkController::on_injected(int32_t token) {
  if (phase_ == Phase::kThinking && token == s_.think_close) {
    ++report_.reasoning_tokens;
    phase_ = Phase::kAnswer;
    return;
  }
  ++report_.answer_tokens;  // the hint is part of the answer
}

}  // namespace strata::control
