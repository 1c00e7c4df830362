// StatePool: slots and KV blocks allocated up front, each handed out lowest first.
#include "runtime/state_pool.h"

#include <algorithm>
#include <bit>
#include <climits>

#include "backend/memory.h"
#include "core/error.h"

namespace strata::runtime {

StatePool::StatePool(const model::Model& model, int64_t slots, int64_t capacity, int64_t kv_blocks,
                     int64_t block_tokens)
    : capacity_(capacity), block_tokens_(block_tokens) {
  check(slots > 0, ErrorKind::kInvalidInput, "the engine needs at least one sequence slot (got {})",
        slots);
  check(capacity > 0, ErrorKind::kInvalidInput, "the context size must be positive (got {})",
        capacity);
  check(kv_blocks >= 0, ErrorKind::kInvalidInput, "the KV block count must not be negative");
  check(block_tokens > 0 && (block_tokens & (block_tokens - 1)) == 0 && block_tokens <= 4096,
        ErrorKind::kInvalidInput, "KV blocks of {} tokens: not a power of two up to 4096", block_tokens);
  table_blocks_ = blocks_for(capacity);
  kv_blocks_ = kv_blocks == 0 ? slots * table_blocks_ : kv_blocks;
  check(kv_blocks_ >= table_blocks_, ErrorKind::kInvalidInput,
        "the KV pool has {} blocks of {} tokens; one sequence of the context size ({} tokens) needs {}",
        kv_blocks_, block_tokens_, capacity, table_blocks_);
  check(kv_blocks_ <= INT32_MAX / block_tokens_, ErrorKind::kInvalidInput,
        "{} KV blocks of {} tokens are more rows than a pool indexes", kv_blocks_, block_tokens_);

  const Device device = device_ = model.device();
  // Pages of about four blocks' rows, at least 64 KiB and at most 4 MiB.
  const size_t block = block_bytes(model.info(), block_tokens_);
  host_pages_ = HostPages::create(device, std::clamp(std::bit_ceil(4 * std::max<size_t>(block, 1)), size_t{64} << 10,
                                                     size_t{4} << 20));
  // The pools are the token-indexed buffers of one state as long as all the blocks together.
  const model::ModelState pools = model.new_state(kv_blocks_ * block_tokens_);
  tables_ = backend::Buffer(device, DType::kI32, {slots, table_blocks_});
  sequences_.reserve(static_cast<size_t>(slots));
  table_uploads_.reserve(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i) {
    model::ModelState s = model.new_state(block_tokens_);  // its own KV rows give way to the pools
    for (size_t b = 0; b < s.buffers.size(); ++b)
      if (s.buffers[b].token_indexed) s.buffers[b].tensor = pools.buffers[b].tensor;
    s.capacity = capacity;
    s.kv.block_tokens = block_tokens_;
    s.kv.table = tables_.view().rows(i, i + 1).reshaped({table_blocks_});
    s.blocks.reserve(static_cast<size_t>(table_blocks_));
    sequences_.push_back(std::make_unique<Sequence>(model.fingerprint(), std::move(s)));
    table_uploads_.emplace_back(device);
  }
  swaps_.resize(static_cast<size_t>(slots));
  for (int64_t i = slots - 1; i >= 0; --i) free_.push_back(static_cast<int>(i));
  for (int64_t b = 0; b < kv_blocks_; ++b) free_blocks_.push_back(static_cast<int32_t>(b));
  refs_.assign(static_cast<size_t>(kv_blocks_), 0);
  const model::ModelInfo info = model.info();
  bytes_ = static_cast<size_t>(slots) * info.state_bytes_fixed +
           static_cast<size_t>(kv_blocks_) * block_bytes(info, block_tokens_);
}

int StatePool::acquire() {
  if (free_.empty()) return -1;
  const int slot = free_.back();
  free_.pop_back();
  sequences_[static_cast<size_t>(slot)]->reset();
  return slot;
}

void StatePool::release(int slot) {
  check(slot >= 0 && slot < slots() && std::find(free_.begin(), free_.end(), slot) == free_.end(),
        ErrorKind::kInternal, "slot {} released twice or never taken", slot);
  give_blocks_back(slot);
  swaps_[static_cast<size_t>(slot)] = Swap{};
  free_.push_back(slot);
  // Lowest first again, so that a lone request always runs in slot 0 (its graphs stay warm).
  std::sort(free_.begin(), free_.end(), std::greater<>());
}

bool StatePool::reserve(int slot, int64_t tokens) {
  model::ModelState& s = sequence(slot).state();
  const int64_t want = blocks_for(std::min(tokens, capacity_)) - static_cast<int64_t>(s.blocks.size());
  if (want <= 0) return true;
  if (want > free_kv_blocks()) return false;
  for (int64_t i = 0; i < want; ++i) {
    s.blocks.push_back(free_blocks_.front());
    refs_[static_cast<size_t>(free_blocks_.front())] = 1;
    free_blocks_.pop_front();
  }
  upload_table(slot);
  return true;
}

void StatePool::share(int slot, std::span<const int32_t> blocks) {
  model::ModelState& s = sequence(slot).state();
  check(s.blocks.empty() && static_cast<int64_t>(blocks.size()) <= table_blocks_, ErrorKind::kInternal,
        "slot {} takes {} shared blocks holding {}", slot, blocks.size(), s.blocks.size());
  hold(blocks);
  s.blocks.assign(blocks.begin(), blocks.end());
  upload_table(slot);
}

bool StatePool::share_prefix(int slot, std::span<const int32_t> blocks, int64_t tokens) {
  const auto whole = static_cast<size_t>(tokens / block_tokens_);
  const int64_t rest = tokens % block_tokens_;
  check(blocks.size() == whole + (rest > 0 ? 1 : 0), ErrorKind::kInternal, "a prefix of {} tokens in {} blocks",
        tokens, blocks.size());
  if (rest > 0 && free_blocks_.empty()) return false;
  share(slot, blocks.first(whole));
  if (rest > 0) {
    (void)reserve(slot, tokens);  // one block, free as checked
    copy_rows(blocks[whole], sequence(slot).state().blocks[whole], rest);
  }
  return true;
}

void StatePool::copy_rows(int32_t from, int32_t to, int64_t rows) {
  for (const model::StateBuffer& b : sequences_.front()->state().buffers) {
    if (!b.token_indexed) continue;
    const Tensor& t = b.tensor.view();
    const int64_t src = int64_t{from} * block_tokens_, dst = int64_t{to} * block_tokens_;
    backend::copy(t.rows(src, src + rows), t.rows(dst, dst + rows));
  }
}

void StatePool::hold(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    check(b >= 0 && b < kv_blocks_ && refs_[static_cast<size_t>(b)] > 0, ErrorKind::kInternal,
          "block {} is not in use", b);
    ++refs_[static_cast<size_t>(b)];
  }
}

