// The drafter of strata bench --speculative's forced-acceptance sweep: random weights never agree
// with a real draft, so the bench records the target's own greedy tokens first, and this drafter
// proposes, at each position, the recorded token with probability `acceptance` and another
// otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/speculative.h"

namespace strata::cli {

class OracleDrafter final : public runtime::Drafter {
 public:
  // recorded: the target's greedy tokens after a prompt of prompt_len tokens. inner: a real drafter
  // (a draft model) whose proposals are computed, so that its cost is paid, and then discarded;
  // null: free drafts. Not owned.
  OracleDrafter(size_t prompt_len, std::vector<int32_t> recorded, double acceptance, uint64_t seed,
                int64_t vocab, runtime::Drafter* inner = nullptr);

  // Always proposes `max` tokens (fewer only past the recorded ones), so that every verify step of
  // a run has the same length; the draws go on after a wrong token, though no draft after it can
  // be accepted.
  void propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) override;

  // Whether the draft for generated token i (0-based) is the recorded one: a hash of the seed and
  // i, so every step that drafts position i draws the same, whatever the draft length.
  bool right_at(size_t i) const;

  int64_t calls() const { return calls_; }
  int64_t proposed() const { return proposed_; }
  double inner_seconds() const { return inner_seconds_; }  // spent in the inner drafter
  // Seconds from the end of each proposal to the start of the next: the verify step between them
  // (the forward of the token and its drafts, the picks read back, the engine's host work).
  const std::vector<double>& gaps() const { return gaps_; }

 private:
  using Clock = std::chrono::steady_clock;

  size_t prompt_len_;
  std::vector<int32_t> recorded_;
  double acceptance_;
  uint64_t seed_;
  int64_t vocab_;
  runtime::Drafter* inner_;
  std::vector<int32_t> scratch_;  // the inner drafter's proposals, discarded
  int64_t calls_ = 0, proposed_ = 0;
  double inner_seconds_ = 0;
  std::vector<double> gaps_;
  Clock::time_point last_end_;
};

}  // namespace strata::cli
