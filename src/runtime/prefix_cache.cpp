// PrefixCache: chained chunk keys; device entries (shared KV blocks, recurrent copies), host
// entries (their bytes) and disk entries (their files), least recently used out of each tier.
#include "runtime/prefix_cache.h"

#include <algorithm>

#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"

namespace strata::runtime {

namespace {

// Bytes that writes on their way may hold in host memory; a write past it is skipped.
constexpr uint64_t kMaxWriting = uint64_t{2} << 30;

size_t tier_index(CacheTier tier) { return static_cast<size_t>(tier); }

}  // namespace

const char* cache_tier_name(CacheTier tier) {
  switch (tier) {
    case CacheTier::kDevice:
      return "device";
    case CacheTier::kHost:
      return "host";
    case CacheTier::kDisk:
      return "disk";
    case CacheTier::kNone:
      break;
  }
  return "none";
}

PrefixCache::PrefixCache(const model::Model& model, StatePool& pool, const PrefixCacheOptions& options)
    : pool_(pool), chunk_(options.chunk), host_budget_(options.host_bytes), disk_budget_(options.disk_bytes) {
  check(options.entries >= 0, ErrorKind::kInvalidInput, "the prefix cache size must not be negative");
  capacity_ = chunk_ > 0 && chunk_ % pool.block_tokens() == 0 ? options.entries : 0;
  seed_ = hash64(model.fingerprint());
  held_.assign(static_cast<size_t>(pool.kv_blocks()), 0);
  // The host tier's page-locked memory, locked now rather than while a request waits.
  if (enabled() && options.lock_host && model.device() == Device::kCuda) pool.host_pages()->reserve(host_budget_);
  if (!enabled() || options.state_root.empty() || disk_budget_ == 0) return;
  const model::ModelState& layout = pool.sequence(0).state();
  try {
    store_ = std::make_unique<StateStore>(
        state_directory(options.state_root, model.fingerprint(), backend::device_name(model.device()), chunk_,
                        layout),
        model.fingerprint(), layout, layout.capacity, pool.host_pages(), options.compress);
  } catch (const std::exception& e) {
    log::error("prefix cache: no disk tier: {}", e.what());
    return;
  }
  for (StoredState& s : store_->take_index()) {
    if (by_key_.count(s.key) != 0) continue;
    Entry e;
    e.key = s.key;
    e.tokens = std::move(s.tokens);
    e.tier = CacheTier::kDisk;
    e.disk = Entry::Disk::kStored;
    e.used = ++clock_;  // oldest file first
    stats_.disk_bytes += store_->file_bytes(static_cast<int64_t>(e.tokens.size()));  // (budgets count uncompressed bytes)
    add(std::move(e));
  }
  if (!entries_.empty())
    log::info("prefix cache: {} prefixes on disk in {}", entries_.size(), store_->dir().string());
  while (stats_.disk_bytes > disk_budget_) forget_file(least_used(CacheTier::kDisk));  // a smaller budget now
}

PrefixCache::~PrefixCache() {
  while (!entries_.empty()) drop(entries_.size() - 1);  // (their files stay)
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.device_entries = count(CacheTier::kDevice);
  s.host_entries = count(CacheTier::kHost);
  s.disk_entries = files_;
  return s;
}

std::vector<uint64_t> PrefixCache::keys(std::span<const int32_t> prompt, std::span<const int64_t> cuts) const {
  std::vector<uint64_t> out;
  out.reserve(cuts.size());
  uint64_t key = seed_;
  int64_t from = 0;
  for (const int64_t cut : cuts) {
    key = hash64(prompt.data() + from, static_cast<size_t>(cut - from) * sizeof(int32_t), key);
    out.push_back(key);
    from = cut;
  }
  return out;
}

PrefixCache::Entry* PrefixCache::find(uint64_t key) {
  const auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : &entries_[it->second];
}

void PrefixCache::add(Entry e) {
  ++tiers_[tier_index(e.tier)];
  if (e.disk != Entry::Disk::kNone) ++files_;
  if (e.tier == CacheTier::kDevice) hold(e);
  by_key_[e.key] = entries_.size();
  entries_.push_back(std::move(e));
}

void PrefixCache::set_tier(Entry& e, CacheTier tier) {
  --tiers_[tier_index(e.tier)];
  ++tiers_[tier_index(tier)];
  e.tier = tier;
}

void PrefixCache::set_disk(Entry& e, Entry::Disk disk) {
  files_ += static_cast<int64_t>(disk != Entry::Disk::kNone) - static_cast<int64_t>(e.disk != Entry::Disk::kNone);
  e.disk = disk;
}

void PrefixCache::hold(const Entry& e) {
  pool_.hold(e.blocks);
  for (const int32_t b : e.blocks) ++held_[static_cast<size_t>(b)];
}

void PrefixCache::let_go(Entry& e) {
  pool_.let_go(e.blocks);
  for (const int32_t b : e.blocks) --held_[static_cast<size_t>(b)];
  e.blocks.clear();
}

size_t PrefixCache::least_used(CacheTier tier) const {
  size_t best = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    // kDisk: any entry with a file that is whole (a file being written cannot go yet).
    const bool in = tier == CacheTier::kDisk ? e.disk == Entry::Disk::kStored : e.tier == tier;
    if (in && (best == entries_.size() || e.used < entries_[best].used)) best = i;
  }
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

std::shared_ptr<StateBytes> PrefixCache::device_bytes(const Entry& e) const {
  auto out = std::make_shared<StateBytes>();
  const auto length = static_cast<int64_t>(e.tokens.size());
  const std::shared_ptr<HostPages>& pages = pool_.host_pages();
  out->tokens = e.tokens;
  out->kv = pages->take(pool_.kv_bytes(length));
  pool_.save_blocks(e.blocks, length, out->kv);
  size_t recurrent = 0;
  for (const backend::Buffer& b : e.recurrent) recurrent += b.view().nbytes();
  out->recurrent = pages->take(recurrent);
  size_t at = 0;
  for (const backend::Buffer& b : e.recurrent) {
    out->recurrent.copy_queued(b.view(), at, /*to_pages=*/true);
    at += b.view().nbytes();
  }
  backend::synchronize(pool_.host_pages()->device());
  return out;
}

int64_t PrefixCache::resume(int slot, std::span<const int32_t> prompt, std::span<const int64_t> cuts,
                            std::span<const uint64_t> keys, CacheTier* tier) {
  if (tier != nullptr) *tier = CacheTier::kNone;
  if (!enabled() || entries_.empty()) return 0;
  // The longest cached prefix; but a prefix in device memory within one chunk of it is taken
  // instead (running that chunk again costs less than copying a whole prefix in, and than the
  // blocks a whole prefix takes: they may push every other prefix out of device memory).
  const Entry* best = nullptr;
  for (size_t i = cuts.size(); i-- > 0;) {  // the longest first
    const Entry* e = find(keys[i]);
    if (e == nullptr || static_cast<int64_t>(e->tokens.size()) != cuts[i] ||
        !std::equal(e->tokens.begin(), e->tokens.end(), prompt.begin()))
      continue;
    if (best == nullptr) best = e;
    if (e->tier == CacheTier::kDevice && cuts[i] + chunk_ >= static_cast<int64_t>(best->tokens.size())) {
      best = e;
      break;
    }
    if (cuts[i] + chunk_ < static_cast<int64_t>(best->tokens.size())) break;  // none that near
  }
  if (best == nullptr) return 0;
  const uint64_t key = best->key;
  // Below a prefix in host memory, the longest one on the same cuts still in device memory: its
  // whole blocks hold the same rows, so a promotion shares them instead of copying them in.
  std::optional<uint64_t> under;
  if (best->tier != CacheTier::kDevice)
    for (size_t i = cuts.size(); i-- > 0 && !under;) {
      const Entry* e = find(keys[i]);
      if (e != nullptr && e->tier == CacheTier::kDevice && e->tokens.size() < best->tokens.size() &&
          static_cast<int64_t>(e->tokens.size()) == cuts[i] && std::equal(e->tokens.begin(), e->tokens.end(), prompt.begin()))
        under = e->key;
    }
  Entry& e = *find(key);
  if (e.disk == Entry::Disk::kStored) store_->touch(key);  // its age orders eviction after a restart
  if (e.tier == CacheTier::kDisk && e.bytes == nullptr) {  // only in its file: read it first
    if (!e.reading) store_->read(key, e.tokens);
    e.reading = true;
    e.used = ++clock_;
    return -1;
  }
  const CacheTier from = e.from_disk ? CacheTier::kDisk : e.tier;
  if (e.tier == CacheTier::kDevice) {
    Sequence& seq = pool_.sequence(slot);
    const auto length = static_cast<int64_t>(e.tokens.size());
    e.used = ++clock_;  // (evictions making room spare it while they can)
    while (!pool_.share_prefix(slot, find(key)->blocks, length))  // a block for a partly filled last one
      if (!evict_sparing(key)) return 0;
    const Entry& d = *find(key);
    copy_recurrent(seq, d.recurrent, /*to_copies=*/false);
    seq.assume(d.tokens);
  } else if (!promote(key, slot, under)) {
    return 0;
  }
  if (tier != nullptr) *tier = from;
  return static_cast<int64_t>(find(key)->tokens.size());
}

bool PrefixCache::promote(uint64_t key, int slot, std::optional<uint64_t> under) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  // Marked used first, so that making room elsewhere spares it.
  find(key)->used = ++clock_;
  // Making room may push it on down too (a tiny host budget): then its bytes are gone from here.
  auto here = [&] { return find(key) != nullptr && find(key)->bytes != nullptr; };
  const auto length = static_cast<int64_t>(find(key)->tokens.size());
  if (Entry* u = under ? find(*under) : nullptr) u->used = clock_;  // (as recent: making room takes others first)
  // The blocks it needs: fresh ones, but for the whole blocks of `under` while that is in device
  // memory (making room may move it down: then all are fresh).
  int64_t shared = 0;  // of `under`'s blocks
  for (;;) {
    const Entry* u = under ? find(*under) : nullptr;
    shared = u != nullptr && u->tier == CacheTier::kDevice ? static_cast<int64_t>(u->tokens.size()) / pool_.block_tokens() : 0;
    if (pool_.free_kv_blocks() >= pool_.blocks_for(length) - shared) break;
    if (!evict_sparing(key) || !here()) return false;  // no blocks to be had
  }
  if (shared > 0) pool_.share(slot, std::span<const int32_t>(find(*under)->blocks).first(static_cast<size_t>(shared)));
  check(pool_.reserve(slot, length), ErrorKind::kInternal, "prefix cache: blocks counted free were not");
  const Clock::time_point t1 = Clock::now();
  Entry& e = *find(key);
  Sequence& seq = pool_.sequence(slot);
  const std::shared_ptr<const StateBytes> bytes = e.bytes;
  pool_.load_blocks(seq.state().blocks, length, bytes->kv, shared * pool_.block_tokens());
  stats_.shared_on_promotion += static_cast<uint64_t>(shared * pool_.block_tokens());
  const Clock::time_point t2 = Clock::now();
  size_t at = 0;
  for (const model::StateBuffer& b : seq.state().buffers)
    if (!b.token_indexed) {
      bytes->recurrent.copy_queued(b.tensor.view(), at, /*to_pages=*/false);
      at += b.tensor.view().nbytes();
    }
  backend::synchronize(pool_.host_pages()->device());  // before the bytes may go
  const Clock::time_point t3 = Clock::now();
  seq.assume(e.tokens);
  e.blocks.assign(seq.state().blocks.begin(), seq.state().blocks.begin() + pool_.blocks_for(length));
  hold(e);
  e.recurrent = device_copies(seq);
  copy_recurrent(seq, e.recurrent, /*to_copies=*/true);
  if (e.tier == CacheTier::kHost) stats_.host_bytes -= bytes->bytes();
  set_tier(e, CacheTier::kDevice);
  if (e.disk != Entry::Disk::kWriting) e.bytes.reset();  // (a write on its way keeps its own)
  e.from_disk = false;
  const Clock::time_point t4 = Clock::now();
  // One device entry too many now: the least recently used one goes down (after the copies in, so
  // that it may take the pages these bytes leave).
  if (count(CacheTier::kDevice) > capacity_) demote(least_used(CacheTier::kDevice));
  log::debug("prefix cache: {} tokens back in device memory ({} in blocks shared) in {:.1f} ms (blocks {:.1f}, KV rows {:.1f}, "
             "recurrent {:.1f}, device copy {:.1f}, demotion {:.1f})",
             length, shared * pool_.block_tokens(), ms(t0, Clock::now()), ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4), ms(t4, Clock::now()));
  return true;
}