void StatePool::let_go(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) unref(b);
}

size_t StatePool::kv_bytes(int64_t tokens) const { return Sequence::kv_bytes(sequences_.front()->state(), tokens); }

template <typename F>
void StatePool::for_runs(std::span<const int32_t> blocks, int64_t tokens, F&& f, int64_t from) const {
  check(tokens >= 0 && blocks_for(tokens) <= static_cast<int64_t>(blocks.size()) && from >= 0 &&
            from % block_tokens_ == 0,
        ErrorKind::kInternal, "tokens [{}, {}) in {} blocks", from, tokens, blocks.size());
  size_t offset = 0;
  for (const model::StateBuffer& b : sequences_.front()->state().buffers) {  // every slot's are the pools
    if (!b.token_indexed) continue;
    const Tensor& pool = b.tensor.view();
    const size_t row = pool.rows(0, 1).nbytes();
    for (int64_t at = from; at < tokens;) {
      auto i = static_cast<size_t>(at / block_tokens_);
      const int32_t first = blocks[i];
      while ((static_cast<int64_t>(i) + 1) * block_tokens_ < tokens && blocks[i + 1] == blocks[i] + 1) ++i;
      const int64_t end = std::min((static_cast<int64_t>(i) + 1) * block_tokens_, tokens);
      const int64_t from = int64_t{first} * block_tokens_;
      f(pool.rows(from, from + end - at), offset + static_cast<size_t>(at) * row);
      at = end;
    }
    offset += static_cast<size_t>(tokens) * row;
  }
}

