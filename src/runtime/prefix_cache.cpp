// PrefixCache: chained chunk keys; device entries (shared KV blocks, recurrent copies) and host
// entries (their bytes), least recently used out of each tier.
#include "runtime/prefix_cache.h"

#include <algorithm>

#include "core/error.h"
#include "core/hash.h"

namespace strata::runtime {

PrefixCache::PrefixCache(const model::Model& model, StatePool& pool, int64_t entries, int64_t chunk,
                         size_t host_bytes)
    : pool_(pool), chunk_(chunk), host_budget_(host_bytes) {
  check(entries >= 0, ErrorKind::kInvalidInput, "the prefix cache size must not be negative");
  capacity_ = chunk > 0 && chunk % pool.block_tokens() == 0 ? entries : 0;
  seed_ = hash64(model.fingerprint());
}

PrefixCache::~PrefixCache() {
  while (!entries_.empty()) drop(entries_.size() - 1);
}

uint64_t PrefixCache::chain(uint64_t key, std::span<const int32_t> chunk) const {
  return hash64(chunk.data(), chunk.size_bytes(), key);
}

size_t PrefixCache::least_used(bool on_host) const {
  size_t best = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].on_host == on_host && (best == entries_.size() || entries_[i].used < entries_[best].used))
      best = i;
  return best;
}

std::vector<backend::Buffer> PrefixCache::device_copies(const Sequence& seq) {
  if (!spare_.empty()) {
    std::vector<backend::Buffer> copies = std::move(spare_.back());
    spare_.pop_back();
    return copies;
  }
  std::vector<backend::Buffer> copies;
  for (const model::StateBuffer& b : seq.state().buffers)
    if (!b.token_indexed) copies.emplace_back(b.tensor.device(), b.tensor.dtype(), b.tensor.shape());
  return copies;
}

void PrefixCache::copy_recurrent(const Sequence& seq, const std::vector<backend::Buffer>& copies,
                                 bool to_copies) const {
  size_t i = 0;
  for (const model::StateBuffer& b : seq.state().buffers) {
    if (b.token_indexed) continue;
    const Tensor& copy = copies[i++].view();
    backend::copy(to_copies ? b.tensor.view() : copy, to_copies ? copy : b.tensor.view());
  }
}

int64_t PrefixCache::resume(int slot, std::span<const int32_t> prompt, bool* from_host) {
  if (from_host != nullptr) *from_host = false;
  if (!enabled() || entries_.empty()) return 0;
  const auto n = static_cast<int64_t>(prompt.size());
  uint64_t key = seed_, best = 0;
  bool found = false;
  for (int64_t end = chunk_; end < n; end += chunk_) {
    key = chain(key, prompt.subspan(static_cast<size_t>(end - chunk_), static_cast<size_t>(chunk_)));
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) continue;  // a later boundary may still be cached
    const Entry& e = entries_[it->second];
    if (std::equal(e.tokens.begin(), e.tokens.end(), prompt.begin(), prompt.begin() + end)) {
      best = key;
      found = true;
    }
  }
  if (!found) return 0;
  Sequence& seq = pool_.sequence(slot);
  if (!entries_[by_key_.at(best)].on_host) {
    Entry& e = entries_[by_key_.at(best)];
    pool_.share(slot, e.blocks);
    copy_recurrent(seq, e.recurrent, /*to_copies=*/false);
    seq.assume(e.tokens);
    e.used = ++clock_;
    return static_cast<int64_t>(e.tokens.size());
  }
  // A host entry: fresh blocks for its rows (device entries other than it give theirs up if need
  // be), its bytes copied in; then it is a device entry again, holding those blocks. It is marked
  // used first, so that demotions making room on the host drop other entries before it.
  entries_[by_key_.at(best)].used = ++clock_;
  const auto length = static_cast<int64_t>(entries_[by_key_.at(best)].tokens.size());
  if (static_cast<int64_t>(entries_.size() - static_cast<size_t>(host_entries_)) >= capacity_) {
    demote(least_used(false));  // room in the device tier
    if (by_key_.count(best) == 0) return 0;  // (a tiny host budget dropped it)
  }
  while (!pool_.reserve(slot, length))
    if (!evict() || by_key_.count(best) == 0) return 0;  // no blocks to be had, or it is gone
  Entry& e = entries_[by_key_.at(best)];
  pool_.load_blocks(seq.state().blocks, length, e.host_kv.data());
  const uint8_t* src = e.host_recurrent.data();
  for (const model::StateBuffer& b : seq.state().buffers) {
    if (b.token_indexed) continue;
    backend::copy_from_host(src, b.tensor.view());
    src += b.tensor.view().nbytes();
  }
  backend::synchronize(seq.state().buffers.front().tensor.device());  // before the bytes go
  seq.assume(e.tokens);
  e.blocks.assign(seq.state().blocks.begin(), seq.state().blocks.begin() + length / pool_.block_tokens());
  pool_.hold(e.blocks);
  e.recurrent = device_copies(seq);
  copy_recurrent(seq, e.recurrent, /*to_copies=*/true);
  host_used_ -= e.host_kv.size() + e.host_recurrent.size();
  --host_entries_;
  e.host_kv = {};
  e.host_recurrent = {};
  e.on_host = false;
  e.used = ++clock_;
  if (from_host != nullptr) *from_host = true;
  return length;
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
    entries_[it->second].used = ++clock_;  // (a host entry stays there until a hit needs it)
    return;
  }
  if (static_cast<int64_t>(entries_.size() - static_cast<size_t>(host_entries_)) >= capacity_)
    demote(least_used(false));
  Entry e;
  e.key = key;
  e.tokens.assign(tokens.begin(), tokens.begin() + n);
  const std::vector<int32_t>& blocks = seq.state().blocks;
  e.blocks.assign(blocks.begin(), blocks.begin() + n / pool_.block_tokens());
  e.recurrent = device_copies(seq);
  copy_recurrent(seq, e.recurrent, /*to_copies=*/true);
  pool_.hold(e.blocks);
  e.used = ++clock_;
  by_key_[key] = entries_.size();
  entries_.push_back(std::move(e));
}