void PrefixCache::record(int slot, uint64_t key, bool to_disk) {
  if (!enabled()) return;
  if (Entry* e = find(key)) {
    e->used = ++clock_;  // (an entry in a lower tier stays there until a hit needs it)
    if (to_disk && e->disk == Entry::Disk::kNone) write(key);
    return;
  }
  if (count(CacheTier::kDevice) >= capacity_) demote(least_used(CacheTier::kDevice));
  const Sequence& seq = pool_.sequence(slot);
  const int64_t n = seq.n_tokens();
  Entry e;
  e.key = key;
  e.tokens.assign(seq.tokens().begin(), seq.tokens().begin() + n);
  const std::vector<int32_t>& blocks = seq.state().blocks;
  e.blocks.assign(blocks.begin(), blocks.begin() + pool_.blocks_for(n));  // the last may be partly filled
  e.recurrent = device_copies(seq);
  copy_recurrent(seq, e.recurrent, /*to_copies=*/true);
  e.used = ++clock_;
  add(std::move(e));
  if (to_disk) write(key);
}

bool PrefixCache::evict_sparing(std::optional<uint64_t> spare) {
  // The least recently used entry that alone keeps a block (demoting it frees one); else the least
  // recently used one holding a block only entries keep (entries that share all their blocks, e.g.
  // two prefixes ending in the same block: demoting them one after another frees it). Entries whose
  // blocks running sequences keep stay.
  size_t alone = entries_.size(), shared = entries_.size();
  auto older = [&](size_t i, size_t than) { return than == entries_.size() || entries_[i].used < entries_[than].used; };
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.tier != CacheTier::kDevice || e.key == spare) continue;
    if (older(i, alone) && std::any_of(e.blocks.begin(), e.blocks.end(), [&](int32_t b) { return pool_.keepers(b) == 1; }))
      alone = i;
    if (older(i, shared) &&
        std::any_of(e.blocks.begin(), e.blocks.end(), [&](int32_t b) { return pool_.keepers(b) == held_[static_cast<size_t>(b)]; }))
      shared = i;
  }
  const size_t best = alone < entries_.size() ? alone : shared;
  if (best == entries_.size()) return false;
  demote(best);
  return true;
}

