// Paths to test data: the project's own goldens (tests/fixtures) and the shared real-world fixtures
// (../shared/fixtures, or $STRATA_SHARED_FIXTURES where the checkout sits elsewhere).
#pragma once

#include <cstdlib>
#include <string>

namespace strata::test {

inline std::string shared_fixture(const std::string& rel) {
  const char* env = std::getenv("STRATA_SHARED_FIXTURES");
  return std::string(env != nullptr ? env : STRATA_SHARED_FIXTURES_DEFAULT) + "/" + rel;
}

inline std::string test_fixture(const std::string& rel) { return std::string(STRATA_TEST_FIXTURES) + "/" + rel; }

// A fresh scratch directory under the build tree for files a test writes.
std::string scratch_dir(const std::string& name);

}  // namespace strata::test
