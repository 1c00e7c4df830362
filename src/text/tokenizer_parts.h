// TokenizerParts: the pipeline stages and vocabulary facts a loader (tokenizer.json or GGUF)
// assembles and hands to Tokenizer's constructor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/post_processor.h"
#include "text/pre_tokenizer.h"

namespace strata::text {

// Lets an unordered_map<std::string, ...> be searched by string_view.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct TokenizerParts {
  std::unique_ptr<Normalizer> normalizer;         // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;    // may be null: the whole text is one word
  std::unique_ptr<BpeModel> model;                // required
  std::unique_ptr<Decoder> decoder;               // may be null: pieces joined with spaces
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  std::vector<AddedToken> added_tokens;
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
  std::string chat_template;

  // Filled in by Tokenizer's constructor.
  AddedTokenMatcher raw_matcher;           // added tokens matched in the raw input
  AddedTokenMatcher normalized_matcher;    // added tokens matched after normalization
  std::vector<const std::string*> pieces;  // id -> piece, in the model or added_tokens
  std::vector<uint8_t> flags;              // id -> kExists | kSpecial
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>>
      added_ids;  // added token content -> id
  bool adds_bos = false;
};

}  // namespace strata::text
