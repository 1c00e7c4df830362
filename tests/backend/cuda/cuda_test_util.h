// Shared by the CUDA op tests: host inputs to run on both backends (normal and seeded, or NaN).
#pragma once

#include <cstdint>
#include <limits>
#include <random>

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

}  // namespace strata::test
