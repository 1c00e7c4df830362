// The prefix-cache bench: each measured request runs alone on the engine thread; its time to first
// token runs from add() to the first token's callback.
#include "cli/bench_prefix.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "cli/model_loading.h"
#include "core/error.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/engine.h"

namespace strata::cli {

namespace {

using Clock = std::chrono::steady_clock;

class FirstTokenWork final : public runtime::Work {
 public:
  bool on_token(int32_t id) override {
    if (tokens.empty()) first = Clock::now();
    tokens.push_back(id);
    return true;
  }
  void on_finish(const runtime::GenerationResult& r) override { result = r; }
  void on_error(const std::string& message) override { error = message; }

  Clock::time_point first;
  std::vector<int32_t> tokens;
  runtime::GenerationResult result;
  std::string error;
};

std::vector<int32_t> tokens_of(int64_t seed, int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + seed * 104729 + 11) % vocab);
  return t;
}

struct Run {
  double ttft_ms = 0;
  int64_t cached = 0;
  bool from_host = false;
  std::vector<int32_t> answer;
};

Run run_one(runtime::Engine& engine, std::vector<int32_t> prompt, int64_t answer) {
  auto w = std::make_shared<FirstTokenWork>();
  w->request.prompt = std::move(prompt);
  w->request.max_tokens = answer;
  w->request.sampling.temperature = 0.0f;
  const Clock::time_point t0 = Clock::now();
  engine.add(w);
  while (!engine.idle()) engine.step();
  check(w->error.empty() && !w->tokens.empty(), ErrorKind::kInternal, "bench: a request failed: {}", w->error);
  return {std::chrono::duration<double, std::milli>(w->first - t0).count(), w->result.cached_tokens,
          w->result.cached_from_host, w->tokens};
}

std::string cell(const Run& r) { return fmt::format("{:.0f} ({})", r.ttft_ms, r.cached); }

}  // namespace

std::string prefix_table_header(const PrefixPlan& plan) {
  std::string h = "| model | bits | system tokens | cold | warm, device | warm, host |";
  std::string rule = "|---|---|---|---|---|---|";
  for (int t = 1; t <= plan.turns; ++t) {
    h += fmt::format(" turn {} |", t);
    rule += "---|";
  }
  return h + "\n" + rule + "\n";
}

std::string bench_prefix(const std::string& name, const Json& config, int bits, const Settings& settings,
                         const PrefixPlan& plan) {
  const model::SyntheticCheckpoint ck = model::make_synthetic_checkpoint(config, {.bits = bits});
  const int64_t ctx = plan.system + plan.turns * (plan.user + plan.answer) + 1;
  auto engine_with = [&](int64_t device_entries) {
    runtime::EngineOptions o = engine_options(settings, ctx);
    o.prefix_cache = device_entries;
    o.prefix_cache_host_bytes = size_t{16} << 30;  // room for every prefix the runs leave
    return std::make_unique<runtime::Engine>(
        model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), load_options(settings, "")), o);
  };
  std::fprintf(stderr, "bench: %s %d-bit: a %lld-token system prompt\n", name.c_str(), bits,
               static_cast<long long>(plan.system));
  std::unique_ptr<runtime::Engine> engine = engine_with(64);
  const int64_t vocab = engine->model().config().vocab_size;
  const std::vector<int32_t> system = tokens_of(1, plan.system, vocab);
  auto with = [&](std::vector<int32_t> head, int64_t seed) {
    const std::vector<int32_t> user = tokens_of(seed, plan.user, vocab);
    head.insert(head.end(), user.begin(), user.end());
    return head;
  };
  (void)run_one(*engine, tokens_of(99, 64, vocab), 2);  // workspaces, cuBLAS, the first graphs
  const Run cold = run_one(*engine, with(system, 2), plan.answer);
  const Run warm = run_one(*engine, with(system, 3), plan.answer);
  // The host tier: one device entry, pushed out by another prompt's.
  engine = engine_with(1);
  (void)run_one(*engine, tokens_of(99, 64, vocab), 2);
  (void)run_one(*engine, with(system, 2), 2);
  (void)run_one(*engine, with(tokens_of(5, 2 * 512, vocab), 6), 2);
  const Run host = run_one(*engine, with(system, 3), plan.answer);
  // The session, on an engine that has seen nothing.
  engine = engine_with(64);
  (void)run_one(*engine, tokens_of(99, 64, vocab), 2);
  std::vector<int32_t> history = system;
  std::string turns;
  for (int t = 1; t <= plan.turns; ++t) {
    history = with(std::move(history), 10 + t);
    const Run r = run_one(*engine, history, plan.answer);
    history.insert(history.end(), r.answer.begin(), r.answer.end());
    turns += " " + cell(r) + " |";
  }
  return fmt::format("| {} | {} | {} | {} | {} | {}{} |{}\n", name, bits, plan.system, cell(cold), cell(warm),
                     cell(host), host.from_host ? "" : " (not from host)", turns);
}

std::string prefix_notes(const PrefixPlan& plan) {
  return fmt::format(
      "\nEach cell: time to first token in ms (prompt tokens served from the prefix cache). A system prompt of "
      "{} token ids and a {}-token user turn: cold on a fresh engine; warm, device: another user turn after "
      "it; warm, host: the same after another prompt pushed the prefix out of an engine's one device "
      "entry into host memory. Turns: a session on a fresh engine, each turn adding a {}-token user turn "
      "to the history with the {} tokens the last turn answered (greedy). Prefixes are cached in whole "
      "prefill chunks of 512 tokens.\n",
      plan.system, plan.user, plan.user, plan.answer);
}

}  // namespace strata::cli