bool PrefixCache::evict() {
  size_t best = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.on_host || (best < entries_.size() && entries_[best].used <= e.used)) continue;
    if (std::any_of(e.blocks.begin(), e.blocks.end(), [&](int32_t b) { return pool_.keepers(b) == 1; }))
      best = i;
  }
  if (best == entries_.size()) return false;
  demote(best);
  return true;
}

void PrefixCache::demote(size_t index) {
  Entry& e = entries_[index];
  const auto length = static_cast<int64_t>(e.tokens.size());
  size_t recurrent = 0;
  for (const backend::Buffer& b : e.recurrent) recurrent += b.view().nbytes();
  const size_t bytes = pool_.kv_bytes(length) + recurrent;
  if (bytes > host_budget_) {
    drop(index);
    return;
  }
  while (host_used_ + bytes > host_budget_) {
    const size_t lru = least_used(true);
    drop(lru);  // host entries free room; a dropped one may have been the last, so look again
    if (index == entries_.size()) index = lru;  // the back moved into the dropped place
  }
  Entry& d = entries_[index];
  d.host_kv.resize(pool_.kv_bytes(length));
  pool_.save_blocks(d.blocks, length, d.host_kv.data());
  d.host_recurrent.resize(recurrent);
  uint8_t* dst = d.host_recurrent.data();
  for (const backend::Buffer& b : d.recurrent) {
    backend::copy_to_host(b.view(), dst);
    dst += b.view().nbytes();
  }
  pool_.let_go(d.blocks);
  d.blocks.clear();
  spare_.push_back(std::move(d.recurrent));
  d.recurrent = {};
  d.on_host = true;
  host_used_ += bytes;
  ++host_entries_;
}

void PrefixCache::drop(size_t index) {
  Entry& e = entries_[index];
  if (e.on_host) {
    host_used_ -= e.host_kv.size() + e.host_recurrent.size();
    --host_entries_;
  } else {
    pool_.let_go(e.blocks);
    spare_.push_back(std::move(e.recurrent));
  }
  by_key_.erase(e.key);
  if (index + 1 != entries_.size()) {
    entries_[index] = std::move(entries_.back());
    by_key_[entries_[index].key] = index;
  }
  entries_.pop_back();
}

}  // namespace strata::runtime