void PrefixCache::demote(size_t index) {
  const auto t0 = std::chrono::steady_clock::now();
  Entry& e = entries_[index];
  const uint64_t key = e.key;
  const auto length = static_cast<int64_t>(e.tokens.size());
  size_t bytes = pool_.kv_bytes(length);
  for (const backend::Buffer& b : e.recurrent) bytes += b.view().nbytes();
  // Its bytes, unless it goes straight to a file that holds them already.
  const bool to_host = bytes <= host_budget_;
  std::shared_ptr<const StateBytes> state;
  if (to_host || (store_ != nullptr && e.disk != Entry::Disk::kStored)) state = device_bytes(e);
  let_go(e);
  spare_.push_back(std::move(e.recurrent));
  e.recurrent = {};
  set_tier(e, CacheTier::kHost);
  e.bytes = std::move(state);
  ++stats_.evictions[tier_index(CacheTier::kDevice)];
  log::debug("prefix cache: {} tokens out of device memory in {:.1f} ms", length,
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (to_host && host_room(bytes, key)) {
    stats_.host_bytes += bytes;
    return;
  }
  to_disk(key);  // too big for host memory (or none left): on down
}

bool PrefixCache::host_room(uint64_t bytes, uint64_t keep) {
  while (stats_.host_bytes + bytes > host_budget_) {
    size_t lru = entries_.size();
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].tier == CacheTier::kHost && entries_[i].key != keep &&
          (lru == entries_.size() || entries_[i].used < entries_[lru].used))
        lru = i;
    if (lru == entries_.size()) return false;
    ++stats_.evictions[tier_index(CacheTier::kHost)];
    stats_.host_bytes -= entries_[lru].bytes->bytes();
    to_disk(entries_[lru].key);
  }
  return true;
}

