// LoopDetector implementation. For period p the window is the last W(p) positions, where the copies
// of the block are compared with the block one period earlier: W(p) = max(repeats - 1, copies that
// min_span needs) · p. mismatches_[p] counts positions i in the window with token[i] ≠ token[i - p];
// each push adds the newest position and drops the one leaving the window, recomputed from the ring.
#include "control/loop_detector.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace strata::control {

namespace {

// Copies of the block that the window of period p compares (each against the one before it).
int64_t compared_copies(const LoopConfig& c, int p) {
  const int64_t for_span = (c.min_span + p - 1) / p;  // blocks needed to cover min_span
  return std::max<int64_t>(c.repeats, for_span) - 1;
}

}  // namespace

LoopDetector::LoopDetector(LoopConfig config) : config_(config) {
  check(config_.min_period >= 1 && config_.max_period >= config_.min_period && config_.repeats >= 2 &&
            config_.tolerance >= 0.0 && config_.tolerance < 0.5,
        ErrorKind::kInvalidInput, "loop detector: periods {}..{}, repeats {}, tolerance {} are not valid",
        config_.min_period, config_.max_period, config_.repeats, config_.tolerance);
  int64_t longest = 0;
  for (int p = config_.min_period; p <= config_.max_period; ++p)
    longest = std::max(longest, (compared_copies(config_, p) + 1) * p);
  size_t size = 1;
  while (size < static_cast<size_t>(longest + 1)) size *= 2;
  ring_.assign(size, 0);
  mask_ = size - 1;
  mismatches_.assign(static_cast<size_t>(config_.max_period + 1), 0);
}

void LoopDetector::reset() {
  count_ = 0;
  std::fill(mismatches_.begin(), mismatches_.end(), 0);
  match_ = {};
}

bool LoopDetector::push(int32_t token) {
  const int64_t i = count_++;
  ring_[static_cast<size_t>(i) & mask_] = token;
  bool found = false;
  for (int p = config_.min_period; p <= config_.max_period; ++p) {
    if (i < p) break;  // longer periods have no earlier block yet
    const int64_t window = compared_copies(config_, p) * p;
    mismatches_[p] += at(i) != at(i - p);
    const int64_t leaving = i - window;  // the position that just left the window
    if (leaving >= p) mismatches_[p] -= at(leaving) != at(leaving - p);
    if (found || i + 1 < window + p) continue;  // not enough text for all the copies yet
    const int64_t allowed =
        p < config_.exact_below ? 0 : static_cast<int64_t>(std::floor(config_.tolerance * static_cast<double>(window)));
    if (mismatches_[p] <= allowed) {
      match_ = {p, static_cast<int>(window / p + 1)};
      found = true;  // the shortest period wins; keep updating the other counters
    }
  }
  return found;
}

}  // namespace strata::control
