// Sampler: greedy, seeded reproducibility, top-k/top-p/min-p truncation, penalties, logit bias.
#include <gtest/gtest.h>

#include <map>

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

// A row whose tail lies far below the window: sampling from the window's tokens alone, handed over
// in any order, draws the tokens the whole row gives for every seed and truncation.
TEST(Sampler, SampleFromTheWindowEqualsTheWholeRow) {
  std::vector<float> row(5000);
  for (size_t i = 0; i < row.size(); ++i) row[i] = -60.0f - static_cast<float>(i % 7);  // the tail
  const std::vector<int32_t> near = {4000, 17, 2500, 3, 999, 4999, 1234};
  for (size_t j = 0; j < near.size(); ++j) row[static_cast<size_t>(near[j])] = 2.0f - 0.4f * static_cast<float>(j);
  row[1234] = row[17];  // a tie: the lower id comes first in both
  std::vector<float> values;
  for (int32_t id : near) values.push_back(row[static_cast<size_t>(id)]);
  auto params = [](float temperature, int top_k, float top_p, float min_p) {
    SamplingParams p;
    p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p;
    return p;
  };
  for (SamplingParams p : {params(1.0f, 0, 1.0f, 0.0f), params(0.7f, 0, 0.9f, 0.0f), params(1.3f, 3, 1.0f, 0.05f)}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      p.seed = seed;
      Sampler whole(p), part(p);
      for (int i = 0; i < 200; ++i) {
        std::vector<float> l = row;
        ASSERT_EQ(part.sample_from(values, near), whole.sample(l, {})) << "seed " << seed << " draw " << i;
      }
    }
  }
  SamplingParams penalized;
  penalized.presence_penalty = 0.5f;
  Sampler s(penalized);
  EXPECT_THROW(s.sample_from(values, near), Error);  // penalties need the whole row
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