void PrefixCache::to_disk(uint64_t key) {
  Entry& e = *find(key);
  set_tier(e, CacheTier::kDisk);
  if (e.disk == Entry::Disk::kStored) {
    e.bytes.reset();
  } else if (e.disk == Entry::Disk::kNone && !write(key)) {
    drop(index_of(key));
  }  // (a write on its way keeps the bytes until the file is whole)
}

bool PrefixCache::write(uint64_t key) {
  if (store_ == nullptr) return false;
  const uint64_t file = store_->file_bytes(static_cast<int64_t>(find(key)->tokens.size()));
  if (file > disk_budget_ || writing_bytes_ + file > kMaxWriting || !disk_room(file, key)) return false;
  Entry& e = *find(key);
  std::shared_ptr<const StateBytes> bytes = e.bytes != nullptr ? e.bytes : device_bytes(e);
  if (e.tier != CacheTier::kDevice) e.bytes = bytes;  // a hit meanwhile reads them, not the file
  store_->write(key, std::move(bytes));
  set_disk(e, Entry::Disk::kWriting);
  stats_.disk_bytes += file;
  writing_bytes_ += file;
  return true;
}

bool PrefixCache::disk_room(uint64_t bytes, uint64_t keep) {
  while (stats_.disk_bytes + bytes > disk_budget_) {
    size_t lru = entries_.size();
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].disk == Entry::Disk::kStored && entries_[i].key != keep &&
          (lru == entries_.size() || entries_[i].used < entries_[lru].used))
        lru = i;
    if (lru == entries_.size()) return false;
    forget_file(lru);
  }
  return true;
}

