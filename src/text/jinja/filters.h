// Jinja's built-in filters (`x | name(args)`) and tests (`x is name(args)`), with HF's tojson.
// The parser resolves names to these functions once; `map`, `select` and friends look them up at
// render time.
#pragma once

#include <string_view>

#include "text/jinja/ast.h"

namespace strata::text::jinja {

FilterFn find_filter(std::string_view name);  // null when there is no such filter
TestFn find_test(std::string_view name);      // null when there is no such test

}  // namespace strata::text::jinja
