// Pre-tokenizers (tokenizer.json "pre_tokenizer"): split each text piece into the words the model
// tokenizes independently, and rewrite them (byte-level mapping, Metaspace "▁"). Split (regex or
// literal), ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation,
// BertPreTokenizer and Sequence.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/json.h"
#include "text/pieces.h"

namespace strata::text {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and rewrites) one span of text, passing each resulting word to `sink` in order.
  // at_start: the span begins at offset 0 of the input.
  virtual void pre_tokenize(std::string_view text, bool at_start, WordSink sink) const = 0;
};

// Builds the pre-tokenizer a tokenizer.json "pre_tokenizer" object describes; nullptr for null.
// Throws Error(kInvalidInput) for a malformed spec, kUnsupported for an unknown type.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& spec);

// Building blocks for GGUF tokenizers: an Isolated regex split followed by the byte-level map.
std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(const std::string& split_regex);

// The GPT-2 pre-tokenizer regex (ByteLevel use_regex, GGUF "gpt-2"/"default").
extern const char* const kGpt2SplitRegex;

}  // namespace strata::text
