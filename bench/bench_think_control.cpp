// Cost of think control per generated token (thinking-loop detector, budget, answer guard) against
// the decode step it rides on, for the tiny Qwen3.5 golden and, when present, the built-in model.
// Prints a markdown table; asserts nothing.
//
// Usage: bench_think_control [model_dir ...]   (default: tests/fixtures/models/qwen35, models/strata-demo)
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "bench_util.h"
#include "control/think_control.h"

using namespace strata;

int main(int argc, char** argv) {
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) models.push_back(argv[i]);
  if (models.empty()) models = {"tests/fixtures/models/qwen35", "models/strata-demo"};
  std::printf("command: %s", argv[0]);
  for (const auto& m : models) std::printf(" %s", m.c_str());
  std::printf("\ndevice: %s, %d threads\n\n", bench::cpu_name().c_str(), omp_get_max_threads());

  // The controller on a long non-repeating thinking stream (the detector's worst case: no early exit).
  const control::ThinkControlConfig& config = control::ThinkControlConfig::defaults();
  control::ThinkSettings s;
  s.starts_in_reasoning = true;
  s.think_open = 1;
  s.think_close = 2;
  s.max_thinking_tokens = 1 << 30;
  s.max_answer_tokens = 1 << 30;
  s.escape_tokens = {2, 3};
  s.loop = config.loop;
  s.answer_loop = config.answer_loop;
  control::ThinkController controller(s);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> d(10, 150000);
  const int n = 2'000'000;
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = d(rng);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t decisions = 0;
  for (int32_t t : tokens) decisions += controller.on_sampled(t).keep;
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("think control: %.1f ns per token (%lld tokens, loop periods %d..%d)\n\n", ns,
              static_cast<long long>(decisions), config.loop.min_period, config.loop.max_period);

  std::printf("| model | decode ms/token (batch 1, CPU) | think control ns/token | overhead |\n|---|---|---|---|\n");
  for (const auto& dir : models) {
    if (!std::filesystem::exists(dir + "/config.json")) continue;
    auto m = model::load_model(dir);
    const bench::Speed speed = bench::measure(*m, 32, 64);
    const double ms = 1e3 / speed.decode_tps;
    std::printf("| %s | %.3f | %.1f | %.4f%% |\n", dir.c_str(), ms, ns, 100.0 * ns / (ms * 1e6));
  }
  return 0;
}
