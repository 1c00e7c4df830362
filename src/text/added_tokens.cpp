// Leftmost-longest literal matching over a byte trie, then Hugging Face's adjustments: a
// single_word token inside a word is skipped, lstrip/rstrip widen the match over whitespace.
#include "text/added_tokens.h"

#include <algorithm>

#include "text/unicode.h"

namespace strata::text {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)) {
  trie_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& pattern = patterns[t];
    if (pattern.empty()) continue;
    int32_t node = 0;
    for (char c : pattern) {
      const auto byte = static_cast<uint8_t>(c);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(trie_.size());
        trie_.emplace_back();
        auto& children = trie_[node].children;
        children.insert(
            std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0})),
            {byte, next});
      }
      node = next;
    }
    trie_[node].token = static_cast<int32_t>(t);  // a later duplicate wins, as in a map
    first_byte_[static_cast<uint8_t>(pattern[0])] = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  const auto& children = trie_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0}));
  return it != children.end() && it->first == byte ? it->second : -1;
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_match(std::string_view text,
                                                            size_t pos) const {
  int32_t node = 0;
  std::pair<int32_t, size_t> best{-1, pos};
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    if (trie_[node].token >= 0) best = {trie_[node].token, i + 1};
  }
  return best;
}

namespace {

// The code point that ends at text[end] (exclusive), for word-boundary tests.
char32_t code_point_before(std::string_view text, size_t end) {
  size_t begin = end - 1;
  while (begin > 0 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
  return next_code_point(text, begin);
}

}  // namespace

void AddedTokenMatcher::split(const Piece& piece, Pieces& out) const {
  const std::string_view text = piece.text;
  size_t emitted = 0;  // text before this offset has been emitted
  size_t pos = 0;
  auto emit_text = [&](size_t begin, size_t end) {
    if (begin >= end) return;
    Piece p;
    p.text.assign(text.substr(begin, end - begin));
    p.at_start = piece.at_start && begin == 0;
    out.push_back(std::move(p));
  };
  while (pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [index, match_end] = longest_match(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t begin = pos, end = match_end;
    pos = match_end;
    if (token.single_word) {
      const bool word_before = begin > 0 && is_word_char(code_point_before(text, begin));
      size_t after = end;
      const bool word_after = end < text.size() && is_word_char(next_code_point(text, after));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      while (begin > emitted) {
        size_t at = begin - 1;
        while (at > 0 && (static_cast<uint8_t>(text[at]) & 0xC0) == 0x80) --at;
        size_t probe = at;
        if (!is_whitespace(next_code_point(text, probe))) break;
        begin = at;
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        size_t probe = end;
        if (!is_whitespace(next_code_point(text, probe))) break;
        end = probe;
      }
      pos = end;
    }
    emit_text(emitted, begin);
    Piece p;
    p.text.assign(text.substr(begin, end - begin));
    p.token = token.id;
    out.push_back(std::move(p));
    emitted = end;
  }
  emit_text(emitted, text.size());
}

}  // namespace strata::text
