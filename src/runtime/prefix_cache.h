// PrefixCache: the states of prompt prefixes that later requests start from instead of running
// them again (issue 41), in three tiers: the model's device memory, host memory and disk.
//
// An entry is the state after a prompt's first `length` tokens, where its prefill cut a chunk (the
// engine cuts a prompt at every `chunk` tokens and at the message boundaries its request names,
// the same way whatever the load): those tokens' KV rows and a copy of the recurrent state at that
// point (none for attention-only models). A request that resumes from a cached prefix prefills the
// rest of its prompt in the very chunks a cold run cuts there, so it gets exactly the cold run's
// tokens. Entries are recorded at every cut a prompt's prefill passes (short of its last token,
// which must run to give logits).
//
// Lookup: a chain of keys over the chunks (chunk i's key hashes chunk i - 1's key and its own token
// ids, the chain seeded by the model fingerprint), so a prompt costs one hash per chunk; a match is
// then checked against the entry's token ids, so a hash collision can never serve another prefix.
// Two prompts cut differently before a point have different keys there, as their states may differ
// in the last bit. A recurrent state is only ever restored together with the KV of the same entry:
// both live in one entry, in one tier, and move together.
//
// Tiers. A device entry holds its KV blocks (shared with every sequence that uses them,
// StatePool::hold) and a device copy of the recurrent state; at most `entries` of them. When that
// many are cached, or when the pool needs blocks (before any running request is preempted; then
// only entries that alone keep a block, as others would free none), the least recently used device
// entry moves to host memory as bytes, within `host_bytes`; the least recently used host entries
// move on to disk to make room (runtime/state_store.h, within the disk budget; without a disk tier
// they are dropped). A hit on a host entry takes fresh blocks, copies the bytes in, and the entry is
// a device entry again; the whole blocks of a shorter prefix on the same cuts that is still in
// device memory hold the same rows (the same chunks computed them), so those are shared instead.
// A hit on a disk entry is read on the store's thread while the engine goes on (resume says to
// wait); the read entry is a host entry, and the retried resume promotes it.
//
// The disk tier also keeps what a restart would lose: the longest prefix each prompt's prefill
// records is written there at once (on the store's thread), and the files found at start are disk
// entries, least recently used first by their files' ages.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/memory.h"
#include "model/model.h"
#include "runtime/state_pool.h"
#include "runtime/state_store.h"

namespace strata::runtime {

enum class CacheTier { kNone, kDevice, kHost, kDisk };
const char* cache_tier_name(CacheTier tier);  // "none", "device", "host", "disk"

struct PrefixCacheOptions {
  int64_t entries = 0;  // device entries (0: the cache is off)
  int64_t chunk = 0;    // the engine's prefill chunk; the cache is off unless it is a whole number of KV blocks
  size_t host_bytes = 0;
  std::filesystem::path state_root;  // the disk tier's root (empty: no disk tier)
  uint64_t disk_bytes = 0;
  bool compress = false;  // its files written compressed
  bool lock_host = false;  // host_bytes of page-locked memory locked at once (with a GPU)
};

struct PrefixCacheStats {
  int64_t device_entries = 0, host_entries = 0, disk_entries = 0;  // disk: files (of any entry)
  uint64_t host_bytes = 0, disk_bytes = 0;
  uint64_t hits[4] = {};  // by the tier that served them (CacheTier's order; kNone unused)
  uint64_t evictions[4] = {};  // entries that left a tier (moved down, or dropped from disk)
  uint64_t disk_writes = 0, disk_write_failures = 0, disk_reads = 0, disk_read_failures = 0;
  double disk_write_seconds = 0, disk_read_seconds = 0;
  uint64_t disk_written_bytes = 0, disk_read_bytes = 0;
  uint64_t shared_on_promotion = 0;  // tokens whose rows a promotion shared instead of copying
};

class PrefixCache {
 public:
  // The disk tier opens (creating) its directory under options.state_root; when that fails, the
  // cache runs without it (logged).
  PrefixCache(const model::Model& model, StatePool& pool, const PrefixCacheOptions& options);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return capacity_ > 0; }
  PrefixCacheStats stats() const;
  const StateStore* store() const { return store_.get(); }

  // The chunk key of the prefix ending at each cut of `prompt` (the ends of its prefill chunks
  // short of its end, ascending).
  std::vector<uint64_t> keys(std::span<const int32_t> prompt, std::span<const int64_t> cuts) const;

