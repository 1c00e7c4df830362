// Sequence state: forward, truncate, snapshot/restore and the checked serialization.
#include "runtime/sequence.h"

#include <algorithm>
#include <cstring>

#include "backend/ops.h"
#include "core/error.h"
#include "core/hash.h"

namespace strata::runtime {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'S', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChecksumBytes = 32;

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

// The shape a buffer has in a serialized state: a paged buffer's as if it were the state's own.
Shape stored_shape(const model::ModelState& state, const model::StateBuffer& b) {
  Shape shape = b.tensor.shape();
  if (b.token_indexed && state.paged()) shape[0] = state.capacity;
  return shape;
}

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  // The bytes of t, wherever it lives.
  void put_tensor(const Tensor& t) {
    const size_t at = out_.size();
    out_.resize(at + t.nbytes());
    backend::copy_to_host(t, out_.data() + at);
  }
  void put_string(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    put_bytes(s.data(), s.size());
  }
  void reserve(size_t n) { out_.reserve(n); }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <typename T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  const uint8_t* take(size_t n, const char* what) {
    check(n <= in_.size() - pos_, ErrorKind::kInvalidInput, "state: truncated while reading {}", what);
    const uint8_t* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::string get_string(const char* what) {
    const auto n = get<uint32_t>(what);
    check(n <= 4096, ErrorKind::kInvalidInput, "state: {} of {} bytes is implausible", what, n);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

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
  Writer w;
  size_t total = 64 + fingerprint_.size() + tokens_.size() * sizeof(int32_t) + kChecksumBytes;
  for (const auto& b : state_.buffers) total += 64 + b.name.size() + stored_bytes(b, n_tokens());
  w.reserve(total);
  w.put_bytes(kMagic, sizeof(kMagic));
  w.put(kVersion);
  w.put_string(fingerprint_);
  w.put(n_tokens());
  w.put_bytes(tokens_.data(), tokens_.size() * sizeof(int32_t));
  w.put(static_cast<uint32_t>(state_.buffers.size()));
  for (const auto& b : state_.buffers) {
    const Shape shape = stored_shape(state_, b);
    w.put_string(b.name);
    w.put(static_cast<uint8_t>(b.tensor.dtype()));
    w.put(static_cast<uint8_t>(b.token_indexed));
    w.put(static_cast<uint8_t>(shape.rank()));
    w.put(static_cast<uint8_t>(0));
    for (int i = 0; i < shape.rank(); ++i) w.put(shape[i]);
    const size_t n = stored_bytes(b, n_tokens());
    w.put(static_cast<uint64_t>(n));
    for_stored_parts(state_, b, n_tokens(), [&](const Tensor& part) { w.put_tensor(part); });
  }
  Hasher h;
  h.update(w.bytes().data(), w.bytes().size());
  const std::string sum = h.hex_digest();
  w.put_bytes(sum.data(), sum.size());
  return std::move(w.bytes());
}

void Sequence::deserialize(std::span<const uint8_t> bytes) {
  check(bytes.size() >= sizeof(kMagic) + kChecksumBytes && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0,
        ErrorKind::kInvalidInput, "not a strata state (bad magic)");
  const std::span<const uint8_t> body = bytes.first(bytes.size() - kChecksumBytes);
  Hasher h;
  h.update(body.data(), body.size());
  check(std::memcmp(h.hex_digest().data(), bytes.data() + body.size(), kChecksumBytes) == 0,
        ErrorKind::kInvalidInput, "state is corrupted (checksum mismatch)");
  Reader r(body);
  r.take(sizeof(kMagic), "magic");
  const auto version = r.get<uint32_t>("version");
  check(version == kVersion, ErrorKind::kUnsupported, "state version {} is not supported (this build reads {})",
        version, kVersion);
  const std::string fp = r.get_string("fingerprint");
  check(fp == fingerprint_, ErrorKind::kInvalidInput,
        "state was saved by a different model (fingerprint {}, this model {})", fp, fingerprint_);
  const auto n = r.get<int64_t>("token count");
  check(n >= 0 && n <= capacity(), ErrorKind::kInvalidInput, "state holds {} tokens; this sequence's capacity is {}",
        n, capacity());
  const uint8_t* token_data = r.take(static_cast<size_t>(n) * sizeof(int32_t), "tokens");
  const auto sections = r.get<uint32_t>("section count");
  check(sections == state_.buffers.size(), ErrorKind::kInvalidInput, "state has {} sections; the model needs {}",
        sections, state_.buffers.size());
  // Validate every section before copying any, so a bad state leaves the sequence as it was.
  std::vector<const uint8_t*> data(sections);
  check(n <= state_.rows_held(), ErrorKind::kInvalidInput,
        "state holds {} tokens; this sequence holds KV blocks for {}", n, state_.rows_held());
  for (uint32_t i = 0; i < sections; ++i) {
    const model::StateBuffer& b = state_.buffers[i];
    const Tensor& t = b.tensor.view();
    const Shape shape = stored_shape(state_, b);
    const std::string name = r.get_string("section name");
    check(name == b.name, ErrorKind::kInvalidInput, "state section {} is '{}'; expected '{}'", i, name, b.name);
    const auto dtype = r.get<uint8_t>("dtype");
    const auto token_indexed = r.get<uint8_t>("kind");
    const auto rank = r.get<uint8_t>("rank");
    r.get<uint8_t>("padding");
    bool same = dtype == static_cast<uint8_t>(t.dtype) && token_indexed == static_cast<uint8_t>(b.token_indexed) &&
                rank == shape.rank();
    for (int d = 0; same && d < rank; ++d) {
      const auto dim = r.get<int64_t>("shape");
      same = (d == 0 && b.token_indexed) ? dim >= n : dim == shape[d];
    }
    check(same, ErrorKind::kInvalidInput,
          "state section '{}' does not match this model's buffer ({} {}){}", name,
          dtype_name(t.dtype), shape.str(),
          b.token_indexed ? "; was it saved with another --kv-cache-type?" : "");
    const auto nbytes = r.get<uint64_t>("section size");
    check(nbytes == stored_bytes(b, n), ErrorKind::kInvalidInput, "state section '{}' has {} bytes; expected {}",
          name, nbytes, stored_bytes(b, n));
    data[i] = r.take(nbytes, "section data");
  }
  check(r.done(), ErrorKind::kInvalidInput, "state has trailing bytes");
  for (uint32_t i = 0; i < sections; ++i) {
    const uint8_t* src = data[i];
    for_stored_parts(state_, state_.buffers[i], n, [&](const Tensor& part) {
      backend::copy_from_host(src, part);
      src += part.nbytes();
    });
  }
  rewind_to(0);
  state_.n_tokens = n;
  tokens_.resize(static_cast<size_t>(n));
  std::memcpy(tokens_.data(), token_data, static_cast<size_t>(n) * sizeof(int32_t));
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
