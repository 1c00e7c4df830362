// Token masks by a pruned walk of the vocabulary trie, cached per automaton state.
#include "text/structured/token_mask.h"

#include <algorithm>

#include "core/error.h"

namespace strata::text::structured {

TokenConstraint::TokenConstraint(const Grammar& grammar,
                                 std::shared_ptr<const Vocabulary> vocabulary, size_t cache_bytes)
    : vocabulary_(std::move(vocabulary)), automaton_(grammar), cache_bytes_(cache_bytes) {
  at_.resize(vocabulary_->max_depth() + 2);
}

uint32_t TokenConstraint::start() {
  std::lock_guard lock(mutex_);
  return automaton_.start();
}

uint32_t TokenConstraint::advance(uint32_t state, int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= vocabulary_->size() ||
      vocabulary_->excluded(token))
    return Automaton::kDead;
  return advance(state, vocabulary_->bytes(token));
}

uint32_t TokenConstraint::advance(uint32_t state, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  automaton_.restart_budget();
  const uint32_t next = automaton_.walk(state, bytes);
  stats_.max_work = std::max(stats_.max_work, automaton_.spent());
  return next;
}

bool TokenConstraint::accepts(uint32_t state) {
  std::lock_guard lock(mutex_);
  return automaton_.accepts(state);
}

bool TokenConstraint::finished(uint32_t state) {
  std::lock_guard lock(mutex_);
  return automaton_.finished(state);
}

void TokenConstraint::mask(uint32_t state, std::span<uint32_t> words) {
  check(words.size() == vocabulary_->words(), ErrorKind::kInternal,
        "token mask: {} words for a vocabulary of {} tokens", words.size(), vocabulary_->size());
  std::lock_guard lock(mutex_);
  ++stats_.masks;
  if (auto it = masks_.find(state); it != masks_.end()) {
    ++stats_.cache_hits;
    std::copy(it->second.begin(), it->second.end(), words.begin());
    return;
  }
  automaton_.restart_budget();
  walk(state, words);
  stats_.max_work = std::max(stats_.max_work, automaton_.spent());
  const size_t entry = words.size() * sizeof(uint32_t);
  if ((masks_.size() + 1) * entry > cache_bytes_) masks_.clear();
  if (entry <= cache_bytes_) masks_.emplace(state, std::vector<uint32_t>(words.begin(), words.end()));
}

void TokenConstraint::walk(uint32_t state, std::span<uint32_t> words) {
  std::fill(words.begin(), words.end(), 0u);
  if (state == Automaton::kDead) return;
  const std::vector<Vocabulary::Node>& nodes = vocabulary_->nodes();
  const std::vector<int32_t>& order = vocabulary_->token_order();
  const size_t n = nodes.size();
  at_[0] = state;
  size_t i = 0;
  uint64_t walked = 0;
  while (i < n) {
    const Vocabulary::Node& node = nodes[i];
    ++walked;
    const uint32_t next = automaton_.next(at_[node.depth], node.byte);
    if (next == Automaton::kDead) {
      i = node.skip;
      continue;
    }
    at_[node.depth + 1u] = next;
    for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k) {
      const auto id = static_cast<uint32_t>(order[k]);
      words[id >> 5] |= 1u << (id & 31);
    }
    ++i;
  }
  stats_.walked_nodes += walked;
}

TokenConstraint::Stats TokenConstraint::stats() {
  std::lock_guard lock(mutex_);
  Stats s = stats_;
  s.states = automaton_.state_count();
  return s;
}

bool Matcher::advance(int32_t token) {
  const uint32_t next = c_->advance(state_, token);
  if (next == Automaton::kDead) return false;
  state_ = next;
  return true;
}

bool Matcher::advance(std::string_view bytes) {
  const uint32_t next = c_->advance(state_, bytes);
  if (next == Automaton::kDead) return false;
  state_ = next;
  return true;
}

}  // namespace strata::text::structured
