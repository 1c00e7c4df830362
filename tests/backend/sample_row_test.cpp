// backend::sample_row on the CPU (the reference the CUDA kernel is checked against): the rules of
// backend/row_draw.h on rows whose weights are known, so each cut and the pick land where the
// contract says.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "backend/ops.h"

namespace strata {
namespace {

using backend::RowDraw;

int32_t pick(const std::vector<float>& logits, RowDraw d) {
  HostTensor x(DType::kF32, {static_cast<int64_t>(logits.size())}), out(DType::kI32, {1});
  std::copy(logits.begin(), logits.end(), x.as<float>());
  backend::sample_row(x, d, out);
  return out.as<int32_t>()[0];
}

RowDraw at(double u, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f, float temperature = 1.0f) {
  return {temperature, top_k, top_p, min_p, u};
}

// Weights 1/4, 1, 1/4, 1/2 (ids 0..3; in the draw's order ids 1, 3, 0, 2, the tie at 1/4 taken
// by the lower id first) out of 2, with logits that are powers of two apart: walked in id order,
// the running shares are 1/8, 5/8, 3/4, 1.
std::vector<float> quarters() {
  const float l2 = std::log(2.0f);
  return {-2 * l2, 0.0f, -2 * l2, -l2};
}

TEST(SampleRow, WalksTheKeptTokensInIdOrder) {
  const std::vector<float> l = quarters();
  EXPECT_EQ(pick(l, at(0.0)), 0);
  EXPECT_EQ(pick(l, at(0.12)), 0);
  EXPECT_EQ(pick(l, at(0.13)), 1);
  EXPECT_EQ(pick(l, at(0.62)), 1);
  EXPECT_EQ(pick(l, at(0.63)), 2);
  EXPECT_EQ(pick(l, at(0.74)), 2);
  EXPECT_EQ(pick(l, at(0.76)), 3);
  EXPECT_EQ(pick(l, at(0.999999)), 3);
}

TEST(SampleRow, CutsTopKTopPAndMinPBeforeThePick) {
  const std::vector<float> l = quarters();
  for (double u : {0.0, 0.3, 0.6, 0.9, 0.999}) EXPECT_EQ(pick(l, at(u, 1)), 1) << u;
  // top-k 2 keeps weights 1 and 1/2: shares 2/3 and 1.
  EXPECT_EQ(pick(l, at(0.6, 2)), 1);
  EXPECT_EQ(pick(l, at(0.7, 2)), 3);
  // top-p 0.5 is reached by the best alone; 0.6 needs the second too.
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(pick(l, at(u, 0, 0.5f)), 1) << u;
  EXPECT_EQ(pick(l, at(0.7, 0, 0.6f)), 3);
  // top-p over the top-k: 0.7 of the two kept by k = 3 (weight 7/4) needs 1.225: both.
  EXPECT_EQ(pick(l, at(0.99, 3, 0.7f)), 3);
  // min-p 0.3 keeps weights from 0.3 of the best: 1 and 1/2 (ids 1 and 3; 0.7 of 3/2 falls in id 3).
  EXPECT_EQ(pick(l, at(0.7, 0, 1.0f, 0.3f)), 3);
  EXPECT_EQ(pick(l, at(0.7, 0, 1.0f, 0.24f)), 2);  // all four stay: 0.7 lies in (5/8, 3/4]
}

TEST(SampleRow, TemperatureScalesTheLogits) {
  // Temperature 2 halves the gaps: weights 1/2, 1, 1/2, 1/√2; id 0 holds 1/2 of the total.
  const std::vector<float> l = quarters();
  const double first = 0.5 / (2 + 1 / std::sqrt(2.0));
  EXPECT_EQ(pick(l, at(first - 0.01, 0, 1.0f, 0.0f, 2.0f)), 0);
  EXPECT_EQ(pick(l, at(first + 0.01, 0, 1.0f, 0.0f, 2.0f)), 1);
}

TEST(SampleRow, SkipsNaNAndMinusInfinityAndSharesPlusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(pick({nan, -inf, nan}, at(0.5)), -1);  // no candidate
  EXPECT_EQ(pick({nan, -inf, -50.0f, nan}, at(0.999)), 2);
  std::set<int32_t> seen;
  for (double u : {0.1, 0.4, 0.6, 0.9}) seen.insert(pick({inf, 5.0f, inf, nan}, at(u)));
  EXPECT_EQ(seen, (std::set<int32_t>{0, 2}));
  // top-k counts candidates only: of 3, 2, 1 (ids 2, 3, 1) it keeps the first two.
  EXPECT_EQ(pick({nan, 1.0f, 3.0f, 2.0f}, at(0.999, 2)), 3);
}

TEST(SampleRow, NegativeZeroTiesWithZero) {
  // -0 and +0 are one value: top-k 1 keeps the lower id whichever sign it has.
  EXPECT_EQ(pick({-0.0f, 0.0f}, at(0.9, 1)), 0);
  EXPECT_EQ(pick({0.0f, -0.0f}, at(0.9, 1)), 0);
  EXPECT_EQ(pick({-0.0f, 0.0f}, at(0.9)), 1);  // both kept: 0.9 lies in the second half
}

TEST(SampleRow, FlatRowsShareTheDrawEqually) {
  const std::vector<float> l(1000, 0.25f);
  std::vector<int> hits(l.size());
  for (int i = 0; i < 4000; ++i) ++hits[static_cast<size_t>(pick(l, at((i + 0.5) / 4000)))];
  for (size_t t = 0; t < l.size(); ++t) EXPECT_EQ(hits[t], 4) << "token " << t;  // u sweeps each share
}

}  // namespace
}  // namespace strata
