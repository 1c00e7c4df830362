// PrefixCache: the states of prompt prefixes that later requests start from instead of running
// them again, kept in the model's device memory (the first tier of issue 41's cache).
//
// An entry is the state after a prompt's first `length` tokens, a whole number of prefill chunks:
// those tokens' KV blocks, shared with every sequence that uses them (StatePool::hold), and a copy
// of the recurrent state at that point (none for attention-only models). A request that resumes
// from a cached prefix prefills the rest of its prompt in the very chunks a cold run cuts there, so
// it gets exactly the cold run's tokens. Entries are recorded at every chunk boundary a prompt's
// prefill passes (short of its last token, which must run to give logits).
//
// Lookup: a chain of keys over chunks (chunk i's key hashes chunk i - 1's key and its own token
// ids, the chain seeded by the model fingerprint), so a prompt costs one hash per chunk; a match is
// then checked against the entry's token ids, so a hash collision can never serve another prefix.
// A recurrent state is only ever restored together with the KV blocks of the same entry.
//
// Two tiers. Device entries hold their blocks and a device copy of the recurrent state; at most
// `entries` of them. When that many are cached, or when the pool needs blocks (before any running
// request is preempted; then only entries that alone keep a block, as others would free none),
// the least recently used device entry moves to host memory: its KV rows
// and recurrent state as bytes, within `host_bytes` (the least recently used host entries are
// dropped to make room; 0: entries are dropped instead). A hit on a host entry takes fresh blocks,
// copies the bytes in, and moves the entry back to the device tier.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/memory.h"
#include "model/model.h"
#include "runtime/state_pool.h"

namespace strata::runtime {

class PrefixCache {
 public:
  // entries: at most this many prefixes (0: the cache is off). chunk: the engine's prefill chunk;
  // the cache is off unless it is a whole number of the pool's KV blocks.
  PrefixCache(const model::Model& model, StatePool& pool, int64_t entries, int64_t chunk,
              size_t host_bytes = 0);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return capacity_ > 0; }
  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }
  int64_t host_entries() const { return host_entries_; }
  size_t host_bytes() const { return host_used_; }

  // The longest cached prefix of `prompt` shorter than the prompt: its length, 0 when none (or
  // when a host entry finds too few free blocks). When found, the slot's sequence (empty, holding
  // no blocks) takes that state and those tokens; `from_host` says which tier served it.
  int64_t resume(int slot, std::span<const int32_t> prompt, bool* from_host = nullptr);
  // Records the slot's sequence's state if its length is a whole number of chunks and that prefix
  // is not cached yet.
  void record(int slot);
  // Gives up the blocks of the least recently used device entry that alone keeps one of them (it
  // moves to host memory, or is dropped); false when no entry would free a block (entries whose
  // blocks running sequences share stay).
  bool evict();

 private:
  struct Entry {
    uint64_t key = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> blocks;
    std::vector<backend::Buffer> recurrent;  // copies of the sequence's recurrent buffers, in order
    uint64_t used = 0;
    bool on_host = false;                // then: no blocks, no device copies, but these bytes
    std::vector<uint8_t> host_kv;        // StatePool::save_blocks' layout
    std::vector<uint8_t> host_recurrent;  // the recurrent buffers' bytes, in order
  };
  uint64_t chain(uint64_t key, std::span<const int32_t> chunk) const;
  void drop(size_t index);
  // The least recently used entry of a tier; entries_.size() when it has none.
  size_t least_used(bool on_host) const;
  void demote(size_t index);
  std::vector<backend::Buffer> device_copies(const Sequence& seq);
  // seq's recurrent buffers into `copies` (to_copies), or back.
  void copy_recurrent(const Sequence& seq, const std::vector<backend::Buffer>& copies, bool to_copies) const;

  StatePool& pool_;
  int64_t capacity_ = 0;  // device entries
  int64_t chunk_ = 0;
  size_t host_budget_ = 0;
  size_t host_used_ = 0;
  int64_t host_entries_ = 0;
  uint64_t seed_ = 0;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;
  std::unordered_map<uint64_t, size_t> by_key_;
  std::vector<std::vector<backend::Buffer>> spare_;  // recurrent copies of dropped entries, reused
};

}  // namespace strata::runtime
