// strata bench --speculative: speculative decoding against plain greedy decoding of the same prompt
// on the same engine. Two tables: a forced-acceptance sweep (the target's own tokens drafted at a
// chosen rate by cli::OracleDrafter, the drafts free or a draft model's cost paid) with the speedup
// predicted from measured step times beside the measured one; and real drafters (n-gram lookup on a
// code-editing prompt, a draft model on a few real prompts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/settings.h"

namespace strata::cli {

struct SpeculativePlan {
  std::vector<int> acceptance = {0,  25, 50,
                                 70, 90, 100};  // percent of drafts the oracle gets right
  // Drafts per verify step; a length past what the model verifies at once (less its own token) runs
  // at that most, and its cells say so.
  std::vector<int64_t> lengths = {1, 2, 4, 8};
  int64_t prompt = 512;     // tokens of the sweep's prompt (and of the token-id code prompt)
  int64_t tokens = 128;     // tokens each request generates
  std::string draft_shape;  // a shape built with random weights (and the target's vocabulary) whose
                            // drafting the sweep pays for; "": none
  std::string draft_model;  // a model directory: the real drafter's model, and a cost in the sweep
  uint64_t seed = 1;        // the oracle's draws
};

// What to run: a named shape with random weights of `bits`, or a model directory (`dir` not empty:
// its own weights and tokenizer; the built-in strata-demo as a shape is one).
struct SpeculativeTarget {
  std::string name;
  Json config;
  int bits = 4;
  std::string dir;
};

// The markdown rows one target adds to each table (a run that fails is a row with its error).
struct SpeculativeRows {
  std::string sweep;
  std::string real;
  std::string breakdown;  // on a GPU: "| op | decode | verify ... |" rows (empty elsewhere)
};

std::string speculative_settings(const SpeculativePlan& plan, const Settings& settings);
std::string speculative_sweep_header();
std::string speculative_real_header();
SpeculativeRows bench_speculative(const SpeculativeTarget& target, const Settings& settings,
                                  const SpeculativePlan& plan);
std::string speculative_sweep_notes(const SpeculativePlan& plan);
std::string speculative_real_notes(const SpeculativePlan& plan);

}  // namespace strata::cli
