// The BPE merge loop (a priority queue of candidate pairs over a linked list of symbols), the
// two merge rankings, byte fallback, and the per-word cache.
#include "text/bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <queue>

#include "core/error.h"
#include "text/unicode.h"

namespace strata::text {

// A bounded word -> ids cache: a set-associative table of fixed 64-byte entries, so a lookup
// touches one cache line and nothing is allocated. Short words with few ids (nearly all words)
// are cached; a full set overwrites its ways in turn. Striped locks make it safe to share.
class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 30;
  static constexpr size_t kMaxIds = 7;

  WordCache() : entries_(kSets * kWays), next_way_(kSets, 0) {}

  static bool cacheable(std::string_view word) { return word.size() <= kMaxWordBytes; }

  bool lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) {
    const size_t set = hash & (kSets - 1);
    const auto tag = static_cast<uint32_t>(hash >> 32);
    std::lock_guard<std::mutex> lock(locks_[set % kLocks]);
    const Entry* ways = &entries_[set * kWays];
    for (size_t w = 0; w < kWays; ++w) {
      const Entry& e = ways[w];
      if (e.tag == tag && e.word_length == word.size() &&
          std::memcmp(e.word, word.data(), word.size()) == 0) {
        out.insert(out.end(), e.ids, e.ids + e.id_count);
        return true;
      }
    }
    return false;
  }

  void insert(std::string_view word, uint64_t hash, const int32_t* ids, size_t count) {
    if (count > kMaxIds || word.empty()) return;
    const size_t set = hash & (kSets - 1);
    std::lock_guard<std::mutex> lock(locks_[set % kLocks]);
    uint8_t& next = next_way_[set];
    Entry& e = entries_[set * kWays + next];
    next = static_cast<uint8_t>((next + 1) % kWays);
    e.tag = static_cast<uint32_t>(hash >> 32);
    e.word_length = static_cast<uint8_t>(word.size());
    e.id_count = static_cast<uint8_t>(count);
    std::memcpy(e.word, word.data(), word.size());
    std::copy(ids, ids + count, e.ids);
  }

 private:
  static constexpr size_t kSets = 8192;
  static constexpr size_t kWays = 4;
  static constexpr size_t kLocks = 64;
  struct Entry {
    uint32_t tag = 0;
    uint8_t word_length = 0;  // 0: empty
    uint8_t id_count = 0;
    char word[kMaxWordBytes];
    int32_t ids[kMaxIds];
  };
  static_assert(sizeof(Entry) == 64);
  std::vector<Entry> entries_;
  std::vector<uint8_t> next_way_;
  std::array<std::mutex, kLocks> locks_;
};

struct BpeModel::Symbol {
  int32_t id;      // -1: a character that is not a token (score ranking only)
  int32_t prev;    // index of the previous live symbol, -1 at the start
  int32_t next;    // index of the next live symbol, -1 at the end
  uint32_t begin;  // byte span in the word
  uint32_t len;    // 0 once merged into its left neighbour
};

BpeModel::BpeModel(std::vector<std::string> vocab, BpeOptions options)
    : vocab_(std::move(vocab)),
      index_(vocab_),
      options_(std::move(options)),
      cache_(new WordCache) {
  affixes_ = !options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty();
  if (options_.unk_token) {
    unk_id_ = find(*options_.unk_token);
    if (unk_id_ < 0) {
      fail(ErrorKind::kInvalidInput, "tokenizer: unk_token '{}' is not in the vocabulary",
           *options_.unk_token);
    }
  }
  for (int b = 0; b < 256; ++b) byte_ids_[b] = find(fmt::format("<0x{:02X}>", b));
  // Characters of one or two UTF-8 bytes (all byte-level characters among them) by table.
  small_char_ids_.assign(0x800, -1);
  std::string ch;
  for (char32_t cp = 0; cp < 0x800; ++cp) {
    ch.clear();
    append_utf8(ch, cp);
    small_char_ids_[cp] = find(ch);
  }
}

BpeModel::~BpeModel() = default;

std::unique_ptr<BpeModel> BpeModel::from_merges(
    std::vector<std::string> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    BpeOptions options) {
  std::unique_ptr<BpeModel> model(new BpeModel(std::move(vocab), std::move(options)));
  const std::string& prefix = model->options_.continuing_subword_prefix;
  model->merges_ = MergeTable(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t l = model->find(left);
    const int32_t r = model->find(right);
    if (l < 0 || r < 0) continue;
    // The right piece carries the continuation prefix, which the merged token spells once.
    const bool has_prefix = !prefix.empty() && right.compare(0, prefix.size(), prefix) == 0;
    joined.assign(left);
    joined.append(right, has_prefix ? prefix.size() : 0, std::string::npos);
    const int32_t merged = model->find(joined);
    if (merged < 0) continue;
    // A repeated pair keeps its last rank, as a map built from the list would.
    model->merges_.insert(l, r, {static_cast<uint32_t>(rank), merged});
  }
  return model;
}

std::unique_ptr<BpeModel> BpeModel::from_scores(std::vector<std::string> vocab,
                                                const std::vector<float>& scores,
                                                std::vector<bool> mergeable, BpeOptions options) {
  if (scores.size() != vocab.size() || mergeable.size() != vocab.size()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: {} tokens but {} scores", vocab.size(),
         scores.size());
  }
  std::unique_ptr<BpeModel> model(new BpeModel(std::move(vocab), std::move(options)));
  model->use_scores_ = true;
  model->mergeable_ = std::move(mergeable);
  // Dense rank of the scores, highest first: equal scores share a rank, so the leftmost pair
  // wins a tie, as in SentencePiece and llama.cpp.
  std::vector<float> distinct(scores);
  std::sort(distinct.begin(), distinct.end(), std::greater<float>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  model->score_rank_.resize(scores.size());
  for (size_t id = 0; id < scores.size(); ++id) {
    auto it = std::lower_bound(distinct.begin(), distinct.end(), scores[id], std::greater<float>());
    model->score_rank_[id] = static_cast<uint32_t>(it - distinct.begin());
  }
  return model;
}

