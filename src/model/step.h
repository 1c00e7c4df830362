// What every family's forward() shares: activation scratch on the model's device, the step's token
// ids and positions staged there, and the replay of small steps (decode, speculative verify) as
// captured device graphs, so a decode step costs one launch instead of hundreds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/graph.h"
#include "backend/memory.h"
#include "backend/ops.h"
#include "core/error.h"
#include "model/model.h"

namespace strata::model {

// Grow-only buffers by slot: after the first step of a given size nothing is allocated.
class Scratch {
 public:
  explicit Scratch(Device device) : device_(device) {}
  Tensor get(size_t slot, Shape shape, DType dtype = DType::kF32);
  // Bumped whenever a buffer is reallocated (graphs that recorded the old one are stale).
  uint64_t generation() const { return generation_; }
  Device device() const { return device_; }

 private:
  Device device_;
  std::vector<backend::Buffer> buffers_;
  uint64_t generation_ = 0;
};

// The tokens of one forward call: ids on the host, or a single id already in device memory (an I32
// [1] tensor on any device, e.g. the token a GPU just picked), which the step reads where it lies
// so that it can be queued before the host knows it.
struct StepTokens {
  StepTokens(std::span<const int32_t> ids) : host(ids) {}  // NOLINT: implicit by design
  static StepTokens on_device(const Tensor& id) {
    StepTokens t({});
    t.device = id;
    return t;
  }
  int64_t count() const { return device.empty() ? static_cast<int64_t>(host.size()) : 1; }

  std::span<const int32_t> host;
  Tensor device;  // when not empty: the one token's id
};

// The rows of a step that belong to one sequence: its state, where its rows start and how many,
// the position of its first, and its attention work bound (ops.h: start + rows rounded up to
// kKvBucket, at most the capacity).
struct StepPart {
  ModelState* state = nullptr;
  int64_t row0 = 0, rows = 0;
  int64_t start = 0;
  int64_t kv_bound = 0;
};

// One forward call as the family's body sees it: one sequence's tokens (forward()), or one token
// of each of several sequences (forward_decode()). Row-wise ops run over every row at once; each
// part's attention and recurrent state are its own.
struct Step {
  int64_t start = 0;     // position of the first token (one part)
  int64_t tokens = 0;    // T: rows of every part
  int64_t kv_bound = 0;  // the first part's
  Tensor ids;            // I32 [T] on the device
  Tensor positions;      // I32 [T] on the device
  Tensor logits;         // F32 [T or 1, vocab] the body writes (one part); [parts, vocab] (several)
  std::span<const StepPart> parts;
  // A decode step whose sequences all keep their KV in pools of blocks of one size: each row's
  // table and kv_bound, for the ops that take every row at once (attention_rows); empty otherwise.
  std::span<const backend::KvBlocks> row_blocks;
  std::span<const int64_t> row_kv_bounds;
  // A speculative verify step (Model::forward_verify, one part): every row is computed as a
  // one-token step at its position (row_kv_bounds holds each row's bound), and recurrent layers
  // write the state after row t < T - 1 into after[t].
  bool verify = false;
  std::span<const ModelState> after;
  bool batch() const { return parts.size() > 1; }
};

// One attention layer's work between its projections and its output projection, for every part of
// a step: qk_norm_rope_store, then attention, each part against its own KV cache (buffers k_buffer
// and k_buffer + 1 of its state). A decode step whose sequences share one pool of KV blocks runs
// each op once over all its rows; any other step runs them part by part.
struct LayerAttention {
  Tensor q;         // [T, Hq, D], or [T, Hq, 2D] with each head's output gate after its query
  Tensor k, v;      // [T, Hkv, D]
  Tensor q_out;     // [T, Hq, D] (may be q when q has no gate)
  Tensor gate_out;  // [T, Hq, D], or empty when q has no gate
  Tensor out;       // [T, Hq, D]
  backend::QkNorm norm;
  const backend::RopeParams* rope = nullptr;
  float scale = 1.0f;
  int64_t window = 0;
};
void attend(const Step& step, size_t k_buffer, const LayerAttention& a);

class StepRunner {
 public:
  // graphs: whether this model's steps may be captured (its body never reads device memory on the
  // host nor changes launch parameters between steps of the same shape).
  StepRunner(Device device, bool graphs);

  Scratch& scratch() { return scratch_; }

