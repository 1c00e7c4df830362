// Scratch directories for tests.
#include "test_util.h"

#include <filesystem>

namespace strata::test {

std::string scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::path(STRATA_BINARY_DIR) / "test-scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace strata::test
