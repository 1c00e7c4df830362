// Sampler implementation.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace strata::runtime {

Sampler::Sampler(SamplingParams params) : params_(std::move(params)), rng_(params_.seed) {
  check(params_.top_p > 0.0f && params_.top_p <= 1.0f, ErrorKind::kInvalidInput, "top_p must be in (0, 1]");
  check(params_.min_p >= 0.0f && params_.min_p <= 1.0f, ErrorKind::kInvalidInput, "min_p must be in [0, 1]");
  check(params_.top_k >= 0, ErrorKind::kInvalidInput, "top_k must be >= 0");
  check(params_.repetition_penalty > 0.0f, ErrorKind::kInvalidInput, "repetition_penalty must be > 0");
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) {
  const auto V = static_cast<int32_t>(logits.size());
  for (const auto& [id, bias] : params_.logit_bias)
    if (id >= 0 && id < V) logits[id] += bias;
  const bool repetition = params_.repetition_penalty != 1.0f;
  const bool additive = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  counts_.assign(logits.size(), 0);
  for (int32_t id : history)
    if (id >= 0 && id < V) ++counts_[id];
  for (int32_t id = 0; id < V; ++id) {
    if (counts_[id] == 0) continue;
    if (repetition) logits[id] = logits[id] > 0 ? logits[id] / params_.repetition_penalty
                                                 : logits[id] * params_.repetition_penalty;
    logits[id] -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(counts_[id]);
  }
}

bool Sampler::plain_greedy() const {
  return params_.temperature <= 0.0f && params_.repetition_penalty == 1.0f && params_.presence_penalty == 0.0f &&
         params_.frequency_penalty == 0.0f && params_.logit_bias.empty();
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  check(!logits.empty(), ErrorKind::kInternal, "sample: empty logits");
  apply_penalties(logits, history);
  if (params_.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  candidates_.clear();
  candidates_.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isfinite(logits[i]) || logits[i] > 0) candidates_.emplace_back(logits[i] / params_.temperature, static_cast<int32_t>(i));
  check(!candidates_.empty(), ErrorKind::kInvalidInput, "every token was masked out");
  // Candidates are visited from the most likely down (ties: the lower id first). A full sort of a
  // 250K vocabulary costs ~15 ms a token, so only the prefix the walk reaches gets sorted, in growing
  // steps; candidates_[0, sorted) is always that prefix, in order.
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t sorted = 0;
  auto sort_through = [&](size_t n) {  // makes candidates_[0, n] sorted (n < size)
    if (n < sorted) return;
    const size_t to = std::min(candidates_.size(), std::max({n + 1, 2 * sorted, size_t{256}}));
    std::partial_sort(candidates_.begin() + static_cast<std::ptrdiff_t>(sorted),
                      candidates_.begin() + static_cast<std::ptrdiff_t>(to), candidates_.end(), by_logit);
    sorted = to;
  };
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < candidates_.size()) {
    sort_through(static_cast<size_t>(params_.top_k) - 1);
    candidates_.resize(static_cast<size_t>(params_.top_k));
    sorted = std::min(sorted, candidates_.size());
  }
  // Softmax over the kept candidates.
  sort_through(0);
  const float max_logit = candidates_[0].first;
  double total = 0.0;
  for (auto& c : candidates_) {
    c.first = std::exp(c.first - max_logit);
    total += c.first;
  }
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / total);
  // Probabilities keep the logits' order, so the sorted prefix stays sorted.
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    size_t n = 0;
    while (n < candidates_.size()) {
      sort_through(n);
      cum += candidates_[n].first;
      ++n;
      if (cum >= params_.top_p) break;
    }
    candidates_.resize(std::max<size_t>(n, 1));
    sorted = std::min(sorted, candidates_.size());
  }
  if (params_.min_p > 0.0f) {
    const float threshold = params_.min_p * candidates_[0].first;
    size_t n = 1;
    while (n < candidates_.size()) {
      sort_through(n);
      if (candidates_[n].first < threshold) break;
      ++n;
    }
    candidates_.resize(n);
    sorted = std::min(sorted, candidates_.size());
  }
  double mass = 0.0;
  for (const auto& c : candidates_) mass += c.first;
  std::uniform_real_distribution<double> uniform(0.0, mass);
  double r = uniform(rng_);
  for (size_t i = 0; i < candidates_.size(); ++i) {
    sort_through(i);
    r -= candidates_[i].first;
    if (r <= 0.0) return candidates_[i].second;
  }
  return candidates_.back().second;
}

}  // namespace strata::runtime
