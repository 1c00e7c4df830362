// Sequence state: forward, truncate, snapshot/restore and the checked serialization.
#include "runtime/sequence.h"

#include <algorithm>
#include <cstring>

#include "backend/ops.h"
#include "core/error.h"
#include "core/hash.h"
#include "runtime/state_format.h"

namespace strata::runtime {

namespace {

// Calls f with each run of contiguous rows that holds the part of a buffer a state of n_tokens
// uses, in token order: a recurrent buffer whole; a token-indexed buffer's first n_tokens rows (a
// paged state's block after block).
template <typename F>
void for_stored_parts(const model::ModelState& state, const model::StateBuffer& b, int64_t n_tokens, F&& f) {
  const Tensor& t = b.tensor.view();
  if (!b.token_indexed) {
    f(t);
  } else if (!state.paged()) {
    f(t.rows(0, n_tokens));
  } else {
    const int64_t bt = state.kv.block_tokens;
    check(n_tokens <= state.rows_held(), ErrorKind::kInternal, "{} tokens in blocks for {}", n_tokens,
          state.rows_held());
    for (int64_t at = 0; at < n_tokens; at += bt) {
      const int64_t row = int64_t{state.blocks[static_cast<size_t>(at / bt)]} * bt;
      f(t.rows(row, row + std::min(bt, n_tokens - at)));
    }
  }
}

size_t stored_bytes(const model::StateBuffer& b, int64_t n_tokens) {
  const Tensor& t = b.tensor.view();
  return b.token_indexed ? t.rows(0, 1).nbytes() * static_cast<size_t>(n_tokens) : t.nbytes();
}

}  // namespace

Sequence::Sequence(const model::Model& model, int64_t capacity)
    : fingerprint_(model.fingerprint()), state_(model.new_state(capacity)) {
  tokens_.reserve(static_cast<size_t>(capacity));
}

Sequence::Sequence(std::string fingerprint, model::ModelState state)
    : fingerprint_(std::move(fingerprint)), state_(std::move(state)) {
  check(state_.n_tokens >= 0 && state_.n_tokens <= state_.capacity, ErrorKind::kInvalidInput,
        "state holds {} tokens; its capacity is {}", state_.n_tokens, state_.capacity);
  tokens_.reserve(static_cast<size_t>(state_.capacity));
  tokens_.resize(static_cast<size_t>(state_.n_tokens));
}

bool Sequence::truncatable() const {
  for (const auto& b : state_.buffers)
    if (!b.token_indexed) return false;
  return true;
}

void Sequence::forward(model::Model& model, std::span<const int32_t> tokens, const Tensor& logits, bool all_logits) {
  check(model.fingerprint() == fingerprint_, ErrorKind::kInvalidInput, "this sequence belongs to another model");
  check(!pending_, ErrorKind::kInternal, "a pending token's id is still unknown");
  model.forward(tokens, state_, logits, all_logits);  // checks capacity before touching the state
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

void Sequence::forward_pending(model::Model& model, const Tensor& token, const Tensor& logits) {
  check(model.fingerprint() == fingerprint_, ErrorKind::kInvalidInput, "this sequence belongs to another model");
  check(!pending_, ErrorKind::kInternal, "a pending token's id is still unknown");
  model.forward_device_token(token, state_, logits);
  tokens_.push_back(-1);
  pending_ = true;
}

void forward_decode(model::Model& model, std::span<const DecodeEntry> entries, std::vector<model::DecodeItem>& items) {
  const auto most = static_cast<size_t>(std::max<int64_t>(1, model.max_decode_batch()));
  for (size_t at = 0; at < entries.size(); at += most) {
    const std::span<const DecodeEntry> group = entries.subspan(at, std::min(most, entries.size() - at));
    items.clear();
    for (const DecodeEntry& e : group) {
      check(model.fingerprint() == e.seq->fingerprint_, ErrorKind::kInvalidInput, "this sequence belongs to another model");
      check(!e.seq->pending_, ErrorKind::kInternal, "a pending token's id is still unknown");
      items.push_back(model::DecodeItem{e.id, e.device_id, &e.seq->state_, e.logits});
    }
    model.forward_decode(items);  // checks each state's capacity before touching any
    for (const DecodeEntry& e : group) {
      e.seq->tokens_.push_back(e.device_id.empty() ? e.id : -1);
      e.seq->pending_ = !e.device_id.empty();
    }
  }
}

void Sequence::resolve_pending(int32_t id) {
  check(pending_, ErrorKind::kInternal, "no token is pending");
  tokens_.back() = id;
  pending_ = false;
}

void Sequence::rewind_to(int64_t n) {
  if (n < static_cast<int64_t>(tokens_.size())) pending_ = false;  // the pending token is dropped
  state_.n_tokens = n;
  tokens_.resize(static_cast<size_t>(n));
  ++rewinds_;
}

void Sequence::truncate(int64_t n) {
  check(n >= 0 && n <= n_tokens(), ErrorKind::kInvalidInput, "truncate to {} tokens: the sequence has {}", n,
        n_tokens());
  check(truncatable(), ErrorKind::kUnsupported,
        "this model keeps recurrent state, which cannot be truncated; restore a snapshot instead");
  rewind_to(n);
}

void Sequence::reset() {
  // A paged state's KV pools belong to other sequences too; its rows are written before they are read.
  for (const model::StateBuffer& b : state_.buffers)
    if (!(b.token_indexed && state_.paged())) backend::zero(b.tensor.view());
  rewind_to(0);
}

void Sequence::assume(std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  check(n <= capacity() && n <= state_.rows_held(), ErrorKind::kInternal,
        "a prefix of {} tokens in a sequence of capacity {} holding rows for {}", n, capacity(),
        state_.rows_held());
  rewind_to(0);
  tokens_.assign(tokens.begin(), tokens.end());
  state_.n_tokens = n;
}

size_t Sequence::kv_bytes(const model::ModelState& state, int64_t n) {
  size_t total = 0;
  for (const auto& b : state.buffers)
    if (b.token_indexed) total += stored_bytes(b, n);
  return total;
}

void Sequence::save_kv(const model::ModelState& state, int64_t n, uint8_t* dst) {
  for (const auto& b : state.buffers)
    if (b.token_indexed)
      for_stored_parts(state, b, n, [&](const Tensor& part) {
        backend::copy_to_host(part, dst);
        dst += part.nbytes();
      });
}

void Sequence::load_kv(const model::ModelState& state, int64_t n, const uint8_t* src) {
  for (const auto& b : state.buffers)
    if (b.token_indexed)
      for_stored_parts(state, b, n, [&](const Tensor& part) {
        backend::copy_from_host(src, part);
        src += part.nbytes();
      });
}

std::vector<uint8_t> Sequence::serialize() const {
  check(!pending_, ErrorKind::kInternal, "a pending token's id is still unknown");
  const std::vector<StateSection> sections = state_sections(state_, n_tokens());
  std::vector<uint8_t> out;
  out.reserve(state_format_bytes(fingerprint_, sections, n_tokens()));
  StateWriter w([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  w.begin(fingerprint_, tokens_, sections.size());
  for (size_t i = 0; i < sections.size(); ++i) {
    w.section(sections[i]);
    for_stored_parts(state_, state_.buffers[i], n_tokens(), [&](const Tensor& part) { w.data(part); });
  }
  w.finish();
  return out;
}

void Sequence::deserialize(std::span<const uint8_t> bytes) {
  check_state_checksum(bytes);
  size_t at = 0;
  StateReader r([&](uint8_t* dst, size_t n) {
    check(n <= bytes.size() - at, ErrorKind::kInvalidInput, "truncated");
    std::memcpy(dst, bytes.data() + at, n);
    at += n;
  });
  const StateHeader header = r.header(capacity());
  check(header.fingerprint == fingerprint_, ErrorKind::kInvalidInput,
        "state was saved by a different model (fingerprint {}, this model {})", header.fingerprint, fingerprint_);
  const auto n = static_cast<int64_t>(header.tokens.size());
  check(n <= state_.rows_held(), ErrorKind::kInvalidInput,
        "state holds {} tokens; this sequence holds KV blocks for {}", n, state_.rows_held());
  // Everything is read and checked before anything is copied, so a bad state leaves the sequence
  // as it was.
  const std::vector<StateSection> expected = state_sections(state_, n);
  std::vector<std::vector<uint8_t>> data(expected.size());
  r.sections(expected, [&](size_t i) {
    data[i].resize(expected[i].bytes);
    return std::vector<std::span<uint8_t>>{data[i]};
  });
  r.finish();
  check(at == bytes.size(), ErrorKind::kInvalidInput, "state has trailing bytes");
  for (size_t i = 0; i < expected.size(); ++i) {
    const uint8_t* src = data[i].data();
    for_stored_parts(state_, state_.buffers[i], n, [&](const Tensor& part) {
      backend::copy_from_host(src, part);
      src += part.nbytes();
    });
  }
  rewind_to(0);
  state_.n_tokens = n;
  tokens_ = header.tokens;
  tokens_.reserve(static_cast<size_t>(capacity()));
}

Snapshot::Snapshot(const Sequence& seq) : fingerprint_(seq.fingerprint()) {
  for (const auto& b : seq.state().buffers)
    if (!b.token_indexed) recurrent_.emplace_back(b.tensor.device(), b.tensor.dtype(), b.tensor.shape());
}

void Snapshot::take(const Sequence& seq) {
  check(seq.fingerprint() == fingerprint_, ErrorKind::kInvalidInput, "snapshot of another model's sequence");
  size_t i = 0;
  for (const auto& b : seq.state().buffers) {
    if (b.token_indexed) continue;
    check(i < recurrent_.size() && recurrent_[i].view().nbytes() == b.tensor.view().nbytes(), ErrorKind::kInternal,
          "snapshot does not fit this sequence");
    backend::copy(b.tensor.view(), recurrent_[i++].view());
  }
  n_tokens_ = seq.n_tokens();
  rewinds_ = seq.rewinds_;
}

void Snapshot::restore(Sequence& seq) {
  check(!empty(), ErrorKind::kInvalidInput, "restore from an empty snapshot");
  check(seq.fingerprint() == fingerprint_, ErrorKind::kInvalidInput, "snapshot of another model's sequence");
  check(seq.rewinds_ == rewinds_ && seq.n_tokens() >= n_tokens_, ErrorKind::kInvalidInput,
        "the sequence moved back since this snapshot was taken; its cached rows may be overwritten");
  size_t i = 0;
  for (auto& b : seq.state().buffers)
    if (!b.token_indexed) backend::copy(recurrent_[i++].view(), b.tensor.view());
  seq.rewind_to(n_tokens_);
  rewinds_ = seq.rewinds_;  // the sequence is at this point again: a later restore stays valid
}

}  // namespace strata::runtime
