// Added tokens (tokenizer.json "added_tokens"): strings matched literally in the input before the
// model sees it, longest match first, with the lstrip/rstrip/single_word rules of Hugging Face's
// AddedVocabulary. One matcher holds the tokens matched on raw text, another those matched after
// normalization.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/pieces.h"

namespace strata::text {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // dropped by decode(skip_special_tokens)
  bool normalized = false;   // matched in normalized text rather than the raw input
  bool lstrip = false;       // also swallows the whitespace before it
  bool rstrip = false;       // also swallows the whitespace after it
  bool single_word = false;  // only matches when not inside a word
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns` are the strings to find (a token's content, or its normalized form) for `tokens`.
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  bool empty() const { return tokens_.empty(); }

  // Splits piece.text into runs of text and matched tokens, appended to `out` in order.
  void split(const Piece& piece, Pieces& out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;  // index into tokens_ when a pattern ends here
  };
  int32_t child(int32_t node, uint8_t byte) const;
  // Longest pattern starting at text[pos]: its token index and end, or {-1, pos}.
  std::pair<int32_t, size_t> longest_match(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
};

}  // namespace strata::text
