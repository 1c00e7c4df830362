// The units that flow through the tokenizer: Piece, a span of the input after added-token
// matching (text to tokenize, or one added token), and the words that pre-tokenizers pass on
// through a WordSink. SpanSplitter applies the split rules (Hugging Face's
// SplitDelimiterBehavior) that every splitting stage shares, without building lists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/function_ref.h"
#include "text/regex.h"

namespace strata::text {

struct Piece {
  std::string text;
  int32_t token = -1;     // >= 0: an added token, left alone by later stages
  bool at_start = false;  // begins at offset 0 of the input (Metaspace prepend_scheme "first")
};
using Pieces = std::vector<Piece>;

// Receives one word: a view that is valid only during the call, and whether the word begins at
// offset 0 of the input.
using WordSink = FunctionRef<void(std::string_view word, bool at_start)>;

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `text` around matches fed in order (add_match), passing each non-empty part to `sink`
// as soon as it is complete; finish() flushes the rest. `invert` swaps the roles of the matches
// and the text between them. Only a part that starts at offset 0 inherits `at_start`.
class SpanSplitter {
 public:
  SpanSplitter(std::string_view text, bool at_start, SplitBehavior behavior, bool invert,
               WordSink sink)
      : text_(text), at_start_(at_start), behavior_(behavior), invert_(invert), sink_(sink) {}

  void add_match(size_t begin, size_t end);
  void finish();

 private:
  void add_span(size_t begin, size_t end, bool is_match);
  void emit(size_t begin, size_t end);

  std::string_view text_;
  bool at_start_;
  SplitBehavior behavior_;
  bool invert_;
  WordSink sink_;
  size_t consumed_ = 0;       // text before this offset has been added as spans
  bool has_pending_ = false;  // a part that a later span may still extend
  size_t pending_begin_ = 0, pending_end_ = 0;
  bool pending_match_ = false;
};

}  // namespace strata::text
