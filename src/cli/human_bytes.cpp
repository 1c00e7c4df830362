// Binary units (KiB = 1024 B) with one decimal; plain bytes need none.
#include "cli/human_bytes.h"

#include <fmt/format.h>

namespace strata::cli {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto b = static_cast<double>(bytes);
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", b, units[u]);
}

}  // namespace strata::cli
