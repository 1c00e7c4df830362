// Sampler: greedy, seeded reproducibility, top-k/top-p/min-p truncation, penalties, logit bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"
#include "runtime/sampler.h"

namespace strata::runtime {
namespace {

std::vector<float> logits() { return {1.0f, 3.0f, 2.0f, 0.5f, -1.0f}; }

int32_t draw(SamplingParams p, std::vector<float> l, std::vector<int32_t> history = {}) {
  Sampler s(p);
  return s.sample(l, history);
}

TEST(Sampler, GreedyTakesArgmax) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(draw(p, logits()), 1);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
  SamplingParams p;
  p.temperature = 1.5f;
  p.seed = 42;
  auto run = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) {
      auto l = logits();
      out.push_back(s.sample(l, {}));
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    EXPECT_EQ(draw(p, logits()), 1);
  }
}

TEST(Sampler, TopPKeepsOnlyTheNucleus) {
  SamplingParams p;
  p.top_p = 0.5f;  // token 1 alone has probability ~0.6
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    EXPECT_EQ(draw(p, logits()), 1);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.min_p = 0.3f;  // p(2)/p(1) = e^-1 ≈ 0.37 stays, p(0)/p(1) = e^-2 ≈ 0.14 goes
  std::map<int32_t, int> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    p.seed = seed;
    ++seen[draw(p, logits())];
  }
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
  EXPECT_EQ(seen.count(0) + seen.count(3) + seen.count(4), 0u);
}

TEST(Sampler, TemperatureSamplingFollowsTheDistribution) {
  SamplingParams p;
  std::map<int32_t, int> seen;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    p.seed = static_cast<uint64_t>(i);
    ++seen[draw(p, {0.0f, std::log(3.0f)})];  // probabilities 1/4 and 3/4
  }
  EXPECT_NEAR(seen[1] / static_cast<double>(n), 0.75, 0.02);
}

TEST(Sampler, PenaltiesAndBiasChangeTheChoice) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;  // 3 / 2 = 1.5 < 2
  EXPECT_EQ(draw(p, logits(), {1}), 2);
  p.repetition_penalty = 1.0f;
  p.frequency_penalty = 0.6f;  // 3 - 2·0.6 = 1.8 < 2
  EXPECT_EQ(draw(p, logits(), {1, 1}), 2);
  p.frequency_penalty = 0;
  p.presence_penalty = 1.5f;  // 3 - 1.5 < 2
  EXPECT_EQ(draw(p, logits(), {1}), 2);
  p.presence_penalty = 0;
  p.logit_bias = {{4, 10.0f}};
  EXPECT_EQ(draw(p, logits()), 4);
}

