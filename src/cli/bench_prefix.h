// strata bench --prefix-session N: what the prefix cache saves an agent. A system prompt of N
// tokens with a short user turn: time to first token cold, warm from device memory, warm from
// host memory, and from disk after a restart; then a five-turn session (the same system prompt, the history growing by each
// turn's question and answer) with each turn's time to first token.
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"
#include "core/settings.h"

namespace strata::cli {

struct PrefixPlan {
  int64_t system = 12288;  // tokens of the system prompt
  int64_t user = 20;       // tokens of each user turn
  int64_t answer = 32;     // tokens each turn generates
  int turns = 5;
};

std::string prefix_table_header(const PrefixPlan& plan);
// One model's row: config (random weights of `bits`) loaded with `settings`.
std::string bench_prefix(const std::string& name, const Json& config, int bits,
                         const Settings& settings, const PrefixPlan& plan);
std::string prefix_notes(const PrefixPlan& plan);

}  // namespace strata::cli
