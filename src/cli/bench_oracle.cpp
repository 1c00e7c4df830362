// The forced-acceptance drafter: one hashed draw per generated position.
#include "cli/bench_oracle.h"

#include <utility>

namespace strata::cli {

namespace {

// SplitMix64's finalizer: a well-mixed 64-bit value of any input.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

OracleDrafter::OracleDrafter(size_t prompt_len, std::vector<int32_t> recorded, double acceptance,
                             uint64_t seed, int64_t vocab, runtime::Drafter* inner)
    : prompt_len_(prompt_len),
      recorded_(std::move(recorded)),
      acceptance_(acceptance),
      seed_(seed),
      vocab_(vocab),
      inner_(inner) {}

bool OracleDrafter::right_at(size_t i) const {
  const double u = static_cast<double>(mix(mix(seed_) ^ i) >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  return u < acceptance_;
}

void OracleDrafter::propose(std::span<const int32_t> history, int64_t max,
                            std::vector<int32_t>& out) {
  const Clock::time_point start = Clock::now();
  if (calls_ > 0) gaps_.push_back(seconds_between(last_end_, start));
  ++calls_;
  if (inner_ != nullptr) {
    inner_->propose(history, max, scratch_);
    inner_seconds_ += seconds_between(start, Clock::now());
  }
  out.clear();
  // The target's next token is recorded_[emitted]: the first draft is right when it is that one.
  const size_t emitted = history.size() - prompt_len_;
  for (size_t i = emitted; static_cast<int64_t>(out.size()) < max && i < recorded_.size(); ++i)
    out.push_back(right_at(i) ? recorded_[i] : static_cast<int32_t>((recorded_[i] + 1) % vocab_));
  proposed_ += static_cast<int64_t>(out.size());
  last_end_ = Clock::now();
}

}  // namespace strata::cli
