// Sampler: turns a logits row into a token id. Order: logit bias, repetition penalty (divide
// positive / multiply negative logits of seen tokens), presence and frequency penalties (OpenAI),
// then greedy argmax, or temperature → top-k → top-p → min-p → a draw from a seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

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

class Sampler {
 public:
  explicit Sampler(SamplingParams params);
  // logits is modified in place. history: the prompt and the generated tokens (for penalties).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);
  // The same draw from a part of the row: the logits `values` of the tokens `ids` (any order), all
  // the others taken as impossible. Only for temperature sampling with nothing that edits the
  // logits; a caller that leaves out only tokens far below the best one (a probability under
  // e^-30 of its each, see kWindowNats) gets the token sample() would pick but for rounding.
  int32_t sample_from(std::span<const float> values, std::span<const int32_t> ids);
  const SamplingParams& params() const { return params_; }
  // Whether penalties or a logit bias edit the logits before the pick.
  bool edits_logits() const;
  // Greedy with nothing that edits the logits first: the token is their argmax.
  bool plain_greedy() const;

  // How far below the best token, in units of the temperature (nats), a token may be left out of
  // sample_from: e^-30 ≈ 1e-13, so even a vocabulary of 10^6 such tokens holds under 1e-7 of the
  // probability, below the rounding of the float probabilities the draw walks.
  static constexpr float kWindowNats = 30.0f;

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
  std::vector<int32_t> counts_;
};

}  // namespace strata::runtime
