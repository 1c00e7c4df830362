// What the tests that run fixture models share: the models, random prompts and greedy picks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/model.h"
#include "test_util.h"

namespace strata::test {

// The fixture model tests/fixtures/models/<name> (llama, qwen35, ...), on the CPU.
inline std::unique_ptr<model::Model> load_fixture_model(const std::string& name) {
  return model::load_model(test_fixture("models/" + name));
}

// n token ids in [0, vocab), the same for the same seed.
inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// The greedy pick of an F32 logits row: the first of its largest values.
inline int32_t argmax(const HostTensor& logits) {
  const float* p = logits.as<float>();
  return static_cast<int32_t>(std::max_element(p, p + logits.numel()) - p);
}

}  // namespace strata::test
