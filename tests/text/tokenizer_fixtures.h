// Shared helpers for the tokenizer tests: load each real tokenizer once per test binary, and
// read the reference cases that come with them.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace strata::text::testing {

// The tokenizer in ../shared/fixtures/tokenizers/<name>/ (loaded once, then shared).
inline const Tokenizer& shared_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) slot = Tokenizer::load(test::shared_fixture("tokenizers/" + name));
  return *slot;
}

struct TokenizerCase {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
  bool add_special_tokens = false;
};

inline std::vector<TokenizerCase> read_cases(const std::string& path) {
  const Json cases = read_json_file(path);
  std::vector<TokenizerCase> out;
  for (const Json& c : cases) {
    TokenizerCase tc;
    tc.text = c.at("text").get<std::string>();
    tc.ids = c.at("ids").get<std::vector<int32_t>>();
    tc.decoded = c.at("decoded").get<std::string>();
    tc.add_special_tokens = c.value("add_special_tokens", false);
    out.push_back(std::move(tc));
  }
  return out;
}

// Printable form of a string for failure messages (escapes control and non-ASCII bytes).
inline std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace strata::text::testing
