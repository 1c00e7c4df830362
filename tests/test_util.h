// Paths to test data: the project's own goldens (tests/fixtures) and the shared real-world fixtures
// (../shared/fixtures, or $STRATA_SHARED_FIXTURES where the checkout sits elsewhere).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.h"

namespace strata::test {

inline std::string shared_fixture(const std::string& rel) {
  const char* env = std::getenv("STRATA_SHARED_FIXTURES");
  return std::string(env != nullptr ? env : STRATA_SHARED_FIXTURES_DEFAULT) + "/" + rel;
}

inline std::string test_fixture(const std::string& rel) { return std::string(STRATA_TEST_FIXTURES) + "/" + rel; }

// A fresh scratch directory under the build tree for files a test writes.
std::string scratch_dir(const std::string& name);

// Writes bytes to path without fsync (corruption tests write thousands of small files).
inline std::string write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw std::runtime_error("cannot write " + path);
  return path;
}

// Runs fn, expecting strata::Error of `kind` whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, ErrorKind kind, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message lacks '" << part << "': " << e.what();
    }
  }
}

}  // namespace strata::test
