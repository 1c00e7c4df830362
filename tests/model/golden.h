// Shared helpers for tests that check a model against the transformers goldens in
// tests/fixtures/models/<name>/golden.safetensors (made by tools/make_model_goldens.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "model/model.h"
#include "test_util.h"

namespace strata::test {

struct Golden {
  std::vector<int32_t> prompt, greedy;
  HostTensor prompt_logits, greedy_logits;  // F32 [T, V], [G, V]
};

inline Golden load_golden(const std::string& name) {
  formats::SafetensorsFile f(test_fixture("models/" + name + "/golden.safetensors"));
  auto ids = [&](const char* key) {
    const Tensor& t = f.tensors().at(key);
    return std::vector<int32_t>(t.as<const int32_t>(), t.as<const int32_t>() + t.numel());
  };
  Golden g;
  g.prompt = ids("prompt_ids");
  g.greedy = ids("greedy_ids");
  g.prompt_logits = to_f32(f.tensors().at("prompt_logits"));
  g.greedy_logits = to_f32(f.tensors().at("greedy_logits"));
  return g;
}

inline float max_abs_diff(const float* a, const float* b, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

inline int32_t argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

struct GoldenRun {
  float max_ref_logit = 0.0f;    // max |reference logit|, for relative tolerances
  std::vector<float> ref_margin; // reference top-1 minus top-2 logit at each greedy step
  float prompt_max_diff = 0.0f;  // over every prompt position's logits
  float prompt_mean_diff = 0.0f; // mean |Δlogit| over every prompt position's logits
  float decode_max_diff = 0.0f;  // over the logits that chose each greedy token
  std::vector<int32_t> greedy;   // our greedy tokens (decoded one at a time with the cache)
};

// Runs the prompt in one forward (all logits), then 32 greedy steps with the state, teacher-free.
inline GoldenRun run_golden(model::Model& m, const Golden& g, int64_t prefill_chunk = 0) {
  const int64_t V = m.config().vocab_size;
  const int64_t T = static_cast<int64_t>(g.prompt.size());
  GoldenRun r;
  model::ModelState state = m.new_state(T + static_cast<int64_t>(g.greedy.size()) + 1);
  HostTensor all(DType::kF32, {T, V});
  HostTensor last(DType::kF32, {V});
  if (prefill_chunk <= 0) {
    m.forward(g.prompt, state, all, true);
    r.prompt_max_diff = max_abs_diff(all.as<float>(), g.prompt_logits.as<float>(), T * V);
    double sum = 0.0;
    for (int64_t i = 0; i < T * V; ++i) sum += std::fabs(all.as<float>()[i] - g.prompt_logits.as<float>()[i]);
    r.prompt_mean_diff = static_cast<float>(sum / static_cast<double>(T * V));
    std::copy(all.as<float>() + (T - 1) * V, all.as<float>() + T * V, last.as<float>());
  } else {
    for (int64_t p = 0; p < T; p += prefill_chunk) {
      const int64_t n = std::min(prefill_chunk, T - p);
      m.forward(std::span<const int32_t>(g.prompt).subspan(p, n), state, last, false);
    }
  }
  for (size_t i = 0; i < g.greedy.size(); ++i) {
    const float* ref = g.greedy_logits.as<float>() + i * V;
    r.decode_max_diff = std::max(r.decode_max_diff, max_abs_diff(last.as<float>(), ref, V));
    std::vector<float> sorted(ref, ref + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    r.ref_margin.push_back(sorted[0] - sorted[1]);
    for (int64_t j = 0; j < V; ++j) r.max_ref_logit = std::max(r.max_ref_logit, std::fabs(ref[j]));
    const int32_t tok = argmax(last.as<float>(), V);
    r.greedy.push_back(tok);
    // Feed the reference token so one early divergence does not hide later comparisons.
    const int32_t next[1] = {g.greedy[i]};
    m.forward(next, state, last, false);
  }
  return r;
}

// Greedy steps where we differ although the reference's top-1 margin exceeds `margin`: those are
// real errors; a differing step inside the margin is a near-tie that quantization may flip.
inline int clear_mismatches(const GoldenRun& r, const std::vector<int32_t>& reference, float margin) {
  int n = 0;
  for (size_t i = 0; i < reference.size() && i < r.greedy.size(); ++i)
    n += r.greedy[i] != reference[i] && r.ref_margin[i] > margin;
  return n;
}

inline double agreement(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t same = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) same += a[i] == b[i];
  return b.empty() ? 1.0 : static_cast<double>(same) / static_cast<double>(b.size());
}

}  // namespace strata::test