  // Checks the call, stages the inputs, runs body(step) eagerly or as a graph replay, copies the
  // logits out (unless the body wrote them where the caller wants them) and advances
  // state.n_tokens.
  template <typename Body>
  void run(const StepTokens& tokens, ModelState& state, int64_t vocab, const Tensor& logits, bool all_logits,
           Body&& body) {
    const Step step = prepare(tokens, state, vocab, logits, all_logits);
    run_body(step, all_logits, body);
    backend::copy(step.logits, logits);  // nothing to do when the body wrote the caller's
    state.n_tokens = step.start + step.tokens;
  }

  // One token of each item as one step (Model::forward_decode): stages the ids (a device id is
  // copied where it lies) and positions, runs body(step) eagerly or as a graph replay, copies each
  // item's logits row out and advances each state by one token.
  template <typename Body>
  void run_decode(std::span<const DecodeItem> items, int64_t vocab, Body&& body) {
    const Step step = prepare_decode(items, vocab);
    run_body(step, true, body);
    for (size_t i = 0; i < items.size(); ++i) {
      const auto r = static_cast<int64_t>(i);
      backend::copy(step.logits.rows(r, r + 1).reshaped({vocab}), items[i].logits);
      items[i].state->n_tokens += 1;
    }
  }

  // A verify step (Model::forward_verify): the tokens at the state's end, each row as a one-token
  // step at its position; every row's logits; the state advanced by all of them.
  template <typename Body>
  void run_verify(std::span<const int32_t> tokens, ModelState& state, std::span<const ModelState> after,
                  int64_t vocab, const Tensor& logits, Body&& body) {
    const Step step = prepare_verify(tokens, state, after, vocab, logits);
    run_body(step, true, body);
    backend::copy(step.logits, logits);
    state.n_tokens = step.start + step.tokens;
  }

  // Steps of at most this many tokens are captured (decode and speculative verify), and decode
  // steps of at most kGraphMaxBatch sequences.
  static constexpr int64_t kGraphMaxTokens = 8;
  static constexpr int64_t kGraphMaxBatch = 64;
  // kv_bound granularity: a graph serves this many consecutive positions.
  static constexpr int64_t kKvBucket = 256;

 private:
  struct Key {
    int64_t tokens;
    bool all_logits;
    bool verify;
    uint64_t parts;  // hash of each part's rows, state buffer addresses, capacity and kv_bound
    const void* logits;  // where the body writes them
    bool operator==(const Key&) const = default;
  };
  struct Entry {
    Key key;
    int uses = 0;  // eager runs seen; captured on the second
    std::optional<backend::StepGraph> graph;
  };

  Step prepare(const StepTokens& tokens, ModelState& state, int64_t vocab, const Tensor& logits,
               bool all_logits);
  Step prepare_decode(std::span<const DecodeItem> items, int64_t vocab);
  Step prepare_verify(std::span<const int32_t> tokens, ModelState& state, std::span<const ModelState> after,
                      int64_t vocab, const Tensor& logits);
  void check_state(const ModelState& state, int64_t tokens) const;
  // Runs body(step): replays the step's graph, captures one, or runs it eagerly.
  template <typename Body>
  void run_body(const Step& step, bool all_logits, Body& body) {
    if (replay(step, all_logits)) return;
    if (!capture_next_) {
      body(step);
      return;
    }
    backend::begin_capture(device_);
    try {
      body(step);
    } catch (...) {
      (void)backend::end_capture(device_);
      throw;
    }
    store_graph(backend::end_capture(device_));
    replay(step, all_logits);
  }
  // Launches the graph for this step if one exists; otherwise decides whether the body should be
  // captured this time (capture_next_).
  bool replay(const Step& step, bool all_logits);
  void store_graph(backend::StepGraph graph);

  Device device_;
  bool graphs_;
  Scratch scratch_;  // the body's
  Scratch io_;       // inputs and logits
  backend::Upload staging_;  // the step's ids and positions on their way to the device
  std::vector<Entry> entries_;  // oldest first
  size_t current_ = 0;          // entry of the step being run
  bool capture_next_ = false;
  uint64_t generation_ = 0;  // scratch + device memory generation the entries were made at
  std::vector<StepPart> parts_;  // the step's (reserved: decode steps allocate nothing)
  std::vector<backend::KvBlocks> row_blocks_;  // a decode step's Step::row_blocks (reserved too)
  std::vector<int64_t> row_kv_bounds_;
};

}  // namespace strata::model
