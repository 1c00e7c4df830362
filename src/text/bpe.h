// BpeModel: byte-pair encoding of one pre-tokenized word into ids. Two ways to rank merges share
// one merge loop: Hugging Face BPE (an explicit merges list; lower rank merges first) and
// SentencePiece/llama.cpp SPM (merge the adjacent pair whose concatenation is the vocabulary
// token with the highest score). Unknown characters become <0xNN> byte tokens (byte_fallback) or
// the unk token. Results are cached per word, bounded, safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/hash_index.h"

namespace strata::text {

struct BpeOptions {
  std::optional<std::string> unk_token;
  bool fuse_unk = false;       // consecutive unknown characters become one unk token
  bool byte_fallback = false;  // unknown characters become their <0xNN> byte tokens
  bool ignore_merges = false;  // a word that is itself a vocabulary token is emitted whole
  std::string continuing_subword_prefix;  // e.g. "##": spelled on every symbol but the first
  std::string end_of_word_suffix;         // e.g. "</w>": spelled on the last symbol
};

class WordCache;

class BpeModel {
 public:
  // vocab: id -> piece (empty for unused ids). merges: pairs of pieces, highest priority first.
  // Merges naming a piece that is not in the vocabulary are ignored (they can never apply).
  static std::unique_ptr<BpeModel> from_merges(
      std::vector<std::string> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);
  // scores[id]: merge priority of the token (higher first); mergeable[id]: whether a merge may
  // produce the token (false for control, byte and unknown tokens).
  static std::unique_ptr<BpeModel> from_scores(std::vector<std::string> vocab,
                                               const std::vector<float>& scores,
                                               std::vector<bool> mergeable, BpeOptions options);
  ~BpeModel();

  // Appends the ids of `word` to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_id(std::string_view piece) const;
  const std::vector<std::string>& pieces() const { return vocab_; }
  int32_t size() const { return static_cast<int32_t>(vocab_.size()); }

 private:
  struct Symbol;

  BpeModel(std::vector<std::string> vocab, BpeOptions options);
  void tokenize_uncached(std::string_view word, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const;
  int32_t find(std::string_view piece) const { return index_.find(piece, vocab_); }
  int32_t find_char(std::string_view ch) const;
  const MergeTable::Merge* merge_for(std::string_view word, const Symbol& left, const Symbol& right,
                                     MergeTable::Merge& scratch) const;
  void append_bytes_or_unk(std::string_view bytes, std::vector<int32_t>& out) const;

  std::vector<std::string> vocab_;
  PieceIndex index_;
  std::vector<int32_t> small_char_ids_;  // code point (< 0x800) -> id of that one character
  BpeOptions options_;
  bool affixes_ = false;
  int32_t unk_id_ = -1;
  int32_t byte_ids_[256];  // <0xNN> token ids, -1 when absent

  bool use_scores_ = false;
  MergeTable merges_;                 // (left id, right id) -> merge, for merge ranking
  std::vector<uint32_t> score_rank_;  // id -> rank (0 = highest score), for score ranking
  std::vector<bool> mergeable_;

  std::unique_ptr<WordCache> cache_;
};

}  // namespace strata::text