  // The longest cached prefix of `prompt` at one of its cuts (keys: keys(prompt, cuts)), or a
  // shorter one in device memory within one chunk of it: its length, 0 when none (or when a host entry finds too few free blocks), -1 when it is on disk and
  // being read (ask again later: poll() says when). When found, the slot's sequence (empty,
  // holding no blocks) takes that state and those tokens; `tier` says which tier served it.
  int64_t resume(int slot, std::span<const int32_t> prompt, std::span<const int64_t> cuts,
                 std::span<const uint64_t> keys, CacheTier* tier = nullptr);
  // Counts a hit of that tier in stats() (the engine counts its clients' requests once they start).
  void count_hit(CacheTier tier) {
    if (tier != CacheTier::kNone) ++stats_.hits[static_cast<size_t>(tier)];
  }
  // Records the slot's sequence's state, whose length is a cut with this key, unless that prefix is
  // cached already; to_disk: also writes it to the disk tier (the longest prefix of a prompt).
  void record(int slot, uint64_t key, bool to_disk);
  // Gives up the blocks of the least recently used device entry that alone keeps one of them (it
  // moves to host memory, or down), else of one holding a block only entries keep (a few such
  // calls free it); false when no entry would ever free a block (entries whose blocks running
  // sequences keep stay).
  bool evict() { return evict_sparing(std::nullopt); }
  // Takes in the disk tier's finished writes and reads; true when a read finished.
  bool poll();
  // Blocks until a disk job finishes or the timeout passes (when nothing else could run).
  void wait_for_disk(std::chrono::milliseconds timeout);

 private:
  struct Entry {
    uint64_t key = 0;
    std::vector<int32_t> tokens;
    uint64_t used = 0;
    CacheTier tier = CacheTier::kDevice;  // where its state is now (kDisk: only in its file)
    // kDevice:
    std::vector<int32_t> blocks;
    std::vector<backend::Buffer> recurrent;  // copies of the sequence's recurrent buffers, in order
    // kHost: its bytes (also while they are being written, whatever the tier).
    std::shared_ptr<const StateBytes> bytes;
    // The disk copy: none, being written (bytes hold it meanwhile), or in its file.
    enum class Disk { kNone, kWriting, kStored } disk = Disk::kNone;
    bool reading = false;    // a read of its file is on its way
    bool from_disk = false;  // a host entry just read from its file (the hit is the disk's)
  };
  bool evict_sparing(std::optional<uint64_t> spare);  // evict(), never the entry of that key
  Entry* find(uint64_t key);
  size_t index_of(uint64_t key) const { return by_key_.at(key); }
  int64_t count(CacheTier tier) const { return tiers_[static_cast<size_t>(tier)]; }
  // Entries come, change tier and disk state, and keep blocks only through these (they keep the
  // counts per tier, of files and of the entries holding each block).
  void add(Entry e);
  void set_tier(Entry& e, CacheTier tier);
  void set_disk(Entry& e, Entry::Disk disk);
  void hold(const Entry& e);  // its blocks
  void let_go(Entry& e);      // (and forgets them)
  void drop(size_t index);
  // The least recently used entry of a tier; entries_.size() when it has none.
  size_t least_used(CacheTier tier) const;
  void demote(size_t index);  // device → host (or on down)
  // Makes room in host memory for `bytes` more (entries move down), sparing entry `keep`; false
  // when it cannot.
  bool host_room(uint64_t bytes, uint64_t keep);
  // The entry's state leaves memory: only its file keeps it (written now if it has none; dropped
  // when it cannot be).
  void to_disk(uint64_t key);
  // Queues a write of the entry's state (its bytes, or its device state's); false when the disk
  // tier cannot take it.
  bool write(uint64_t key);
  // Makes room on disk for `bytes` more, sparing `keep`'s file; false when it cannot.
  bool disk_room(uint64_t bytes, uint64_t keep);
  void forget_file(size_t index);  // its file goes (a disk-only entry with it)
  std::shared_ptr<StateBytes> device_bytes(const Entry& e) const;
  std::vector<backend::Buffer> device_copies(const Sequence& seq);
  // seq's recurrent buffers into `copies` (to_copies), or back.
  void copy_recurrent(const Sequence& seq, const std::vector<backend::Buffer>& copies, bool to_copies) const;
  // An entry's bytes (a host entry's, or those of a write on its way) into fresh blocks of the
  // slot, but for the whole blocks of `under` (a shorter prefix of it on the same cuts, in device
  // memory), which it shares; false when it cannot get them.
  bool promote(uint64_t key, int slot, std::optional<uint64_t> under);

  StatePool& pool_;
  int64_t capacity_ = 0;  // device entries
  int64_t chunk_ = 0;
  size_t host_budget_ = 0;
  uint64_t disk_budget_ = 0;
  uint64_t writing_bytes_ = 0;  // held by writes on their way
  uint64_t seed_ = 0;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;
  std::unordered_map<uint64_t, size_t> by_key_;
  std::vector<std::vector<backend::Buffer>> spare_;  // recurrent copies of dropped entries, reused
  std::unique_ptr<StateStore> store_;
  PrefixCacheStats stats_;
  int64_t tiers_[4] = {};  // entries per tier (CacheTier's order)
  int64_t files_ = 0;      // entries with a file (being written or whole)
  std::vector<int32_t> held_;  // per KV block: the device entries holding it
};

}  // namespace strata::runtime