void StatePool::save_blocks(std::span<const int32_t> blocks, int64_t tokens, PagedBytes& dst) const {
  check(dst.size() == kv_bytes(tokens), ErrorKind::kInternal, "{} bytes for rows of {}", dst.size(), kv_bytes(tokens));
  for_runs(blocks, tokens, [&](const Tensor& rows, size_t offset) { dst.copy_queued(rows, offset, /*to_pages=*/true); });
  backend::synchronize(device_);
}

void StatePool::load_blocks(std::span<const int32_t> blocks, int64_t tokens, const PagedBytes& src,
                            int64_t from) const {
  check(src.size() == kv_bytes(tokens), ErrorKind::kInternal, "{} bytes for rows of {}", src.size(), kv_bytes(tokens));
  for_runs(
      blocks, tokens, [&](const Tensor& rows, size_t offset) { src.copy_queued(rows, offset, /*to_pages=*/false); },
      from);
  backend::synchronize(device_);  // before the pages may go
}

void StatePool::unref(int32_t block) {
  int32_t& r = refs_.at(static_cast<size_t>(block));
  check(r > 0, ErrorKind::kInternal, "block {} given back twice", block);
  if (--r == 0) free_blocks_.push_back(block);
}

void StatePool::swap_out(int slot) {
  Swap& w = swaps_.at(static_cast<size_t>(slot));
  check(!w.out, ErrorKind::kInternal, "slot {} swapped out twice", slot);
  const Sequence& seq = sequence(slot);
  w.tokens = seq.n_tokens();
  w.bytes = host_pages_->take(seq.kv_bytes(w.tokens));
  save_blocks(seq.state().blocks, w.tokens, w.bytes);  // behind the sequence's queued steps
  w.out = true;
  give_blocks_back(slot);
}

bool StatePool::swap_in(int slot) {
  Swap& w = swaps_.at(static_cast<size_t>(slot));
  check(w.out, ErrorKind::kInternal, "slot {} is not swapped out", slot);
  if (!reserve(slot, w.tokens)) return false;
  load_blocks(sequence(slot).state().blocks, w.tokens, w.bytes);
  w = Swap{};
  return true;
}

size_t StatePool::slot_bytes(const model::ModelInfo& info, int64_t capacity) {
  return info.state_bytes_fixed + info.state_bytes_per_token * static_cast<size_t>(capacity);
}

size_t StatePool::block_bytes(const model::ModelInfo& info, int64_t block_tokens) {
  return info.state_bytes_per_token * static_cast<size_t>(block_tokens);
}

void StatePool::give_blocks_back(int slot) {
  model::ModelState& s = sequence(slot).state();
  // The table's stale entries are never read: a sequence reads only the tokens it holds blocks for.
  for (int32_t b : s.blocks) unref(b);
  s.blocks.clear();
}

void StatePool::upload_table(int slot) {
  const model::ModelState& s = sequence(slot).state();
  backend::Upload& upload = table_uploads_[static_cast<size_t>(slot)];
  auto* host = static_cast<int32_t*>(upload.host(static_cast<size_t>(table_blocks_) * sizeof(int32_t)));
  std::fill(std::copy(s.blocks.begin(), s.blocks.end(), host), host + table_blocks_, 0);
  upload.start(s.kv.table);
}

}  // namespace strata::runtime
