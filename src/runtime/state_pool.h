// StatePool: the sequence states an engine runs, allocated once when the engine starts, so that
// no request allocates state.
//
// A slot is one sequence: its recurrent state (per recurrent layer a conv window and an SSM
// matrix) and a block table. Attention KV lives apart, in one pool per KV buffer (per attention
// layer a K and a V pool) of fixed-size blocks (kBlockTokens rows unless told otherwise); a sequence holds the blocks its
// tokens need, in token order, and the kernels find its rows through its table (backend::KvBlocks).
// So memory goes to the tokens sequences have, not to the whole context of every slot, and a
// slot's table and recurrent buffers keep their addresses for the engine's life (a captured graph
// serves whichever request runs in the slot).
//
// When the blocks run out the engine preempts a sequence: swap_out copies its KV rows to host
// memory and returns its blocks; swap_in later takes blocks again and copies the rows back, so the
// sequence goes on exactly where it was (the bytes are the same; nothing is recomputed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "backend/memory.h"
#include "model/model.h"
#include "runtime/host_pages.h"
#include "runtime/sequence.h"

namespace strata::runtime {

class StatePool {
 public:
  static constexpr int64_t kBlockTokens = 64;  // tokens per KV block unless told otherwise

  // kv_blocks: the blocks of the KV pools; 0: every slot's whole context (nothing ever waits for
  // blocks). At least one whole context, so the oldest request always runs. block_tokens: a power
  // of two.
  StatePool(const model::Model& model, int64_t slots, int64_t capacity, int64_t kv_blocks = 0,
            int64_t block_tokens = kBlockTokens);

  int64_t slots() const { return static_cast<int64_t>(sequences_.size()); }
  int64_t free_slots() const { return static_cast<int64_t>(free_.size()); }
  int64_t capacity() const { return capacity_; }  // tokens per sequence
  size_t bytes() const { return bytes_; }         // all state: slots and KV pools
  int64_t kv_blocks() const { return kv_blocks_; }
  int64_t free_kv_blocks() const { return static_cast<int64_t>(free_blocks_.size()); }
  int64_t block_tokens() const { return block_tokens_; }
  int64_t blocks_for(int64_t tokens) const { return blocks_for(tokens, block_tokens_); }
  static int64_t blocks_for(int64_t tokens, int64_t block_tokens) {
    return (tokens + block_tokens - 1) / block_tokens;
  }

  // A free slot, reset to empty and holding no blocks; -1 when every slot is taken.
  int acquire();
  // Frees the slot, its blocks and any rows swapped out.
  void release(int slot);
  Sequence& sequence(int slot) { return *sequences_.at(static_cast<size_t>(slot)); }

  // Gives the slot's sequence blocks for `tokens` tokens in all (at most the capacity); false,
  // taking none, when too few are free.
  bool reserve(int slot, int64_t tokens);
  // Shared blocks (a cached prefix): the slot's sequence, holding none yet, takes `blocks` as its
  // first ones. A block is free again once no sequence and no hold() keeps it; its rows are never
  // written while shared (sequences write only past the shared prefix, in blocks of their own).
  void share(int slot, std::span<const int32_t> blocks);
  // share() of a cached prefix of `tokens` tokens in `blocks` (the last partly filled when tokens is
  // not a whole number of blocks): the whole blocks are shared, and the slot takes a block of its
  // own for the rest, with those rows copied in (its sequence writes past the prefix, in a block
  // no one else keeps). False, taking nothing, when no block is free for that.
  bool share_prefix(int slot, std::span<const int32_t> blocks, int64_t tokens);
  void hold(std::span<const int32_t> blocks);     // one more keeper of each (the prefix cache)
  void let_go(std::span<const int32_t> blocks);  // one keeper fewer
  int32_t keepers(int32_t block) const { return refs_.at(static_cast<size_t>(block)); }
  // The KV rows of the first `tokens` tokens whose blocks are `blocks` (in token order), as
  // Sequence::save_kv lays them out, into host pages and back: one copy per run of consecutive
  // blocks and page (page-locked on a GPU, so each is a DMA). Both return once the copies are done.
  size_t kv_bytes(int64_t tokens) const;
  void save_blocks(std::span<const int32_t> blocks, int64_t tokens, PagedBytes& dst) const;
  // from: only the rows of tokens [from, tokens) (from a whole number of blocks), those blocks
  // holding the others already.
  void load_blocks(std::span<const int32_t> blocks, int64_t tokens, const PagedBytes& src, int64_t from = 0) const;
  // The host memory states leave the device in (preemption here, the prefix cache's tiers).
  const std::shared_ptr<HostPages>& host_pages() const { return host_pages_; }
  // Preemption: the sequence's KV rows go to host memory and its blocks back to the pool (the
  // slot stays taken); swap_in takes blocks for them again and copies them back: false, doing
  // nothing, while too few blocks are free.
  void swap_out(int slot);
  bool swap_in(int slot);
  bool swapped(int slot) const { return swaps_.at(static_cast<size_t>(slot)).out; }

  // The state bytes a slot of `capacity` tokens costs: its recurrent state and a whole context of KV.
  static size_t slot_bytes(const model::ModelInfo& info, int64_t capacity);
  // The bytes of one KV block (every attention layer's K and V rows of block_tokens tokens).
  static size_t block_bytes(const model::ModelInfo& info, int64_t block_tokens = kBlockTokens);

 private:
  void give_blocks_back(int slot);
  void upload_table(int slot);
  void unref(int32_t block);
  void copy_rows(int32_t from, int32_t to, int64_t rows);  // a block's first rows into another
  // f(rows, offset) for each run of consecutive blocks among tokens [from, tokens)'s in `blocks`
  // (from: a whole number of blocks), per token-indexed buffer: the rows in the pool, and where
  // they are in kv_bytes(tokens)' layout.
  template <typename F>
  void for_runs(std::span<const int32_t> blocks, int64_t tokens, F&& f, int64_t from = 0) const;

  struct Swap {
    bool out = false;
    int64_t tokens = 0;          // rows saved
    PagedBytes bytes;            // Sequence::save_kv's layout
  };
  std::vector<std::unique_ptr<Sequence>> sequences_;
  std::vector<int> free_;  // taken from the back: the lowest slot first
  // Taken from the front, given back at the end: the lowest block first, and a block given back is
  // reused last (a resumed sequence's blocks are seldom its old ones).
  std::deque<int32_t> free_blocks_;
  std::vector<int32_t> refs_;  // per block: the sequences and holds keeping it
  std::vector<Swap> swaps_;
  std::vector<backend::Upload> table_uploads_;  // per slot: its table's way to the device
  backend::Buffer tables_;                      // I32 [slots, blocks per sequence]
  Device device_ = Device::kCpu;
  std::shared_ptr<HostPages> host_pages_;
  int64_t capacity_ = 0;
  int64_t kv_blocks_ = 0;
  int64_t block_tokens_ = kBlockTokens;
  int64_t table_blocks_ = 0;  // blocks_for(capacity)
  size_t bytes_ = 0;
};

}  // namespace strata::runtime
