// Sampler implementation.
#include "runtime/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace strata::runtime {

std::optional<SamplingProblem> find_sampling_problem(const SamplingParams& p) {
  auto problem = [](const char* field, std::string message) {
    return std::optional<SamplingProblem>(SamplingProblem{field, std::move(message)});
  };
  // Comparisons are written so that NaN fails them.
  if (!std::isfinite(p.temperature))
    return problem("temperature", fmt::format("must be a finite number, got {}", p.temperature));
  if (p.temperature > 0.0f && !(p.temperature >= kMinTemperature))
    return problem("temperature", fmt::format("must be 0 (greedy) or at least {}, got {}",
                                              kMinTemperature, p.temperature));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return problem("top_p", fmt::format("must be in (0, 1], got {}", p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    return problem("min_p", fmt::format("must be in [0, 1], got {}", p.min_p));
  if (p.top_k < 0) return problem("top_k", fmt::format("must be >= 0 (0: off), got {}", p.top_k));
  // A penalty of 0 would divide positive logits by zero; an infinite one ends in inf - inf.
  if (!(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty)))
    return problem("repetition_penalty",
                   fmt::format("must be a finite number > 0, got {}", p.repetition_penalty));
  if (!std::isfinite(p.presence_penalty))
    return problem("presence_penalty",
                   fmt::format("must be a finite number, got {}", p.presence_penalty));
  if (!std::isfinite(p.frequency_penalty))
    return problem("frequency_penalty",
                   fmt::format("must be a finite number, got {}", p.frequency_penalty));
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0) return problem("logit_bias", fmt::format("token ids must be >= 0, got {}", id));
    if (!std::isfinite(bias))
      return problem("logit_bias",
                     fmt::format("the bias of token {} must be a finite number, got {}", id, bias));
  }
  return std::nullopt;
}

void check_sampling(const SamplingParams& p) {
  if (auto problem = find_sampling_problem(p))
    fail(ErrorKind::kInvalidInput, "{} {}", problem->field, problem->message);
}

void normalize_greedy(SamplingParams& p) {
  if (p.temperature < kMinTemperature || p.top_p == 0.0f) {
    p.temperature = 0.0f;
    if (p.top_p == 0.0f) p.top_p = 1.0f;
  }
}

Sampler::Sampler(SamplingParams params) : params_(std::move(params)), rng_(params_.seed) {
  check_sampling(params_);
}

void Sampler::logit_edits(std::span<const int32_t> history, size_t vocab, LogitEdits& out) {
  out.ids.clear(), out.counts.clear(), out.biases.clear();
  if (slot_.size() != vocab) slot_.assign(vocab, -1);
  auto entry = [&](int32_t id) {
    int32_t& slot = slot_[static_cast<size_t>(id)];
    if (slot < 0) {
      slot = static_cast<int32_t>(out.ids.size());
      out.ids.push_back(id), out.counts.push_back(0), out.biases.push_back(0.0f);
    }
    return static_cast<size_t>(slot);
  };
  const auto V = static_cast<int64_t>(vocab);
  for (const auto& [id, bias] : params_.logit_bias)
    if (id >= 0 && id < V) out.biases[entry(id)] += bias;
  const backend::LogitPenalties p = penalties();
  if (p.repetition != 1.0f || p.presence != 0.0f || p.frequency != 0.0f)
    for (int32_t id : history)
      if (id >= 0 && id < V) ++out.counts[entry(id)];
  for (int32_t id : out.ids) slot_[static_cast<size_t>(id)] = -1;  // untouched for the next call
}

backend::LogitPenalties Sampler::penalties() const {
  return {params_.repetition_penalty, params_.presence_penalty, params_.frequency_penalty};
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) {
  if (!edits_logits()) return;
  logit_edits(history, logits.size(), edits_);
  const backend::LogitPenalties p = penalties();
  for (size_t i = 0; i < edits_.ids.size(); ++i) {
    float& l = logits[static_cast<size_t>(edits_.ids[i])];
    l = backend::edited_logit(l, edits_.biases[i], edits_.counts[i], p);
  }
}

bool Sampler::edits_logits() const {
  return params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f ||
         !params_.logit_bias.empty();
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
  return draw();
}

