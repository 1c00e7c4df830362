// The forced-acceptance drafter of strata bench --speculative (cli/bench_oracle.h): over many
// positions the share of right drafts is the acceptance asked, each position draws the same
// whatever the draft length, and a wrapped drafter runs but its proposals are dropped.
#include "cli/bench_oracle.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace strata {
namespace {

constexpr int64_t kVocab = 1000;
constexpr size_t kPrompt = 5;

std::vector<int32_t> recorded(size_t n) {
  std::vector<int32_t> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = static_cast<int32_t>((i * 31 + 7) % kVocab);
  return r;
}

// Proposes one token per call, always the same; counts its calls.
class CountingDrafter final : public runtime::Drafter {
 public:
  void propose(std::span<const int32_t>, int64_t max, std::vector<int32_t>& out) override {
    ++calls;
    out.assign(static_cast<size_t>(max), 0);
  }
  int calls = 0;
};

TEST(OracleDrafter, RealisesTheForcedAcceptanceOverManyPositions) {
  const size_t n = 20000;
  const std::vector<int32_t> want = recorded(n);
  for (double a : {0.0, 0.25, 0.5, 0.7, 0.9, 1.0}) {
    SCOPED_TRACE(a);
    cli::OracleDrafter oracle(kPrompt, want, a, /*seed=*/1, kVocab);
    std::vector<int32_t> history(kPrompt, 3), out;
    size_t right = 0;
    for (size_t i = 0; i < n; ++i) {
      oracle.propose(history, 1, out);
      ASSERT_EQ(out.size(), 1u);
      right += out[0] == want[i] ? 1 : 0;
      history.push_back(want[i]);
    }
    const double realised = static_cast<double>(right) / static_cast<double>(n);
    if (a == 0.0 || a == 1.0) {
      EXPECT_EQ(realised, a);
    } else {
      EXPECT_NEAR(realised, a, 0.015);  // about 4.5 standard deviations at a = 0.5
    }
  }
}

TEST(OracleDrafter, ProposesTheFullLengthWithTheSameDrawPerPosition) {
  const std::vector<int32_t> want = recorded(64);
  cli::OracleDrafter four(kPrompt, want, 0.5, /*seed=*/9, kVocab),
      eight(kPrompt, want, 0.5, /*seed=*/9, kVocab);
  std::vector<int32_t> history(kPrompt, 3), a, b;
  history.insert(history.end(), want.begin(), want.begin() + 10);  // ten tokens generated
  four.propose(history, 4, a);
  eight.propose(history, 8, b);
  ASSERT_EQ(a.size(), 4u);  // a wrong draft does not end the proposal
  ASSERT_EQ(b.size(), 8u);
  for (size_t j = 0; j < b.size(); ++j) {
    EXPECT_EQ(b[j] == want[10 + j], four.right_at(10 + j)) << j;
    if (j < a.size()) {
      EXPECT_EQ(a[j], b[j]) << j;
    }
  }
  // Past the recorded tokens there is nothing to propose.
  history.insert(history.end(), want.begin() + 10, want.end());
  eight.propose(history, 8, b);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(eight.calls(), 2);
  EXPECT_EQ(eight.proposed(), 8);
  // Another seed draws otherwise.
  cli::OracleDrafter other(kPrompt, want, 0.5, /*seed=*/10, kVocab);
  int differ = 0;
  for (size_t i = 0; i < want.size(); ++i) differ += other.right_at(i) != four.right_at(i) ? 1 : 0;
  EXPECT_GT(differ, 0);
}

TEST(OracleDrafter, RunsTheWrappedDrafterAndDropsItsProposals) {
  const std::vector<int32_t> want = recorded(32);
  CountingDrafter inner;
  cli::OracleDrafter oracle(kPrompt, want, 1.0, /*seed=*/1, kVocab, &inner);
  std::vector<int32_t> history(kPrompt, 3), out;
  oracle.propose(history, 3, out);
  history.push_back(want[0]);
  oracle.propose(history, 3, out);
  EXPECT_EQ(inner.calls, 2);
  EXPECT_EQ(out, std::vector<int32_t>(want.begin() + 1, want.begin() + 4));
  EXPECT_GE(oracle.inner_seconds(), 0.0);
  EXPECT_EQ(oracle.gaps().size(), 1u);  // between the two proposals
}

}  // namespace
}  // namespace strata
