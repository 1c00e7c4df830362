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

// What a verify step of T tokens costs on this engine, against a plain one-token step: measured
// from the engine's steps that ran one sequence alone (the time from one step's picks to the
// next's, so a draft model's proposals are in it), an average that follows changes. A length not
// measured yet is estimated from the nearest measured ones (one below and one above, or a line
// through 1 and the one below), optimistically (5% a draft) while only plain steps are known.
class StepCosts {
 public:
  void add(int64_t tokens, double seconds);
  // The cost of a step of `tokens` tokens in plain steps (1 for a plain step).
  double ratio(int64_t tokens) const;
  double plain_seconds() const { return seconds_.size() > 1 ? seconds_[1] : 0.0; }  // 0: unknown

 private:
  std::vector<double> seconds_;  // by tokens; 0: not measured
};

// How many drafts a request verifies next (0: it decodes plainly this step), from its running
// acceptance and the measured step costs. Drafts are taken as accepted each with probability a
// (its decayed count of accepted drafts over drafts decided), so k drafts yield on average
// 1 + a + ... + a^k tokens a step; the length chosen is the one with the most tokens per unit of
// time, if that beats plain decoding by a margin, with the other sequences of the step counted
// (a verify runs as a step of its own, so beside n plain sequences it pays only if
// (n + tokens) / (1 + cost) beats n + 1). Plain steps age the evidence, so a request whose drafts
// stopped paying tries again now and then: at 0% acceptance, where a draft costs 3-5% of a step,
// about one verify in 15 steps, which costs under 0.5%; where a draft costs a step (a CPU), never.
// While it decodes plainly the engine also checks drafts against the tokens that follow without
// verifying them (Engine's shadow drafts: a drafter that costs little each step, a costly one now
// and then), so evidence keeps coming where a verify would cost too much to try.
class DraftLength {
 public:
  explicit DraftLength(int64_t max) : max_(max) {}
  int64_t choose(const StepCosts& costs, int64_t others) const;
  // After a verify step: `accepted` drafts accepted, and whether the next one was refused by the
  // model (not cut off by the request's end, a stop or a controller).
  void verified(int64_t accepted, bool refused);
  void plain_step();  // a step without drafts
  double acceptance() const { return (accepted_ + kPrior) / (decided_ + 2 * kPrior); }

 private:
  static constexpr double kPrior = 0.5;      // pseudo-drafts of each outcome
  static constexpr double kDecay = 0.9;      // per verify step
  static constexpr double kAge = 0.99;       // per plain step
  static constexpr double kMargin = 1.05;    // speculation must win by this much
  int64_t max_;
  double accepted_ = 0.0, decided_ = 0.0;
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
