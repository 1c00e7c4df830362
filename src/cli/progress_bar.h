// A download's progress on stderr: a bar redrawn in place on a terminal while bytes are to be
// downloaded; elsewhere (a log, a pipe) one line per file in place, or nothing.
#pragma once

#include <chrono>
#include <cstdio>

#include "hub/pull.h"

namespace strata::cli {

class ProgressBar {
 public:
  // `lines`: where stderr is no terminal, a line per finished file.
  explicit ProgressBar(bool lines);
  ~ProgressBar();  // ends the bar's line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(const hub::PullProgress& p);
  // The callback for hub::pull; it refers to this bar.
  hub::ProgressCallback callback();

 private:
  bool terminal_;
  bool lines_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace strata::cli
