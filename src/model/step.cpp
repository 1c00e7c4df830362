// Scratch and StepRunner.
#include "model/step.h"

#include <algorithm>
#include <cstring>

#include "core/hash.h"

namespace strata::model {

namespace {
enum IoSlot : size_t { kInputs, kLogits };
// Graphs kept (least recently made dropped first). A graph's key holds its sequences' state
// addresses, so each slot of a pool (and each batch of them) needs its own: room for 64 slots
// over a few context buckets.
constexpr size_t kMaxGraphs = 256;
}  // namespace

Tensor Scratch::get(size_t slot, Shape shape, DType dtype) {
  if (slot >= buffers_.size()) buffers_.resize(slot + 1);
  backend::Buffer& b = buffers_[slot];
  const int64_t n = shape.numel();
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  if (b.empty() || b.view().nbytes() < bytes) {
    b = backend::Buffer(device_, DType::kU8, {static_cast<int64_t>(bytes)});
    ++generation_;
  }
  Tensor t = b.view();
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

StepRunner::StepRunner(Device device, bool graphs)
    : device_(device),
      graphs_(graphs && backend::graphs_supported(device)),
      scratch_(device),
      io_(device),
      staging_(device) {}

void StepRunner::check_state(const ModelState& state, int64_t tokens) const {
  check(state.n_tokens + tokens <= state.capacity, ErrorKind::kInvalidInput,
        "context overflow: {} tokens do not fit the state's capacity of {}", state.n_tokens + tokens,
        state.capacity);
  check(state.n_tokens + tokens <= state.rows_held(), ErrorKind::kInternal,
        "the state holds KV blocks for {} tokens, not {}", state.rows_held(), state.n_tokens + tokens);
  for (const StateBuffer& b : state.buffers)
    check(b.tensor.device() == device_, ErrorKind::kInvalidInput,
          "the state lives on {}, the model on {}", backend::device_label(b.tensor.device()),
          backend::device_label(device_));
}

namespace {

int64_t kv_bound_of(const ModelState& state, int64_t end) {
  return std::min(state.capacity, (end + StepRunner::kKvBucket - 1) / StepRunner::kKvBucket * StepRunner::kKvBucket);
}

}  // namespace

Step StepRunner::prepare(const StepTokens& tokens, ModelState& state, int64_t vocab, const Tensor& logits,
                         bool all_logits) {
  const int64_t T = tokens.count();
  check(T > 0, ErrorKind::kInvalidInput, "forward needs at least one token");
  const int64_t start = state.n_tokens;
  check_state(state, T);
  check(logits.numel() == (all_logits ? T * vocab : vocab), ErrorKind::kInternal,
        "forward: logits shape {}", logits.shape.str());
  // A device id is not read here (that would wait for the work queued before it); outside the
  // vocabulary, the GPU's embedding gives a zero row and the CPU's refuses it.
  for (int32_t id : tokens.host)
    check(id >= 0 && id < vocab, ErrorKind::kInvalidInput,
          "token id {} is outside the vocabulary (size {})", id, vocab);
  check(tokens.device.empty() || (tokens.device.dtype == DType::kI32 && tokens.device.numel() == 1),
        ErrorKind::kInternal, "forward: a device token must be one I32");
  Step s;
  s.start = start;
  s.tokens = T;
  s.kv_bound = kv_bound_of(state, start + T);
  const Tensor inputs = io_.get(kInputs, {2, T}, DType::kI32);
  auto* staged = static_cast<int32_t*>(staging_.host(inputs.nbytes()));
  if (tokens.device.empty()) {
    std::memcpy(staged, tokens.host.data(), static_cast<size_t>(T) * sizeof(int32_t));
  } else {
    staged[0] = 0;  // replaced by the device's id on its way
  }
  for (int64_t t = 0; t < T; ++t) staged[T + t] = static_cast<int32_t>(start + t);
  staging_.start(inputs, tokens.device.empty() ? nullptr : &tokens.device);
  s.ids = inputs.rows(0, 1).reshaped({T});
  s.positions = inputs.rows(1, 2).reshaped({T});
  // The caller's logits when they lie on this device (the body writes them directly), else scratch
  // that run() copies out.
  const Shape rows{all_logits ? T : 1, vocab};
  s.logits = logits.device == device_ && logits.dtype == DType::kF32 ? logits.reshaped(rows) : io_.get(kLogits, rows);
  parts_.assign(1, StepPart{&state, 0, T, start, s.kv_bound});
  s.parts = parts_;
  return s;
}

Step StepRunner::prepare_decode(std::span<const DecodeItem> items, int64_t vocab) {
  const auto B = static_cast<int64_t>(items.size());
  check(B > 0, ErrorKind::kInvalidInput, "a decode step needs at least one sequence");
  const Tensor inputs = io_.get(kInputs, {2, B}, DType::kI32);
  auto* staged = static_cast<int32_t*>(staging_.host(inputs.nbytes()));
  parts_.clear();
  parts_.reserve(static_cast<size_t>(std::max<int64_t>(B, 16)));
  for (int64_t i = 0; i < B; ++i) {
    const DecodeItem& it = items[static_cast<size_t>(i)];
    check(it.state != nullptr, ErrorKind::kInternal, "a decode item without a state");
    check_state(*it.state, 1);
    check(it.logits.numel() == vocab, ErrorKind::kInternal, "forward_decode: logits shape {}", it.logits.shape.str());
    if (it.device_id.empty()) {
      check(it.id >= 0 && it.id < vocab, ErrorKind::kInvalidInput, "token id {} is outside the vocabulary (size {})",
            it.id, vocab);
    } else {
      check(it.device_id.dtype == DType::kI32 && it.device_id.numel() == 1, ErrorKind::kInternal,
            "forward: a device token must be one I32");
    }
    for (size_t j = 0; j < static_cast<size_t>(i); ++j)
      check(items[j].state != it.state, ErrorKind::kInternal, "a decode step holds one sequence twice");
    const int64_t start = it.state->n_tokens;
    staged[i] = it.device_id.empty() ? it.id : 0;
    staged[B + i] = static_cast<int32_t>(start);
    parts_.push_back(StepPart{it.state, i, 1, start, kv_bound_of(*it.state, start + 1)});
  }
  staging_.start(inputs);
  Step s;
  s.start = parts_.front().start;
  s.tokens = B;
  s.kv_bound = parts_.front().kv_bound;
  s.ids = inputs.rows(0, 1).reshaped({B});
  s.positions = inputs.rows(1, 2).reshaped({B});
  for (int64_t i = 0; i < B; ++i) {  // ids a pick left on the device, copied behind the upload
    const Tensor& id = items[static_cast<size_t>(i)].device_id;
    if (!id.empty()) backend::copy(id, s.ids.rows(i, i + 1));
  }
  s.logits = io_.get(kLogits, {B, vocab});
  s.parts = parts_;
  row_blocks_.clear(), row_kv_bounds_.clear();
  row_blocks_.reserve(parts_.capacity()), row_kv_bounds_.reserve(parts_.capacity());
  for (const StepPart& part : parts_) {
    const backend::KvBlocks& kv = part.state->kv;
    if (!kv.paged() || kv.block_tokens != parts_.front().state->kv.block_tokens) break;
    row_blocks_.push_back(kv);
    row_kv_bounds_.push_back(part.kv_bound);
  }
  if (B > 1 && row_blocks_.size() == parts_.size()) {
    s.row_blocks = row_blocks_;
    s.row_kv_bounds = row_kv_bounds_;
  }
  return s;
}

Step StepRunner::prepare_verify(std::span<const int32_t> tokens, ModelState& state, std::span<const ModelState> after,
                                int64_t vocab, const Tensor& logits) {
  Step s = prepare(tokens, state, vocab, logits, true);
  const int64_t T = s.tokens;
  bool recurrent = false;
  for (const StateBuffer& b : state.buffers) recurrent = recurrent || !b.token_indexed;
  check(!recurrent || static_cast<int64_t>(after.size()) >= T - 1, ErrorKind::kInternal,
        "a verify step of {} tokens needs {} per-position states, got {}", T, T - 1, after.size());
  if (!recurrent) after = {};  // attention-only: nothing to keep per position
  for (const ModelState& a : after.first(std::min(after.size(), static_cast<size_t>(T - 1)))) {
    check(a.buffers.size() == state.buffers.size(), ErrorKind::kInternal,
          "a per-position state has {} buffers, the sequence {}", a.buffers.size(), state.buffers.size());
    for (size_t b = 0; b < a.buffers.size(); ++b)
      check(state.buffers[b].token_indexed ||
                a.buffers[b].tensor.view().nbytes() == state.buffers[b].tensor.view().nbytes(),
            ErrorKind::kInternal, "per-position state buffer {} does not match", state.buffers[b].name);
  }
  s.verify = true;
  s.after = after.first(std::min(after.size(), static_cast<size_t>(T - 1)));
  // Each row's attention bound is the one its own one-token step would have: the rows of one
  // sequence then run as the rows of a batch of sequences do (attention_rows), each alone.
  row_blocks_.clear(), row_kv_bounds_.clear();
  row_blocks_.reserve(static_cast<size_t>(std::max<int64_t>(T, 16)));  // (once: steps allocate nothing)
  row_kv_bounds_.reserve(static_cast<size_t>(std::max<int64_t>(T, 16)));
  for (int64_t t = 0; t < T; ++t) {
    row_kv_bounds_.push_back(kv_bound_of(state, s.start + t + 1));
    if (state.paged()) row_blocks_.push_back(state.kv);
  }
  s.row_kv_bounds = row_kv_bounds_;
  s.row_blocks = row_blocks_;
  return s;
}

void attend(const Step& step, size_t k_buffer, const LayerAttention& a) {
  const auto cache = [&](const StepPart& part, size_t i) -> const Tensor& {
    return part.state->buffers[k_buffer + i].tensor.view();
  };
  bool one_pool = !step.row_blocks.empty();
  for (const StepPart& part : step.parts)
    one_pool = one_pool && cache(part, 0).data == cache(step.parts[0], 0).data &&
               cache(part, 1).data == cache(step.parts[0], 1).data;
  if (step.verify && !one_pool) {  // a plain state's verify rows: each as its own one-token step
    const StepPart& part = step.parts[0];
    for (int64_t t = 0; t < step.tokens; ++t) {
      const Tensor positions = step.positions.rows(t, t + 1), q_out = a.q_out.rows(t, t + 1);
      backend::qk_norm_rope_store(a.q.rows(t, t + 1), a.k.rows(t, t + 1), a.v.rows(t, t + 1), a.norm, *a.rope,
                                  positions, q_out, a.gate_out.empty() ? Tensor{} : a.gate_out.rows(t, t + 1),
                                  cache(part, 0), cache(part, 1), part.state->kv);
      backend::attention(q_out, cache(part, 0), cache(part, 1), positions,
                         step.row_kv_bounds[static_cast<size_t>(t)], a.scale, a.window, a.out.rows(t, t + 1),
                         part.state->kv);
    }
    return;
  }
  if (one_pool) {
    const Tensor& k_cache = cache(step.parts[0], 0);
    const Tensor& v_cache = cache(step.parts[0], 1);
    backend::qk_norm_rope_store_rows(a.q, a.k, a.v, a.norm, *a.rope, step.positions, a.q_out, a.gate_out, k_cache,
                                     v_cache, step.row_blocks);
    backend::attention_rows(a.q_out, k_cache, v_cache, step.positions, step.row_blocks, step.row_kv_bounds, a.scale,
                            a.window, a.out);
    return;
  }
  for (const StepPart& part : step.parts) {  // each sequence's rows against its own cache
    const int64_t r0 = part.row0, r1 = part.row0 + part.rows;
    const Tensor positions = step.positions.rows(r0, r1);
    const Tensor q_out = a.q_out.rows(r0, r1);
    backend::qk_norm_rope_store(a.q.rows(r0, r1), a.k.rows(r0, r1), a.v.rows(r0, r1), a.norm, *a.rope, positions,
                                q_out, a.gate_out.empty() ? Tensor{} : a.gate_out.rows(r0, r1), cache(part, 0),
                                cache(part, 1), part.state->kv);
    backend::attention(q_out, cache(part, 0), cache(part, 1), positions, part.kv_bound, a.scale, a.window,
                       a.out.rows(r0, r1), part.state->kv);
  }
}

bool StepRunner::replay(const Step& step, bool all_logits) {
  capture_next_ = false;
  if (!graphs_ || step.tokens > (step.batch() ? kGraphMaxBatch : kGraphMaxTokens)) return false;
  const uint64_t generation = (scratch_.generation() * 1000003u + io_.generation()) * 1000003u +
                              backend::device_memory_generation(device_);
  if (generation != generation_) {
    entries_.clear();  // recorded addresses may be gone
    generation_ = generation;
  }
  uint64_t h = 0;
  for (const StepPart& part : step.parts) {
    const int64_t shape[] = {part.rows, part.state->capacity, part.kv_bound};
    h = hash64(shape, sizeof(shape), h);
    for (const StateBuffer& b : part.state->buffers) {
      const void* p = b.tensor.view().data;
      h = hash64(&p, sizeof(p), h);
    }
    const void* table = part.state->kv.table.data;  // a paged state's blocks: read at replay
    h = hash64(&table, sizeof(table), h);
  }
  if (step.verify) {  // the rows' bounds and where the per-position states go are in the graph too
    h = hash64(step.row_kv_bounds.data(), step.row_kv_bounds.size_bytes(), h);
    for (const ModelState& a : step.after)
      for (const StateBuffer& b : a.buffers) {
        const void* p = b.tensor.empty() ? nullptr : b.tensor.view().data;
        h = hash64(&p, sizeof(p), h);
      }
  }
  const Key key{step.tokens, all_logits, step.verify, h, step.logits.data};
  size_t i = 0;
  while (i < entries_.size() && !(entries_[i].key == key)) ++i;
  if (i == entries_.size()) {
    if (entries_.size() == kMaxGraphs) entries_.erase(entries_.begin());
    entries_.push_back({key, 0, std::nullopt});
    i = entries_.size() - 1;
  }
  current_ = i;
  Entry& e = entries_[i];
  if (e.graph) {
    e.graph->launch();
    return true;
  }
  // The first run of a shape is eager: it sizes every scratch buffer and workspace, so the capture
  // that follows records final addresses.
  capture_next_ = e.uses++ > 0;
  return false;
}

void StepRunner::store_graph(backend::StepGraph graph) {
  entries_[current_].graph = std::move(graph);
}

}  // namespace strata::model
