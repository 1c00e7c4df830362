// Host tensors for the op tests: seeded normal inputs, NaN-filled outputs (so an element a kernel
// leaves unwritten fails), copies and I32 index lists.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace strata::test {

inline HostTensor random_tensor(Shape shape, uint32_t seed, float stddev = 1.0f) {
  HostTensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = d(rng);
  return t;
}

// Filled with NaN, so an element a kernel leaves unwritten (or reads out of range) fails the test.
inline HostTensor nan_tensor(Shape shape) {
  HostTensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  return t;
}

inline HostTensor clone(const HostTensor& t) {
  HostTensor c(t.dtype(), t.shape());
  std::memcpy(c.as<void>(), t.as<void>(), t.view().nbytes());
  return c;
}

inline HostTensor int_tensor(const std::vector<int32_t>& values) {
  HostTensor t(DType::kI32, {static_cast<int64_t>(values.size())});
  std::memcpy(t.as<int32_t>(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

}  // namespace strata::test
