// The one rule for valid sampling parameters (find_sampling_problem): each field refused outside
// its range with its name, the Sampler refusing exactly what the rule refuses, and the sampler's
// logit edits costing time linear in the bias list and the history.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "runtime/sampler.h"

namespace strata::runtime {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The field find_sampling_problem names for p, or "" when it finds none.
std::string problem_field(const SamplingParams& p) {
  const auto problem = find_sampling_problem(p);
  return problem ? problem->field : "";
}

TEST(SamplingParams, EachFieldIsRefusedOutsideItsRangeByName) {
  struct Case {
    const char* field;
    void (*set)(SamplingParams&);
  };
  const Case bad[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = kNan; }},
      {"temperature", [](SamplingParams& p) { p.temperature = kInf; }},
      {"temperature", [](SamplingParams& p) { p.temperature = 1e-30f; }},  // logits / T overflow
      {"top_p", [](SamplingParams& p) { p.top_p = 0; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.5f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = kNan; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.1f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = kNan; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = kInf; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = kNan; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = kNan; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -kInf; }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{-1, 1.0f}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{3, kNan}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{3, -kInf}};
       }},
  };
  for (const Case& c : bad) {
    SamplingParams p;
    c.set(p);
    EXPECT_EQ(problem_field(p), c.field);
    // The sampler refuses by the same rule, with the field in its message.
    try {
      Sampler s(p);
      ADD_FAILURE() << "the sampler accepted a bad " << c.field;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_TRUE(std::string(e.what()).starts_with(c.field)) << e.what();
    }
  }
}

TEST(SamplingParams, BoundaryValuesAreAccepted) {
  const std::vector<void (*)(SamplingParams&)> good = {
      [](SamplingParams&) {},
      [](SamplingParams& p) { p.temperature = 0; },
      [](SamplingParams& p) { p.temperature = -1; },  // <= 0 is greedy, as documented
      [](SamplingParams& p) { p.temperature = kMinTemperature; },
      [](SamplingParams& p) { p.temperature = 100; },
      [](SamplingParams& p) { p.top_p = 1e-9f; },
      [](SamplingParams& p) { p.min_p = 1; },
      [](SamplingParams& p) { p.top_k = 1; },
      [](SamplingParams& p) { p.repetition_penalty = 0.01f; },
      [](SamplingParams& p) { p.presence_penalty = -2, p.frequency_penalty = 2; },
      [](SamplingParams& p) {
        p.logit_bias = {{0, -100.0f}, {1 << 30, 100.0f}};
      },
  };
  for (auto set : good) {
    SamplingParams p;
    set(p);
    EXPECT_EQ(problem_field(p), "");
    EXPECT_NO_THROW(Sampler{p});
  }
}

TEST(SamplingParams, LogitEditsTakeLinearTime) {
  // 100,000 biased tokens and a 100,000-token history, edited 20 times (20 decode steps): linear
  // work is a few million steps, a quadratic pass over either list would be 10^11.
  SamplingParams p;
  p.presence_penalty = 0.5f;
  for (int32_t id = 0; id < 100'000; ++id) p.logit_bias.emplace_back(id * 2, 1.0f);
  std::vector<int32_t> history;
  for (int32_t i = 0; i < 100'000; ++i) history.push_back((i * 7) % 250'000);
  Sampler s(p);
  Sampler::LogitEdits edits;
  std::vector<float> logits(250'000, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < 20; ++step) {
    s.logit_edits(history, logits.size(), edits);
    std::fill(logits.begin(), logits.end(), 0.0f);
    s.sample(logits, history);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  // Each biased or seen token once.
  EXPECT_GE(edits.ids.size(), 100'000u);
  EXPECT_LE(edits.ids.size(), 200'000u);
}

}  // namespace
}  // namespace strata::runtime
