// LoopDetector: notices when generation falls into a loop, i.e. when the last `repeats` blocks of
// some period p (min_period ≤ p ≤ max_period) are equal or nearly so (at most a `tolerance`
// fraction of positions differ from the token p earlier). Per token it does one comparison and one
// counter update per period: constant work, independent of how long the text is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::control {

struct LoopConfig {
  int min_period = 1;
  int max_period = 128;
  int repeats = 3;         // blocks in a row (the first one plus repeats - 1 copies)
  int min_span = 16;       // tokens the repeated stretch must cover (short periods need more copies)
  double tolerance = 0.1;  // fraction of positions in the copies that may differ (near repeats)
  int exact_below = 8;     // periods shorter than this must repeat exactly
};

struct LoopMatch {
  int period = 0;
  int copies = 0;  // repeats of the block found (≥ config.repeats)
};

class LoopDetector {
 public:
  explicit LoopDetector(LoopConfig config = {});

  // Feeds the next token; true when the text now ends in a loop (see last_match()).
  bool push(int32_t token);
  void reset();
  const LoopMatch& last_match() const { return match_; }
  const LoopConfig& config() const { return config_; }

 private:
  int32_t at(int64_t pos) const { return ring_[static_cast<size_t>(pos) & mask_]; }

  LoopConfig config_;
  std::vector<int32_t> ring_;        // the last tokens (enough for the longest window plus its period)
  size_t mask_ = 0;                  // ring_.size() - 1 (a power of two)
  std::vector<int32_t> mismatches_;  // per period: differing positions inside its window
  int64_t count_ = 0;                // tokens seen since reset
  LoopMatch match_;
};

}  // namespace strata::control
