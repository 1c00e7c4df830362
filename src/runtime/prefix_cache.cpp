// PrefixCache: chained chunk keys, shared KV blocks and recurrent copies, least recently used out.
#include "runtime/prefix_cache.h"

#include <algorithm>

#include "core/error.h"
#include "core/hash.h"

namespace strata::runtime {

PrefixCache::PrefixCache(const model::Model& model, StatePool& pool, int64_t entries, int64_t chunk)
    : pool_(pool), chunk_(chunk) {
  check(entries >= 0, ErrorKind::kInvalidInput, "the prefix cache size must not be negative");
  capacity_ = chunk > 0 && chunk % pool.block_tokens() == 0 ? entries : 0;
  seed_ = hash64(model.fingerprint());
  entries_.reserve(static_cast<size_t>(capacity_));
}

PrefixCache::~PrefixCache() {
  while (evict()) {
  }
}

uint64_t PrefixCache::chain(uint64_t key, std::span<const int32_t> chunk) const {
  return hash64(chunk.data(), chunk.size_bytes(), key);
}

int64_t PrefixCache::resume(int slot, std::span<const int32_t> prompt) {
  if (!enabled() || entries_.empty()) return 0;
  const auto n = static_cast<int64_t>(prompt.size());
  uint64_t key = seed_;
  Entry* best = nullptr;
  for (int64_t end = chunk_; end < n; end += chunk_) {
    key = chain(key, prompt.subspan(static_cast<size_t>(end - chunk_), static_cast<size_t>(chunk_)));
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) continue;  // a later boundary may still be cached
    Entry& e = entries_[it->second];
    if (std::equal(e.tokens.begin(), e.tokens.end(), prompt.begin(), prompt.begin() + end)) best = &e;
  }
  if (best == nullptr) return 0;
  Sequence& seq = pool_.sequence(slot);
  pool_.share(slot, best->blocks);
  size_t i = 0;
  for (const model::StateBuffer& b : seq.state().buffers)
    if (!b.token_indexed) backend::copy(best->recurrent[i++].view(), b.tensor.view());
  seq.assume(best->tokens);
  best->used = ++clock_;
  return static_cast<int64_t>(best->tokens.size());
}

void PrefixCache::record(int slot) {
  if (!enabled()) return;
  const Sequence& seq = pool_.sequence(slot);
  const int64_t n = seq.n_tokens();
  if (n <= 0 || n % chunk_ != 0) return;
  const std::vector<int32_t>& tokens = seq.tokens();
  uint64_t key = seed_;
  for (int64_t end = chunk_; end <= n; end += chunk_)
    key = chain(key, std::span<const int32_t>(tokens).subspan(static_cast<size_t>(end - chunk_),
                                                               static_cast<size_t>(chunk_)));
  if (const auto it = by_key_.find(key); it != by_key_.end()) {
    entries_[it->second].used = ++clock_;
    return;
  }
  if (static_cast<int64_t>(entries_.size()) == capacity_) evict();
  Entry e;
  e.key = key;
  e.tokens.assign(tokens.begin(), tokens.begin() + n);
  const std::vector<int32_t>& blocks = seq.state().blocks;
  e.blocks.assign(blocks.begin(), blocks.begin() + n / pool_.block_tokens());
  if (!spare_.empty()) {
    e.recurrent = std::move(spare_.back());
    spare_.pop_back();
  } else {
    for (const model::StateBuffer& b : seq.state().buffers)
      if (!b.token_indexed) e.recurrent.emplace_back(b.tensor.device(), b.tensor.dtype(), b.tensor.shape());
  }
  size_t i = 0;
  for (const model::StateBuffer& b : seq.state().buffers)
    if (!b.token_indexed) backend::copy(b.tensor.view(), e.recurrent[i++].view());
  pool_.hold(e.blocks);
  e.used = ++clock_;
  by_key_[key] = entries_.size();
  entries_.push_back(std::move(e));
}

bool PrefixCache::evict() {
  if (entries_.empty()) return false;
  size_t oldest = 0;
  for (size_t i = 1; i < entries_.size(); ++i)
    if (entries_[i].used < entries_[oldest].used) oldest = i;
  drop(oldest);
  return true;
}

void PrefixCache::drop(size_t index) {
  Entry& e = entries_[index];
  pool_.let_go(e.blocks);
  by_key_.erase(e.key);
  spare_.push_back(std::move(e.recurrent));
  if (index + 1 != entries_.size()) {
    entries_[index] = std::move(entries_.back());
    by_key_[entries_[index].key] = index;
  }
  entries_.pop_back();
}

}  // namespace strata::runtime