std::optional<int32_t> BpeModel::token_id(std::string_view piece) const {
  const int32_t id = find(piece);
  if (id < 0) return std::nullopt;
  return id;
}

int32_t BpeModel::find_char(std::string_view ch) const {
  const auto lead = static_cast<uint8_t>(ch[0]);
  if (ch.size() == 1) return small_char_ids_[lead];
  if (ch.size() == 2 && lead >= 0xC0) {
    return small_char_ids_[((lead & 0x1F) << 6) | (static_cast<uint8_t>(ch[1]) & 0x3F)];
  }
  return find(ch);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const int32_t id = find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (!WordCache::cacheable(word)) {
    tokenize_uncached(word, out);
    return;
  }
  const uint64_t hash = hash_piece(word);
  if (cache_->lookup(word, hash, out)) return;
  const size_t first = out.size();
  tokenize_uncached(word, out);
  cache_->insert(word, hash, out.data() + first, out.size() - first);
}

void BpeModel::append_bytes_or_unk(std::string_view bytes, std::vector<int32_t>& out) const {
  bool all_bytes = options_.byte_fallback;
  for (size_t i = 0; all_bytes && i < bytes.size(); ++i) {
    all_bytes = byte_ids_[static_cast<uint8_t>(bytes[i])] >= 0;
  }
  if (all_bytes) {
    for (char c : bytes) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  } else if (unk_id_ >= 0) {
    out.push_back(unk_id_);
  }
}

void BpeModel::initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const {
  auto add = [&](int32_t id, size_t begin, size_t len) {
    symbols.push_back({id, -1, -1, static_cast<uint32_t>(begin), static_cast<uint32_t>(len)});
  };
  if (use_scores_) {  // every character is a symbol; unknown ones are resolved after merging
    size_t pos = 0;
    while (pos < word.size()) {
      const size_t begin = pos;
      pos += std::min(utf8_sequence_length(static_cast<uint8_t>(word[pos])), word.size() - pos);
      add(find_char(word.substr(begin, pos - begin)), begin, pos - begin);
    }
    return;
  }
  // Hugging Face BPE: characters that are not tokens become byte tokens or (fused) unk here.
  std::string spelled;
  int64_t pending_unk_begin = -1;
  size_t pending_unk_len = 0;
  auto flush_unk = [&] {
    if (pending_unk_begin >= 0)
      add(unk_id_, static_cast<size_t>(pending_unk_begin), pending_unk_len);
    pending_unk_begin = -1;
  };
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t begin = pos;
    pos += std::min(utf8_sequence_length(static_cast<uint8_t>(word[pos])), word.size() - pos);
    const std::string_view ch = word.substr(begin, pos - begin);
    std::string_view key = ch;
    int32_t id;
    if (affixes_) {
      spelled.clear();
      if (begin > 0) spelled += options_.continuing_subword_prefix;
      spelled += ch;
      if (pos == word.size()) spelled += options_.end_of_word_suffix;
      key = spelled;
      id = find(key);
    } else {
      id = find_char(ch);
    }
    if (id >= 0) {
      flush_unk();
      add(id, begin, ch.size());
      continue;
    }
    if (options_.byte_fallback) {
      bool all_bytes = true;
      for (char c : key) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all_bytes) {
        flush_unk();
        // The byte tokens share the character's span; give each a 1-byte slice of it.
        for (size_t i = 0; i < key.size(); ++i) {
          add(byte_ids_[static_cast<uint8_t>(key[i])], begin + std::min(i, ch.size() - 1), 1);
        }
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // no unk token: the character is dropped
    if (pending_unk_begin >= 0 && options_.fuse_unk) {
      pending_unk_len += ch.size();
    } else {
      flush_unk();
      pending_unk_begin = static_cast<int64_t>(begin);
      pending_unk_len = ch.size();
    }
  }
  flush_unk();
}

const MergeTable::Merge* BpeModel::merge_for(std::string_view word, const Symbol& left,
                                             const Symbol& right,
                                             MergeTable::Merge& scratch) const {
  if (use_scores_) {
    const int32_t id = find(word.substr(left.begin, left.len + right.len));
    if (id < 0 || !mergeable_[id]) return nullptr;
    scratch = {score_rank_[id], id};
    return &scratch;
  }
  if (left.id < 0 || right.id < 0) return nullptr;
  return merges_.find(left.id, right.id);
}

void BpeModel::tokenize_uncached(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  initial_symbols(word, symbols);
  const auto n = static_cast<int32_t>(symbols.size());
  if (n == 1 && symbols[0].id >= 0) {
    out.push_back(symbols[0].id);
    return;
  }
  for (int32_t i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }

  // A candidate merge of the live symbol at `left` with its right neighbour. It is stale once
  // either side has changed, which shows as a different combined length (spans only grow).
  struct Candidate {
    uint32_t rank;
    int32_t left;
    int32_t id;
    uint32_t len;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  MergeTable::Merge scratch;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    if (const auto* m = merge_for(word, symbols[left], symbols[right], scratch)) {
      queue.push({m->rank, left, m->id, symbols[left].len + symbols[right].len});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (left.len + right.len != top.len) continue;
    left.id = top.id;
    left.len = top.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    consider(left.prev);
    consider(top.left);
  }

  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out.push_back(s.id);
    } else {
      append_bytes_or_unk(word.substr(s.begin, s.len), out);
    }
  }
}

}  // namespace strata::text
