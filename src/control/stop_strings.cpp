// StopStringMatcher: searches held-back text plus each new piece for the earliest stop string, and
// holds back the longest tail that could still grow into one.
#include "control/stop_strings.h"

#include <algorithm>
#include <utility>

namespace strata::control {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view piece) {
  Result result;
  if (stopped_) return result;
  held_.append(piece);
  // The earliest start wins: text before it is all the client may see.
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = held_.find(stops_[i]);
    if (at < best) {
      best = at;
      stop_index_ = static_cast<int>(i);
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    result.stopped = true;
    result.stop_index = stop_index_;
    result.text = held_.substr(0, best);
    held_.clear();
    return result;
  }
  const size_t keep = held_back_length();
  result.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return result;
}

std::string StopStringMatcher::flush() {
  if (stopped_) return "";
  return std::exchange(held_, std::string());
}

const std::string& StopStringMatcher::matched() const {
  static const std::string kNone;
  return stop_index_ >= 0 ? stops_[static_cast<size_t>(stop_index_)] : kNone;
}

size_t StopStringMatcher::held_back_length() const {
  // No stop occurs in held_, so only a proper prefix of a stop can end it.
  size_t longest = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, held_.size());
    for (size_t len = max_len; len > longest; --len) {
      if (std::string_view(held_).substr(held_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

}  // namespace strata::control