backend::RowDraw Sampler::device_draw() {
  check(params_.temperature > 0.0f, ErrorKind::kInternal, "device_draw: temperature sampling only");
  // The number draw() scales by the kept mass: uniform_real_distribution(0, mass) is this times mass.
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  return {params_.temperature, params_.top_k, params_.top_p, params_.min_p, std::min(u, std::nextafter(1.0, 0.0))};
}

namespace {

// Candidates from the most likely down; ties: the lower id first (a strict order, so "the n best" is
// one set).
bool more_likely(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

size_t Sampler::best_reaching(double target) {
  // A sorted head growing 4× at a time while it is short (a peaked row ends there), then selection
  // by halves instead of a sort (a full sort of a 250K vocabulary costs ~15 ms a token): [0, lo)
  // holds the lo best candidates, of total probability `before`; the answer lies in [lo, hi).
  auto at = [&](size_t i) { return candidates_.begin() + static_cast<std::ptrdiff_t>(i); };
  size_t lo = 0, hi = candidates_.size();
  double before = 0.0;
  for (size_t head = 256; lo < hi && (lo == 0 || head <= hi / 16); head *= 4) {
    const size_t end = std::min(head, hi);
    std::partial_sort(at(lo), at(end), at(hi), more_likely);
    for (size_t i = lo; i < end; ++i) {
      before += candidates_[i].first;
      if (before >= target) return i + 1;
    }
    lo = end;
  }
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), more_likely);
    double mass = 0.0;
    for (size_t i = lo; i < mid; ++i) mass += candidates_[i].first;
    if (before + mass >= target) {
      hi = mid;
    } else {
      before += mass;
      lo = mid;
    }
  }
  std::sort(at(lo), at(hi), more_likely);
  for (size_t i = lo; i < hi; ++i) {
    before += candidates_[i].first;
    if (before >= target) return i + 1;
  }
  return hi;  // rounding left the target above the total: every candidate up to hi
}

int32_t Sampler::draw() {
  check(!candidates_.empty(), ErrorKind::kInvalidInput, "every token was masked out");
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < candidates_.size()) {
    // A heap of k for the usual small k; selection by halves for a large one.
    const auto kth = candidates_.begin() + params_.top_k;
    if (params_.top_k <= 4096) {
      std::partial_sort(candidates_.begin(), kth, candidates_.end(), more_likely);
    } else {
      std::nth_element(candidates_.begin(), kth - 1, candidates_.end(), more_likely);
    }
    candidates_.resize(static_cast<size_t>(params_.top_k));
  }
  // Softmax over the kept candidates.
  float max_logit = candidates_[0].first;
  for (const auto& c : candidates_) max_logit = std::max(max_logit, c.first);
  double total = 0.0;
  for (auto& c : candidates_) {
    // 1 at the maximum, so +inf logits share the draw (exp(inf − inf) would be NaN), as on a device.
    c.first = c.first == max_logit ? 1.0f : std::exp(c.first - max_logit);
    total += c.first;
  }
  float best = 0.0f;
  for (auto& c : candidates_) {
    c.first = static_cast<float>(c.first / total);
    best = std::max(best, c.first);
  }
  // Probabilities keep the logits' order, so "most likely" is unchanged.
  const bool truncated = params_.top_k > 0 || params_.top_p < 1.0f || params_.min_p > 0.0f;
  if (params_.top_p < 1.0f) candidates_.resize(std::max<size_t>(best_reaching(params_.top_p), 1));
  if (params_.min_p > 0.0f) {
    const float threshold = params_.min_p * best;  // the best candidate always stays (min_p ≤ 1)
    std::erase_if(candidates_, [&](const auto& c) { return c.first < threshold; });
  }
  // The pick walks the kept candidates in id order (as backend::sample_row does on a device, where
  // that order needs no sort): back into it if a cut reordered them.
  if (truncated)
    std::sort(candidates_.begin(), candidates_.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  double mass = 0.0;
  for (const auto& c : candidates_) mass += c.first;
  std::uniform_real_distribution<double> uniform(0.0, mass);
  const double r = uniform(rng_);
  double run = 0.0;
  for (const auto& c : candidates_)
    if ((run += c.first) >= r) return c.second;
  return candidates_.back().second;  // not reached: run ends at mass > r
}

}  // namespace strata::runtime
