// Stop strings (OpenAI's `stop`): watches generated text as it streams and ends generation at the
// first occurrence of any stop string. Text that could be the start of a stop string is held back,
// so stop text never reaches the client, also when it is split across tokens.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace strata::control {

class StopStringMatcher {
 public:
  // Empty strings in `stops` are ignored. Up to any number of stops; matching is byte-exact.
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now (never contains, or ends in part of, a stop)
    bool stopped = false;  // a stop string was found: end generation, `text` is the last text
    int stop_index = -1;   // which entry of `stops` matched (the earliest-starting one)
  };

  // Feeds the next piece of generated text. After a stop, further pushes return empty results.
  Result push(std::string_view piece);
  // Generation ended without a stop: returns the text still held back.
  std::string flush();

  bool stopped() const { return stopped_; }
  int stop_index() const { return stop_index_; }
  const std::string& matched() const;  // the stop string that matched ("" when none)
  bool empty() const { return stops_.empty(); }

 private:
  size_t held_back_length() const;  // longest tail of held_ that begins some stop string

  std::vector<std::string> stops_;
  std::string held_;  // text not yet emitted
  bool stopped_ = false;
  int stop_index_ = -1;
};

}  // namespace strata::control
