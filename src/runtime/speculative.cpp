// Drafters and the verify step's per-position state.
#include "runtime/speculative.h"

#include <algorithm>

#include "backend/ops.h"
#include "core/error.h"

namespace strata::runtime {

void NgramDrafter::propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) {
  out.clear();
  const auto n = static_cast<int64_t>(history.size());
  if (max <= 0) return;
  // Longest suffix first; for each length the most recent earlier match that has a token after it.
  for (int64_t len = std::min(max_ngram_, n - 1); len >= min_ngram_; --len) {
    const std::span<const int32_t> suffix = history.subspan(static_cast<size_t>(n - len));
    for (int64_t at = n - len - 1; at >= 0; --at) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + at)) continue;
      const int64_t from = at + len, to = std::min(n, from + max);
      out.assign(history.begin() + from, history.begin() + to);
      return;
    }
  }
}

ModelDrafter::ModelDrafter(model::Model& draft, int64_t capacity)
    : model_(draft), seq_(draft, capacity), synced_(seq_), logits_(DType::kF32, {draft.config().vocab_size}) {}

int32_t ModelDrafter::pick() const {
  const float* v = logits_.as<float>();
  return static_cast<int32_t>(std::max_element(v, v + logits_.numel()) - v);
}

void ModelDrafter::propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) {
  out.clear();
  const auto n = static_cast<int64_t>(history.size());
  max = std::min(max, seq_.capacity() - n);
  if (max <= 0 || n <= agreed_) return;
  if (agreed_ >= 0) synced_.restore(seq_);  // forget the drafts run after the agreed point
  const int64_t from = std::max<int64_t>(agreed_, 0);
  // The tokens since, in pieces a prefill takes (the first call: the whole prompt).
  constexpr int64_t kPiece = 512;
  for (int64_t at = from; at < n; at += kPiece)
    seq_.forward(model_, history.subspan(static_cast<size_t>(at), static_cast<size_t>(std::min(kPiece, n - at))),
                 logits_.view(), false);
  synced_.take(seq_);
  agreed_ = n;
  for (int64_t j = 0; j < max; ++j) {
    const int32_t d = pick();
    out.push_back(d);
    if (j + 1 < max) seq_.forward(model_, std::span<const int32_t>(&d, 1), logits_.view(), false);
  }
}

void StepCosts::add(int64_t tokens, double seconds) {
  if (tokens < 1 || !(seconds > 0.0)) return;
  if (seconds_.size() <= static_cast<size_t>(tokens)) seconds_.resize(static_cast<size_t>(tokens) + 1, 0.0);
  double& s = seconds_[static_cast<size_t>(tokens)];
  // A step that waited for something else (the host busy, a page fault) counts as at most 3 steps.
  s = s == 0.0 ? seconds : 0.9 * s + 0.1 * std::min(seconds, 3.0 * s);
}

double StepCosts::ratio(int64_t tokens) const {
  auto at = [&](int64_t t) { return t < static_cast<int64_t>(seconds_.size()) ? seconds_[static_cast<size_t>(t)] : 0.0; };
  const double plain = at(1);
  if (tokens <= 1 || plain == 0.0) return 1.0 + 0.05 * static_cast<double>(tokens - 1);
  if (at(tokens) > 0.0) return at(tokens) / plain;
  int64_t below = 1, above = 0;
  for (int64_t t = 2; t < static_cast<int64_t>(seconds_.size()); ++t)
    if (at(t) > 0.0) {
      if (t < tokens) below = t;
      if (t > tokens && above == 0) above = t;
    }
  const double low = at(below) / plain;
  if (above > 0) {
    const double high = at(above) / plain;
    return low + (high - low) * static_cast<double>(tokens - below) / static_cast<double>(above - below);
  }
  const double slope = below > 1 ? (low - 1.0) / static_cast<double>(below - 1) : 0.05;
  return low + slope * static_cast<double>(tokens - below);
}

int64_t DraftLength::choose(const StepCosts& costs, int64_t others) const {
  const double a = acceptance(), n = static_cast<double>(std::max<int64_t>(others, 0));
  int64_t best = 0;
  double best_rate = n + 1.0, tokens = 1.0, power = 1.0;  // plain: n + 1 tokens in one step's time
  for (int64_t k = 1; k <= max_; ++k) {
    power *= a;
    tokens += power;
    const double rate = (n + tokens) / ((others > 0 ? 1.0 : 0.0) + costs.ratio(k + 1));
    if (rate > best_rate * (best == 0 ? kMargin : 1.0)) best = k, best_rate = rate;
  }
  return best;
}

void DraftLength::verified(int64_t accepted, bool refused) {
  accepted_ = kDecay * accepted_ + static_cast<double>(accepted);
  decided_ = kDecay * decided_ + static_cast<double>(accepted + (refused ? 1 : 0));
}

void DraftLength::plain_step() {
  accepted_ *= kAge;
  decided_ *= kAge;
}

VerifySlots::VerifySlots(const Sequence& seq, int64_t max_tokens) {
  bool recurrent = false;
  for (const model::StateBuffer& b : seq.state().buffers) recurrent = recurrent || !b.token_indexed;
  if (!recurrent) return;  // attention-only: dropping KV rows is all a rejection needs
  for (int64_t t = 0; t + 1 < max_tokens; ++t) {
    model::ModelState slot;
    for (const model::StateBuffer& b : seq.state().buffers) {
      model::StateBuffer copy{b.name, {}, b.token_indexed};
      if (!b.token_indexed) copy.tensor = backend::Buffer(b.tensor.device(), b.tensor.dtype(), b.tensor.shape());
      slot.buffers.push_back(std::move(copy));
    }
    slots_.push_back(std::move(slot));
  }
}

void VerifySlots::forward(model::Model& model, Sequence& seq, std::span<const int32_t> tokens, const Tensor& logits) {
  check(model.fingerprint() == seq.fingerprint(), ErrorKind::kInvalidInput, "this sequence belongs to another model");
  check(!seq.pending_, ErrorKind::kInternal, "a pending token's id is still unknown");
  const auto T = static_cast<int64_t>(tokens.size());
  check(T >= 1 && (slots_.empty() || T - 1 <= static_cast<int64_t>(slots_.size())), ErrorKind::kInternal,
        "a verify step of {} tokens; the slots hold {} positions", T, slots_.size() + 1);
  const int64_t start = seq.n_tokens();
  // An attention-only model's states have no recurrent buffer to fill: it is given no slots.
  model.forward_verify(tokens, seq.state_,
                       slots_.empty() ? std::span<const model::ModelState>() : std::span<const model::ModelState>(slots_),
                       logits);
  seq.tokens_.insert(seq.tokens_.end(), tokens.begin(), tokens.end());
  start_ = start;
  tokens_ = T;
}

void VerifySlots::keep(Sequence& seq, int64_t n) {
  check(start_ >= 0 && seq.n_tokens() == start_ + tokens_, ErrorKind::kInternal,
        "keep: the sequence is not where the last verify step left it");
  check(n >= 1 && n <= tokens_, ErrorKind::kInternal, "keep {} of a verify step's {} tokens", n, tokens_);
  if (n < tokens_) {
    if (!slots_.empty()) {
      const model::ModelState& slot = slots_[static_cast<size_t>(n - 1)];
      for (size_t b = 0; b < slot.buffers.size(); ++b)
        if (!slot.buffers[b].token_indexed)
          backend::copy(slot.buffers[b].tensor.view(), seq.state_.buffers[b].tensor.view());
    }
    seq.rewind_to(start_ + n);
  }
  start_ = -1;
}

}  // namespace strata::runtime
