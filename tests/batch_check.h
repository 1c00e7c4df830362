// What the batch exactness tests share (CPU in tests/runtime, CUDA in tests/cuda): a request
// recorder, a set of distinct requests (mixed prompt lengths, greedy and seeded sampling, with
// penalties, a logit bias and logprobs among them), and the check that requests run together on
// one engine give exactly what each gives alone on another.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace strata::test {

using runtime::Engine;
using runtime::EngineOptions;
using runtime::FinishReason;
using runtime::GenerationRequest;
using runtime::GenerationResult;

// Records what the engine reports; with stop_after, its callback cancels after that many tokens.
class Recorder final : public runtime::Work {
 public:
  bool on_token(int32_t id) override {
    tokens.push_back(id);
    return !stop_after || static_cast<int64_t>(tokens.size()) < *stop_after;
  }
  void on_finish(const GenerationResult& r) override {
    result = r;
    done = true;
  }
  void on_error(const std::string& message) override {
    error = message;
    done = true;
  }

  std::vector<int32_t> tokens;
  std::optional<int64_t> stop_after;
  std::optional<GenerationResult> result;
  std::string error;
  bool done = false;
  std::vector<runtime::TokenLogprob> logprobs;
};

// The i-th request of a set: prompts of 1 to ~40 tokens from the golden's, each its own; every
// third one samples (seeded), and a few carry penalties, a logit bias or logprobs.
inline GenerationRequest nth_request(const std::vector<int32_t>& base, int64_t vocab, int i) {
  GenerationRequest r;
  const size_t len = 1 + static_cast<size_t>((i * 7) % 40);
  for (size_t k = 0; k < len; ++k)
    r.prompt.push_back(
        static_cast<int32_t>((base[k % base.size()] + i * 13 + static_cast<int>(k)) % vocab));
  r.max_tokens = 3 + (i * 5) % 12;
  r.sampling.temperature = 0.0f;
  if (i % 3 == 1) {
    r.sampling.temperature = 0.9f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 1000 + static_cast<uint64_t>(i);
  }
  if (i % 5 == 2) r.sampling.presence_penalty = 0.7f;
  if (i % 7 == 3) r.sampling.logit_bias = {{static_cast<int32_t>(i % vocab), 2.5f}};
  if (i % 4 == 3) r.top_logprobs = 2;
  return r;
}

struct Outcome {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kLength;
  std::vector<runtime::TokenLogprob> logprobs;
};

inline Outcome run_alone(Engine& engine, GenerationRequest request) {
  Outcome o;
  if (request.top_logprobs >= 0)
    request.on_logprob = [&](const runtime::TokenLogprob& lp) { o.logprobs.push_back(lp); };
  const GenerationResult r = engine.generate(request);
  o.tokens = r.tokens;
  o.reason = r.finish_reason;
  return o;
}

inline std::shared_ptr<Recorder> recorder_for(GenerationRequest request) {
  auto w = std::make_shared<Recorder>();
  w->request = std::move(request);
  if (w->request.top_logprobs >= 0) {
    Recorder* raw = w.get();
    w->request.on_logprob = [raw](const runtime::TokenLogprob& lp) { raw->logprobs.push_back(lp); };
  }
  return w;
}

// Adds `request` to `engine` and steps until the engine is idle; the recorder holds the result, or
// the error.
inline std::shared_ptr<Recorder> run_to_end(Engine& engine, GenerationRequest request) {
  auto w = recorder_for(std::move(request));
  engine.add(w);
  while (!engine.idle()) engine.step();
  return w;
}

inline void expect_same_logprobs(const std::vector<runtime::TokenLogprob>& a,
                                 const std::vector<runtime::TokenLogprob>& b,
                                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].token, b[i].token) << what;
    EXPECT_EQ(a[i].logprob, b[i].logprob) << what;  // the same arithmetic: bit for bit
    EXPECT_EQ(a[i].top, b[i].top) << what;
  }
}

// n requests (prompts built from `base`); request k arrives after `arrive_after[k]` steps of the
// batch engine (missing: at once).
inline void check_batch(Engine& solo, Engine& batch, const std::vector<int32_t>& base, int n,
                        const std::vector<int>& arrive_after) {
  const int64_t V = solo.model().config().vocab_size;
  std::vector<Outcome> alone;
  std::vector<std::shared_ptr<test::Recorder>> works;
  for (int i = 0; i < n; ++i) {
    alone.push_back(run_alone(solo, nth_request(base, V, i)));
    works.push_back(recorder_for(nth_request(base, V, i)));
  }
  int steps = 0;
  size_t next = 0;
  while (next < works.size() || !batch.idle()) {
    while (next < works.size() && (next >= arrive_after.size() || arrive_after[next] <= steps))
      batch.add(works[next++]);
    batch.step();
    ++steps;
    ASSERT_LT(steps, 10000) << "the engine does not finish";
  }
  for (int i = 0; i < n; ++i) {
    const std::string what = fmt::format("request {} of {}", i, n);
    ASSERT_TRUE(works[i]->done && works[i]->result) << what << ": " << works[i]->error;
    EXPECT_EQ(works[i]->result->tokens, alone[i].tokens) << what;
    EXPECT_EQ(works[i]->tokens, alone[i].tokens) << what;
    EXPECT_EQ(works[i]->result->finish_reason, alone[i].reason) << what;
    expect_same_logprobs(works[i]->logprobs, alone[i].logprobs, what);
  }
}

// Six requests in three slots: one's callback stops after two tokens, one is cancelled while
// waiting, one after three steps; the others give exactly their solo tokens, the stopped ones a
// prefix of theirs.
inline void check_cancellations(Engine& solo, Engine& batch, const std::vector<int32_t>& base) {
  const int64_t V = solo.model().config().vocab_size;
  std::vector<Outcome> alone;
  std::vector<std::shared_ptr<Recorder>> works;
  for (int i = 0; i < 6; ++i) {
    alone.push_back(run_alone(solo, nth_request(base, V, i)));
    works.push_back(recorder_for(nth_request(base, V, i)));
  }
  works[1]->stop_after = 2;  // its client stops after two tokens
  works[5]->cancel();        // cancelled while it waits for a slot
  for (auto& w : works) batch.add(w);
  for (int steps = 0; !batch.idle(); ++steps) {
    if (steps == 3) works[2]->cancel();  // cancelled while running (perhaps prefilling)
    batch.step();
  }
  for (int i : {0, 3, 4}) {
    ASSERT_TRUE(works[i]->result) << i;
    EXPECT_EQ(works[i]->result->tokens, alone[i].tokens) << i;
  }
  ASSERT_TRUE(works[1]->result);
  EXPECT_EQ(works[1]->result->finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(works[1]->result->tokens,
            std::vector<int32_t>(alone[1].tokens.begin(), alone[1].tokens.begin() + 2));
  ASSERT_TRUE(works[2]->result);
  EXPECT_EQ(works[2]->result->finish_reason, FinishReason::kCancelled);
  const auto& t2 = works[2]->result->tokens;
  EXPECT_TRUE(std::equal(t2.begin(), t2.end(), alone[2].tokens.begin()))
      << "a cancelled request's tokens are its solo prefix";
  ASSERT_TRUE(works[5]->result);
  EXPECT_EQ(works[5]->result->finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(works[5]->result->tokens.empty());
  const runtime::EngineStats s = batch.stats();
  EXPECT_EQ(s.cancelled, 2u);  // a callback that stops is an end, not a cancel (a stop string)
  EXPECT_EQ(s.finished, 4u);
  EXPECT_EQ(s.slots_free, 3);
}

}  // namespace strata::test
