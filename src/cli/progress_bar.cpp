// The download bar: "org/name  3/8 files  [#######.........]  41%  1.2 GiB / 2.9 GiB  48.1 MiB/s".
#include "cli/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "cli/human_bytes.h"
#include "core/error.h"

namespace strata::cli {

ProgressBar::ProgressBar(bool lines) : terminal_(::isatty(STDERR_FILENO) != 0), lines_(lines) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fputs("\n", stderr);
}

void ProgressBar::update(const hub::PullProgress& p) {
  if (!terminal_) {
    if (lines_ && p.file_finished)
      std::fprintf(stderr, "%s: %s (%zu/%zu)\n", p.repo.c_str(), p.file.c_str(), p.files_done,
                   p.files_total);
    return;
  }
  if (p.bytes_total == 0) return;  // nothing to download (yet): no bar
  constexpr int kWidth = 24;
  const double fraction = std::min(1.0, static_cast<double>(p.bytes_done) / p.bytes_total);
  const int filled = static_cast<int>(fraction * kWidth);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string rate =
      seconds > 0.5 ? human_bytes(static_cast<uint64_t>(p.bytes_done / seconds)) + "/s" : "";
  const std::string line =
      fmt::format("{}  {}/{} files  [{}{}]  {:3.0f}%  {} / {}  {}", p.repo, p.files_done,
                  p.files_total, std::string(filled, '#'), std::string(kWidth - filled, '.'),
                  fraction * 100, human_bytes(p.bytes_done), human_bytes(p.bytes_total), rate);
  std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

hub::ProgressCallback ProgressBar::callback() {
  return [this](const hub::PullProgress& p) { update(p); };
}

}  // namespace strata::cli