TEST(Sampler, LogitEditsListTheBiasedAndTheSeenTokens) {
  SamplingParams p;
  p.logit_bias = {{7, 2.0f}, {3, -1.0f}, {99, 5.0f}};  // 99 lies outside the vocabulary
  Sampler::LogitEdits e;
  Sampler(p).logit_edits(std::vector<int32_t>{3, 5, 3}, 10, e);
  EXPECT_EQ(e.ids, (std::vector<int32_t>{7, 3}));  // no penalty: the history does not count
  EXPECT_EQ(e.counts, (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(e.biases, (std::vector<float>{2.0f, -1.0f}));
  p.presence_penalty = 0.5f;
  Sampler s(p);
  s.logit_edits(std::vector<int32_t>{3, 5, 3, -1}, 10, e);
  EXPECT_EQ(e.ids, (std::vector<int32_t>{7, 3, 5}));
  EXPECT_EQ(e.counts, (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(e.biases, (std::vector<float>{2.0f, -1.0f, 0.0f}));
  s.logit_edits(std::vector<int32_t>{5}, 10, e);  // a second call starts afresh
  EXPECT_EQ(e.ids, (std::vector<int32_t>{7, 3, 5}));
  EXPECT_EQ(e.counts, (std::vector<int32_t>{0, 0, 1}));
}

// backend::sample_row (the CPU reference of the device draw) with device_draw() picks what
// sample() picks from the same generator state, over flat and peaked rows, every truncation and
// many seeds: the two differ only in rounding (float probabilities against integer weights), so
// only a draw landing within about 1e-7 of a boundary could differ.
TEST(Sampler, DeviceDrawPicksWhatSamplePicks) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> flat(5000), peaked(5000);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = normal(gen), peaked[i] = 8.0f * normal(gen);
  peaked[17] = peaked[1234] = 40.0f;  // a tie at the top: the lower id comes first in both
  auto params = [](float temperature, int top_k, float top_p, float min_p) {
    SamplingParams p;
    p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p;
    return p;
  };
  int draws = 0, differ = 0;
  SamplingParams penalized = params(0.9f, 0, 0.95f, 0.0f);
  penalized.repetition_penalty = 1.3f, penalized.presence_penalty = 0.4f, penalized.frequency_penalty = 0.2f;
  penalized.logit_bias = {{17, -2.0f}, {4000, 3.0f}};
  std::vector<int32_t> history;
  for (int32_t i = 0; i < 300; ++i) history.push_back((i * 37) % 2000);
  for (const std::vector<float>* row : {&flat, &peaked}) {
    const auto V = static_cast<int64_t>(row->size());
    HostTensor out(DType::kI32, {1});
    for (SamplingParams p : {params(1.0f, 0, 1.0f, 0.0f), params(0.7f, 0, 0.9f, 0.0f), params(1.3f, 40, 1.0f, 0.05f),
                             params(0.6f, 20, 0.95f, 0.0f), penalized}) {
      for (uint64_t seed : {1u, 2u, 3u}) {
        p.seed = seed;
        Sampler host(p), device(p);
        for (int i = 0; i < 100; ++i) {
          // The device's way: the edits as lists, then the draw on the edited row.
          HostTensor x(DType::kF32, {V});
          std::copy(row->begin(), row->end(), x.as<float>());
          Sampler::LogitEdits e;
          device.logit_edits(history, row->size(), e);
          const auto n = static_cast<int64_t>(e.ids.size());
          HostTensor ids(DType::kI32, {n}), counts(DType::kI32, {n}), biases(DType::kF32, {n});
          std::copy(e.ids.begin(), e.ids.end(), ids.as<int32_t>());
          std::copy(e.counts.begin(), e.counts.end(), counts.as<int32_t>());
          std::copy(e.biases.begin(), e.biases.end(), biases.as<float>());
          backend::edit_logits(x, ids, counts, biases, device.penalties());
          backend::sample_row(x, device.device_draw(), out);
          std::vector<float> l = *row;
          differ += out.as<int32_t>()[0] != host.sample(l, history);
          ++draws;
        }
      }
    }
  }
  EXPECT_LE(differ, 1) << "of " << draws << " draws";
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  Sampler s(greedy);
  EXPECT_THROW(s.device_draw(), Error);  // greedy picks the argmax
}

// +inf logits share the draw (NaN and -inf never win), truncated or not, as in backend::sample_row.
TEST(Sampler, PlusInfinityLogitsShareTheDraw) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float top_p : {1.0f, 0.9f}) {
    std::set<int32_t> seen;
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      SamplingParams p;
      p.temperature = 1.0f, p.top_p = top_p, p.seed = seed;
      seen.insert(draw(p, {inf, 5.0f, inf, nan, -inf}));
    }
    EXPECT_EQ(seen, (std::set<int32_t>{0, 2})) << "top_p " << top_p;
  }
}

TEST(Sampler, RejectsInvalidParameters) {
  SamplingParams p;
  p.top_p = 0;
  EXPECT_THROW(Sampler{p}, Error);
  p.top_p = 1;
  p.repetition_penalty = 0;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace strata::runtime