void PrefixCache::forget_file(size_t index) {
  Entry& e = entries_[index];
  store_->remove(e.key);
  stats_.disk_bytes -= store_->file_bytes(static_cast<int64_t>(e.tokens.size()));
  ++stats_.evictions[tier_index(CacheTier::kDisk)];
  set_disk(e, Entry::Disk::kNone);
  if (e.tier == CacheTier::kDisk) drop(index);
}

bool PrefixCache::poll() {
  if (store_ == nullptr) return false;
  bool read = false;
  for (StateStore::Done& d : store_->poll()) {
    Entry* e = find(d.key);
    if (d.kind == StateStore::Done::Kind::kWrite) {
      writing_bytes_ -= d.bytes;
      stats_.disk_write_seconds += d.seconds;
      if (e == nullptr || e->disk != Entry::Disk::kWriting) continue;  // forgotten meanwhile
      if (!d.error.empty()) {
        log::error("prefix cache: a prefix of {} tokens was not written: {}", e->tokens.size(), d.error);
        ++stats_.disk_write_failures;
        stats_.disk_bytes -= d.bytes;
        set_disk(*e, Entry::Disk::kNone);
        if (e->tier == CacheTier::kDisk) drop(index_of(d.key));  // its bytes were all that was left
        continue;
      }
      ++stats_.disk_writes;
      stats_.disk_written_bytes += d.bytes;
      set_disk(*e, Entry::Disk::kStored);
      if (e->tier == CacheTier::kDisk) e->bytes.reset();
      continue;
    }
    read = true;
    stats_.disk_read_seconds += d.seconds;
    if (e != nullptr) e->reading = false;
    if (!d.error.empty()) {
      log::warn("prefix cache: removing {}: {}", store_->path(d.key).string(), d.error);
      ++stats_.disk_read_failures;
      if (e != nullptr && e->disk == Entry::Disk::kStored) {
        forget_file(index_of(d.key));
      } else if (e == nullptr) {
        store_->remove(d.key);
      }
      continue;
    }
    ++stats_.disk_reads;
    stats_.disk_read_bytes += d.bytes;
    if (e == nullptr || e->tier != CacheTier::kDisk) continue;  // gone, or back in memory meanwhile
    // A host entry now (over the budget for a moment if it must be: its request takes it next).
    const uint64_t bytes = d.state->bytes();
    host_room(bytes, d.key);
    e = find(d.key);
    e->bytes = std::move(d.state);
    set_tier(*e, CacheTier::kHost);
    e->from_disk = true;
    stats_.host_bytes += bytes;
  }
  return read;
}

void PrefixCache::wait_for_disk(std::chrono::milliseconds timeout) {
  if (store_ != nullptr) store_->wait(timeout);
}

void PrefixCache::drop(size_t index) {
  Entry& e = entries_[index];
  if (e.tier == CacheTier::kHost) stats_.host_bytes -= e.bytes->bytes();
  if (e.tier == CacheTier::kDevice) {
    let_go(e);
    spare_.push_back(std::move(e.recurrent));
  }
  --tiers_[tier_index(e.tier)];
  if (e.disk != Entry::Disk::kNone) --files_;
  by_key_.erase(e.key);
  if (index + 1 != entries_.size()) {
    entries_[index] = std::move(entries_.back());
    by_key_[entries_[index].key] = index;
  }
  entries_.pop_back();
}

}  // namespace strata::runtime
