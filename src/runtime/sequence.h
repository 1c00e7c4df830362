// Sequence: the state of one generation stream (per attention layer a KV cache, per GDN layer a
// conv window and an fp32 recurrent state; the model declares the buffers) plus the token ids it
// has consumed. On top of it: snapshot/restore (speculative decoding, prefix reuse), truncate
// (attention-only models) and a checked byte serialization (the on-disk state cache).
//
// A paged state (runtime::StatePool) keeps its KV rows in blocks of shared pools; everything here
// reads and writes them through its block table, and serializes exactly as a plain state.
//
// The serialized layout is runtime/state_format.h's (the prefix cache's files are the same format).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace strata::runtime {

class Snapshot;
class Sequence;
class VerifySlots;

// One sequence's token in a batched decode step (forward_decode): its id on the host, or pending in
// device memory (as Sequence::forward_pending), and where its logits go.
struct DecodeEntry {
  Sequence* seq = nullptr;
  int32_t id = 0;
  Tensor device_id;  // not empty: the id lies here, and is appended as pending
  Tensor logits;
};

// Runs one token for each entry, as few steps as the model allows (Model::forward_decode, at most
// max_decode_batch() sequences a step), and appends it to its sequence as forward() /
// forward_pending() would. `items` is the caller's scratch (kept, so that steps allocate nothing).
void forward_decode(model::Model& model, std::span<const DecodeEntry> entries, std::vector<model::DecodeItem>& items);

class Sequence {
 public:
  Sequence(const model::Model& model, int64_t capacity);
  // A sequence over buffers made elsewhere (e.g. model::make_hybrid_state for sizing a state
  // without weights); `fingerprint` names the model they belong to.
  Sequence(std::string fingerprint, model::ModelState state);

  int64_t n_tokens() const { return state_.n_tokens; }
  int64_t capacity() const { return state_.capacity; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::string& fingerprint() const { return fingerprint_; }
  // True when every buffer is token-indexed (no recurrent state), so truncate() works.
  bool truncatable() const;

  // Runs the model on `tokens` at the end of the sequence and appends them.
  void forward(model::Model& model, std::span<const int32_t> tokens, const Tensor& logits, bool all_logits);

  // forward() of one token whose id lies in memory (model::Model::forward_device_token), so that
  // the step is queued before the host knows the id; the token is appended as pending until
  // resolve_pending() records its id.
  void forward_pending(model::Model& model, const Tensor& token, const Tensor& logits);
  void resolve_pending(int32_t id);

  // Drops tokens after the first n (attention-only models: their cache rows are simply reused).
  // Recurrent state cannot be rolled back this way: restore a snapshot instead.
  void truncate(int64_t n);

  // The state now holds `tokens` (its caller has put their KV rows and recurrent state in place: a
  // cached prefix); the sequence goes on after them.
  void assume(std::span<const int32_t> tokens);

  // Returns the sequence to empty, as new: every buffer zeroed (queued on the model's device), no
  // tokens. A pooled state starts each request this way.
  void reset();

  // The state as bytes (layout above), and back. deserialize checks the magic, version, checksum,
  // the model fingerprint and every buffer's name, dtype and shape; any mismatch is an Error and
  // leaves the sequence unchanged.
  std::vector<uint8_t> serialize() const;
  void deserialize(std::span<const uint8_t> bytes);

  // The first n tokens' rows of every token-indexed buffer as bytes, buffer after buffer (a paged
  // state's gathered from its blocks), and back: how the runtime moves a preempted sequence's KV
  // out of the pool and in again. load_kv needs the state to hold blocks for n tokens.
  size_t kv_bytes(int64_t n) const { return kv_bytes(state_, n); }
  void save_kv(int64_t n, uint8_t* dst) const { save_kv(state_, n, dst); }
  void load_kv(int64_t n, const uint8_t* src) { load_kv(state_, n, src); }
  // The same for any state (e.g. a pool's buffers with a cached prefix's blocks).
  static size_t kv_bytes(const model::ModelState& state, int64_t n);
  static void save_kv(const model::ModelState& state, int64_t n, uint8_t* dst);
  static void load_kv(const model::ModelState& state, int64_t n, const uint8_t* src);

  model::ModelState& state() { return state_; }
  const model::ModelState& state() const { return state_; }

 private:
  friend class Snapshot;
  friend class VerifySlots;
  friend void forward_decode(model::Model&, std::span<const DecodeEntry>, std::vector<model::DecodeItem>&);
  void rewind_to(int64_t n);

  std::string fingerprint_;
  model::ModelState state_;
  std::vector<int32_t> tokens_;  // reserved to capacity: appending never allocates
  uint64_t rewinds_ = 0;         // bumped whenever the sequence moves back (restore, truncate, load)
  bool pending_ = false;         // the last token's id is not known yet (forward_pending)
};

// A point a sequence can return to. Its memory (a copy of each recurrent buffer) is allocated once
// by the constructor; take() and restore() only copy into it, so the decode loop never allocates.
// Token-indexed buffers are not copied: rows before the snapshot's length are never rewritten
// while the sequence only moves forward, so restore() is valid until another rewind happens.
class Snapshot {
 public:
  explicit Snapshot(const Sequence& seq);

  // Records seq's current point.
  void take(const Sequence& seq);
  // Returns seq to the recorded point: its later tokens are forgotten and its logits are exactly
  // those of never having taken them. Errors if seq moved back elsewhere since take() (the
  // recorded cache rows may have been overwritten) or belongs to another model.
  void restore(Sequence& seq);

  int64_t n_tokens() const { return n_tokens_; }
  bool empty() const { return n_tokens_ < 0; }

 private:
  std::string fingerprint_;
  std::vector<backend::Buffer> recurrent_;  // copies of the non-token-indexed buffers, in order
  int64_t n_tokens_ = -1;
  uint64_t rewinds_ = 0;
};

}  // namespace strata::runtime
