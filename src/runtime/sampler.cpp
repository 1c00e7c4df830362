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
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);
  // softmax over the kept candidates (sorted, so the first is the max)
  const float max_logit = candidates_[0].first;
  double total = 0.0;
  for (auto& c : candidates_) {
    c.first = std::exp(c.first - max_logit);
    total += c.first;
  }
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / total);
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    size_t n = 0;
    while (n < candidates_.size()) {
      cum += candidates_[n].first;
      ++n;
      if (cum >= params_.top_p) break;
    }
    candidates_.resize(std::max<size_t>(n, 1));
  }
  if (params_.min_p > 0.0f) {
    const float threshold = params_.min_p * candidates_[0].first;
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].first >= threshold) ++n;
    candidates_.resize(n);
  }
  double mass = 0.0;
  for (const auto& c : candidates_) mass += c.first;
  std::uniform_real_distribution<double> uniform(0.0, mass);
  double r = uniform(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r <= 0.0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace strata::runtime
