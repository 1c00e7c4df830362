// Speculative decoding: drafters that propose the next tokens cheaply, and the per-position state
// a verify step needs, so that the model checks k drafts in one step and greedy output stays
// exactly that of plain decoding (the verify step computes every row as a one-token step would,
// model::Model::forward_verify).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/sequence.h"
#include "runtime/speculative_params.h"

namespace strata::runtime {

// Proposes up to `max` tokens to follow `history` (the prompt and every emitted token), into
// `out` (cleared first). Proposing nothing is always allowed: the request then decodes plainly.
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual void propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) = 0;
};

// Prompt lookup: finds the longest suffix of the history (up to max_ngram tokens, at least
// min_ngram) that occurred before, at its most recent earlier place, and proposes the tokens that
// followed it there. Costs no model: it pays where the output repeats its input (code edits,
// retrieval answers, JSON that echoes its arguments).
class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(int64_t max_ngram = 4, int64_t min_ngram = 1) : max_ngram_(max_ngram), min_ngram_(min_ngram) {}
  void propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) override;

 private:
  int64_t max_ngram_, min_ngram_;
};

// A draft model with the target's vocabulary (strata-demo-draft for strata-demo, or for
// self-speculation the target's own first layers, model::Model::first_layers) proposes by greedy
// decoding on a state of its own that follows the request's history: before each proposal it
// returns to the point where it last agreed with the history (a snapshot: the drafts it ran after
// it may have been rejected) and runs the tokens emitted since, then drafts one token at a time.
// Its drafts need not be exact (the target verifies them), only likely.
class ModelDrafter final : public Drafter {
 public:
  // capacity: the most tokens a history and its drafts reach (the target's context).
  ModelDrafter(model::Model& draft, int64_t capacity);
  void propose(std::span<const int32_t> history, int64_t max, std::vector<int32_t>& out) override;

 private:
  int32_t pick() const;  // the greedy token of logits_

  model::Model& model_;
  Sequence seq_;
  Snapshot synced_;      // the state after the history's first `agreed_` tokens
  int64_t agreed_ = -1;  // -1: nothing run yet
  HostTensor logits_;
};

// The per-position recurrent state of a sequence's verify steps: for each of a verify step's
// positions but the last, a copy of every recurrent buffer (allocated once, here), which the model
// fills as it runs the positions (Model::forward_verify). Attention-only models need none.
class VerifySlots {
 public:
  // Room for verify steps of up to max_tokens tokens of this sequence's model.
  VerifySlots(const Sequence& seq, int64_t max_tokens);

  // Runs tokens (the sequence's next token and the drafts after it) as one verify step and appends
  // them; logits: [T, vocab], every row's.
  void forward(model::Model& model, Sequence& seq, std::span<const int32_t> tokens, const Tensor& logits);
  // Keeps the first n (>= 1) tokens of the last verify step and forgets the rest: their KV rows are
  // dropped (the length cut back) and the recurrent state becomes the one after token n, a copy
  // from its slot. The sequence is then exactly as if it had run those n tokens one at a time.
  void keep(Sequence& seq, int64_t n);

 private:
  std::vector<model::ModelState> slots_;  // per position: recurrent buffers (token-indexed empty)
  int64_t start_ = -1;                     // the sequence's length before the last verify step
  int64_t tokens_ = 0;                     // that step's tokens
};

}  // namespace strata::runtime
