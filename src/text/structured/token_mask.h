// A compiled output constraint over one vocabulary: its grammar's automaton and the token masks of
// the automaton's states. A mask is computed by walking the vocabulary's byte trie against the
// automaton (a prefix the grammar refuses skips its whole subtree; transitions are memoized, so a
// walk is table lookups) and kept per state, so a state seen again costs a copy. Thread-safe: the
// requests that share a schema share one, and each keeps its own state (Matcher). A mask and an
// advance are each an operation of the automaton's work budget (Automaton::kWorkBudget): past it
// they throw Error(kInvalidInput), and a mask that failed so fails again, whatever was cached.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/structured/automaton.h"
#include "text/structured/grammar.h"
#include "text/structured/vocabulary.h"

namespace strata::text::structured {

class TokenConstraint {
 public:
  // cache_bytes: the masks kept (all are dropped when a new one would pass it).
  TokenConstraint(const Grammar& grammar, std::shared_ptr<const Vocabulary> vocabulary,
                  size_t cache_bytes = size_t{64} << 20);

  const Vocabulary& vocabulary() const { return *vocabulary_; }
  uint32_t start();
  // The state after the token's (or the text's) bytes; Automaton::kDead when they break the text.
  uint32_t advance(uint32_t state, int32_t token);
  uint32_t advance(uint32_t state, std::string_view bytes);
  bool accepts(uint32_t state);
  bool finished(uint32_t state);
  // The tokens whose bytes keep the text valid from `state`: bit id % 32 of word id / 32 set,
  // over vocabulary().words() words. No end-of-generation token is set (the caller adds them
  // when accepts(state)).
  void mask(uint32_t state, std::span<uint32_t> words);

  struct Stats {
    uint64_t masks = 0, cache_hits = 0, walked_nodes = 0;
    uint64_t max_work = 0;  // the most work one mask or advance took (of Automaton::kWorkBudget)
    size_t states = 0;
  };
  Stats stats();

 private:
  void walk(uint32_t state, std::span<uint32_t> words);

  std::mutex mutex_;
  std::shared_ptr<const Vocabulary> vocabulary_;
  Automaton automaton_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> masks_;
  size_t cache_bytes_;
  std::vector<uint32_t> at_;  // the walk's state per trie depth
  Stats stats_;
};

// One generation's position in a constraint.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<TokenConstraint> constraint)
      : c_(std::move(constraint)), state_(c_->start()) {}
  // Takes the token if it keeps the text valid; false (the state unchanged) when it does not.
  bool advance(int32_t token);
  bool advance(std::string_view bytes);
  bool accepts() const { return c_->accepts(state_); }
  bool finished() const { return c_->finished(state_); }
  void mask(std::span<uint32_t> words) const { c_->mask(state_, words); }
  TokenConstraint& constraint() const { return *c_; }

 private:
  std::shared_ptr<TokenConstraint> c_;
  uint32_t state_;
};

}  // namespace strata::text::structured
