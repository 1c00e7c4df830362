// Sampler: turns a logits row into a token id. Order: logit bias, repetition penalty (divide
// positive / multiply negative logits of seen tokens), presence and frequency penalties (OpenAI),
// then greedy argmax, or temperature → top-k → top-p → min-p → a draw from a seeded generator.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/row_draw.h"

namespace strata::runtime {

struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;
};

// Temperatures between 0 and this are refused: dividing logits by them overflows to infinities.
// Front ends read smaller ones as 0 (greedy), as vLLM does below 1e-5.
inline constexpr float kMinTemperature = 1e-5f;

// What is wrong with sampling parameters: the field (as the OpenAI API names it) and why.
struct SamplingProblem {
  std::string field;
  std::string message;  // e.g. "must be in (0, 1], got 0"
};

// The one definition of the sampling parameters the sampler can honour: the first problem with p,
// or nullopt. Sampler's constructor refuses what this refuses, and request validation calls it
// last, so a request that passes validation never fails in the sampler. Token ids are checked
// against the vocabulary where it is known (the engine), not here.
std::optional<SamplingProblem> find_sampling_problem(const SamplingParams& p);
// Throws Error(kInvalidInput) "<field> <message>" on find_sampling_problem's first problem.
void check_sampling(const SamplingParams& p);
// What every front end reads as greedy, spelled as the sampler knows it (temperature 0, top_p 1):
// a temperature below kMinTemperature, and top_p 0 (nothing but the top token survives).
void normalize_greedy(SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(SamplingParams params);
  // logits is modified in place. history: the prompt and the generated tokens (for penalties).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);
  // The edits sample() makes to the logits before its pick (logit bias and penalties), as lists
  // for backend::edit_logits: each token with a bias or (when a penalty is on) seen in history, its
  // bias and its count in history. sample() applies the same lists with the same formula.
  struct LogitEdits {
    std::vector<int32_t> ids, counts;
    std::vector<float> biases;
  };
  void logit_edits(std::span<const int32_t> history, size_t vocab, LogitEdits& out);
  backend::LogitPenalties penalties() const;
  // The draw of the next token as backend::sample_row makes it where the logits lie (after
  // backend::edit_logits, when edits_logits()), for temperature sampling: the parameters, and the
  // uniform number sample() would take from the generator (taken now), so that the device picks the
  // token sample() would but for rounding.
  backend::RowDraw device_draw();
  // Where the random stream stands, to take back draws whose tokens were not used.
  const std::mt19937_64& random_state() const { return rng_; }
  void restore_random_state(const std::mt19937_64& state) { rng_ = state; }
  const SamplingParams& params() const { return params_; }
  // Whether penalties or a logit bias edit the logits before the pick.
  bool edits_logits() const;

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history);
  // The draw over candidates_ (logits already divided by the temperature).
  int32_t draw();
  // Arranges candidates_ (holding probabilities) so that its first n are the n most likely, n the
  // fewest whose total reaches target (all of them if rounding keeps it short), and returns n.
  size_t best_reaching(double target);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
  LogitEdits edits_;           // apply_penalties' lists
  std::vector<int32_t> slot_;  // logit_edits: each token's entry in its lists, or -1
};

}  // namespace strata::runtime
