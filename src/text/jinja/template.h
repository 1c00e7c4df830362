// strata's Jinja2 engine for Hugging Face chat templates: parse a template once, render it many
// times (concurrently) with a JSON context. Renders like transformers' chat-template renderer:
// Jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loopcontrols, HF's
// tojson (json.dumps, ensure_ascii=False) and the globals raise_exception and strftime_now.
#pragma once

#include <cstddef>
#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/json.h"

namespace strata::text::jinja {

struct Options {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  size_t max_output_bytes = 4 << 20;  // also bounds any single string or list a template builds
  size_t max_loop_iterations = 1'000'000;  // for-loop iterations in one render
  int max_recursion_depth = 200;           // nested macro / caller / recursive-loop calls
  // Bounds the work of one render: every evaluated expression costs one unit, every element a
  // filter or function walks one, every 64 bytes of string it builds one.
  size_t max_operations = 100'000'000;
  size_t max_stack_bytes = 1 << 20;  // machine stack a render may use before it fails cleanly
  // HF renders in Jinja2's *immutable* sandbox: list.append, dict.update and the other mutating
  // methods raise SecurityError. Set to allow them (plain SandboxedEnvironment behaviour).
  bool allow_mutation = false;
  // strftime_now's clock, as local broken-down time; unset means the system clock.
  std::function<std::tm()> now;
};

class Template {
 public:
  // Parses the template. Syntax errors (and unknown filters or tests outside `if` branches, as
  // Jinja2 reports at compile time) throw strata::Error (kInvalidInput) with line and column.
  explicit Template(std::string_view source, Options options = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the context's top-level keys as variables. Use ordered_json to keep the key
  // order of objects (tojson of tool definitions prints keys in their original order); Json's
  // objects iterate in sorted order. Runtime errors (raise_exception, type errors, undefined
  // values used, limits) throw strata::Error with a message like Python's, e.g.
  // "TypeError: can only concatenate str (not \"list\") to str (template line 12)".
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const Json& context) const;

 private:
  struct Impl;
  std::unique_ptr<const Impl> impl_;
};

}  // namespace strata::text::jinja
