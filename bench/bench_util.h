// Shared pieces of the CPU benchmarks: the machine's name and a prefill + decode timing of a model.
#pragma once

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "model/model.h"

namespace strata::bench {

inline std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

struct Speed {
  double prefill_tps = 0, decode_tps = 0;
};

// One warm-up forward, then a `prompt`-token prefill (one call) and `decode` one-token steps.
inline Speed measure(model::Model& m, int64_t prompt, int64_t decode) {
  using Clock = std::chrono::steady_clock;
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> ids(static_cast<size_t>(prompt));
  for (int64_t i = 0; i < prompt; ++i) ids[i] = static_cast<int32_t>((i * 7919) % V);
  HostTensor logits(DType::kF32, {V});
  model::ModelState warm = m.new_state(prompt + decode + 1);
  m.forward(std::span<const int32_t>(ids).subspan(0, std::min<int64_t>(16, prompt)), warm, logits, false);
  model::ModelState state = m.new_state(prompt + decode + 1);
  const auto t0 = Clock::now();
  m.forward(ids, state, logits, false);
  const auto t1 = Clock::now();
  for (int64_t i = 0; i < decode; ++i) {
    const int32_t tok[1] = {static_cast<int32_t>((i * 31) % V)};
    m.forward(tok, state, logits, false);
  }
  const auto t2 = Clock::now();
  return {static_cast<double>(prompt) / std::chrono::duration<double>(t1 - t0).count(),
          static_cast<double>(decode) / std::chrono::duration<double>(t2 - t1).count()};
}

}  // namespace strata::bench
