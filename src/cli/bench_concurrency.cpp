// The concurrency bench: every request of a run is added at once, so all prefill together and then
// decode together; each token's arrival is timed on the engine thread.
#include "cli/bench_concurrency.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "backend/graph.h"
#include "backend/memory.h"
#include "cli/bench_ops.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/engine.h"

namespace strata::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One request: token arrival times, in seconds from the run's start.
class TimedWork final : public runtime::Work {
 public:
  TimedWork(Clock::time_point t0, size_t expected) : t0_(t0) { times.reserve(expected); }
  bool on_token(int32_t) override {
    times.push_back(seconds_between(t0_, Clock::now()));
    return true;
  }
  void on_finish(const runtime::GenerationResult&) override {}
  void on_error(const std::string& message) override { error = message; }

  std::vector<double> times;
  std::string error;

 private:
  Clock::time_point t0_;
};

struct Level {
  int64_t requests = 0;
  double wall_s = 0;
  double aggregate_tok_s = 0;  // every generated token over the run's wall time
  double steady_tok_s = 0;     // tokens while every request decodes, over that window
  double per_seq_tok_s = 0;    // mean over requests of (tokens − 1) / (last − first token)
  double ttft_mean_ms = 0, ttft_max_ms = 0;
  double step_ms = 0;              // steady window / steps in it
  double forwards_per_step = 0;    // decode forwards (batches) a step in that window
  double gb_per_step = 0;          // weights once a forward + state + KV
  double gb_per_step_batched = 0;  // the same with the weights read once a step
};

std::vector<int32_t> prompt_of(int64_t request, int64_t length, int64_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i)
    p[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + request * 104729 + 1) % vocab);
  return p;
}

// Per-op device times of a run's steady steps (every request decoding), per step.
struct StepOps {
  std::vector<OpTime> ops;
  int64_t steps = 0;
};

// ops: when given, the op timers run over the steps taken while every request decodes.
Level run_level(runtime::Engine& engine, int64_t n, const ConcurrencyPlan& plan, StepOps* ops = nullptr) {
  const int64_t vocab = engine.model().config().vocab_size;
  const Clock::time_point t0 = Clock::now();
  std::vector<std::shared_ptr<TimedWork>> works;
  for (int64_t r = 0; r < n; ++r) {
    auto w = std::make_shared<TimedWork>(t0, static_cast<size_t>(plan.tokens));
    w->request.prompt = prompt_of(r, plan.prompt, vocab);
    w->request.max_tokens = plan.tokens;
    w->request.sampling.temperature = 0.0f;
    works.push_back(w);
    engine.add(w);
  }
  std::vector<double> step_end;  // when each step ended
  std::vector<int64_t> forwards;  // decode forwards so far, at each step's end
  const Device device = engine.model().device();
  auto all_decoding = [&] {
    return std::all_of(works.begin(), works.end(), [&](const auto& w) {
      return !w->times.empty() && static_cast<int64_t>(w->times.size()) < plan.tokens;
    });
  };
  bool timing = false;
  while (!engine.idle()) {
    if (ops != nullptr && all_decoding() != timing) {
      timing = !timing;
      if (timing) backend::reset_op_timers(device);
      backend::enable_op_timers(device, timing);
      if (!timing) ops->ops = harvest_op_times(device, static_cast<double>(std::max<int64_t>(ops->steps, 1)));
    }
    engine.step();
    if (timing) ++ops->steps;
    step_end.push_back(seconds_between(t0, Clock::now()));
    forwards.push_back(engine.stats().decode_forwards);
  }
  if (timing) {
    backend::enable_op_timers(device, false);
    ops->ops = harvest_op_times(device, static_cast<double>(std::max<int64_t>(ops->steps, 1)));
  }
  Level l;
  l.requests = n;
  l.wall_s = seconds_between(t0, Clock::now());
  double last_first = 0, first_end = 1e300, ttft_sum = 0, per_seq_sum = 0;
  int64_t generated = 0;
  for (const auto& w : works) {
    check(w->error.empty() && static_cast<int64_t>(w->times.size()) == plan.tokens,
          ErrorKind::kInternal, "bench: a request generated {} of {} tokens{}", w->times.size(),
          plan.tokens, w->error.empty() ? "" : ": " + w->error);
    generated += static_cast<int64_t>(w->times.size());
    last_first = std::max(last_first, w->times.front());
    first_end = std::min(first_end, w->times.back());
    ttft_sum += w->times.front();
    l.ttft_max_ms = std::max(l.ttft_max_ms, w->times.front() * 1e3);
    if (w->times.size() > 1)
      per_seq_sum +=
          static_cast<double>(w->times.size() - 1) / (w->times.back() - w->times.front());
  }
  l.ttft_mean_ms = ttft_sum / static_cast<double>(n) * 1e3;
  l.per_seq_tok_s = per_seq_sum / static_cast<double>(n);
  l.aggregate_tok_s = static_cast<double>(generated) / l.wall_s;
  // The steady window: every request has its first token and none has ended.
  int64_t in_window = 0;
  for (const auto& w : works)
    in_window += std::count_if(w->times.begin(), w->times.end(),
                               [&](double t) { return t > last_first && t <= first_end; });
  const double window = first_end - last_first;
  int64_t window_steps = 0, window_forwards = 0;
  for (size_t s = 0; s < step_end.size(); ++s) {
    if (step_end[s] <= last_first || step_end[s] > first_end) continue;
    ++window_steps;
    window_forwards += forwards[s] - (s > 0 ? forwards[s - 1] : 0);
  }
  if (window > 0 && window_steps > 0) {
    l.steady_tok_s = static_cast<double>(in_window) / window;
    l.step_ms = window / static_cast<double>(window_steps) * 1e3;
    l.forwards_per_step = static_cast<double>(window_forwards) / static_cast<double>(window_steps);
  }
  return l;
}

// The largest run again on an engine without graphs, every op dispatched and timed on its own: a
// table of device ms per op of its steady decode steps. The table follows the model's rows.
std::string step_breakdown(const std::string& name, int bits, const model::SyntheticCheckpoint& ck,
                           const Settings& settings, const ConcurrencyPlan& plan) {
  const int64_t most = *std::max_element(plan.levels.begin(), plan.levels.end());
  std::fprintf(stderr, "bench: %s %d-bit: per-op breakdown of %lld requests at once, eager\n", name.c_str(), bits,
               static_cast<long long>(most));
  try {
    runtime::EngineOptions options = engine_options(settings, plan.prompt + plan.tokens + 1);
    options.parallel = most;
    options.prefix_cache = 0;
    model::LoadOptions load = load_options(settings, "");
    load.cuda_graphs = false;
    runtime::Engine engine(
        model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), load), options);
    StepOps ops;
    const Level l = run_level(engine, most, plan, &ops);
    std::string out = fmt::format(
        "\n\nDecode step by op, {} {}-bit, {} requests at once, eager (no graphs): device ms per step, the mean "
        "of the {} steps in which every request decoded (step {:.2f} ms with the timers)\n\n| op | ms / step | % "
        "of op time |\n|---|---|---|\n",
        name, bits, most, ops.steps, l.step_ms);
    out += op_rows(ops.ops);
    out += "Device time per op from CUDA events around each op (all calls of an op name summed; an op's events "
           "include its launch gaps).\n";
    return out;
  } catch (const std::exception& e) {
    return fmt::format("\n\nThe per-op breakdown of {} {}-bit failed: {}\n", name, bits, e.what());
  }
}

}  // namespace

std::string concurrency_table_header() {
  return "| model | bits | requests | aggregate tok/s | steady decode tok/s | per-sequence tok/s | "
         "TTFT mean ms | "
         "TTFT max ms | step ms | forwards/step | GB/step as run | GB/step batched | % of peak BW |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
}

std::string bench_concurrency(const std::string& name, const Json& config, int bits,
                              const Settings& settings, const ConcurrencyPlan& plan,
                              double peak_bandwidth, std::string* breakdown) {
  const model::SyntheticCheckpoint ck = model::make_synthetic_checkpoint(config, {.bits = bits});
  std::string out;
  const int64_t most = *std::max_element(plan.levels.begin(), plan.levels.end());
  const int64_t ctx = plan.prompt + plan.tokens + 1;
  runtime::EngineOptions options = engine_options(settings, ctx);
  options.parallel = most;
  options.prefix_cache = 0;  // cold prefills only
  runtime::Engine engine(
      model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors),
                        load_options(settings, "")),
      options);
  const model::ModelInfo info = engine.model().info();
  {
    runtime::GenerationRequest warm;  // workspaces, cuBLAS, the first graphs
    warm.prompt =
        prompt_of(0, std::min<int64_t>(plan.prompt, 64), engine.model().config().vocab_size);
    warm.max_tokens = 4;
    warm.sampling.temperature = 0.0f;
    (void)engine.generate(warm);
  }
  for (int64_t n : plan.levels) {
    std::fprintf(stderr, "bench: %s %d-bit: %lld requests at once\n", name.c_str(), bits,
                 static_cast<long long>(n));
    try {
      Level l = run_level(engine, n, plan);
      // A decode step reads the weights once a decode forward (a batch of sequences), every
      // sequence's recurrent state (read and written) and its KV rows so far.
      const double weights = static_cast<double>(info.weight_bytes);
      const double state = 2.0 * static_cast<double>(info.state_bytes_fixed) +
                           static_cast<double>(info.state_bytes_per_token) *
                               static_cast<double>(plan.prompt + plan.tokens / 2);
      l.gb_per_step = (weights * l.forwards_per_step + state * static_cast<double>(n)) / 1e9;
      l.gb_per_step_batched = (weights + state * static_cast<double>(n)) / 1e9;
      const double bw = l.step_ms > 0 ? l.gb_per_step * 1e9 / (l.step_ms / 1e3) : 0;
      out += fmt::format(
          "| {} | {} | {} | {:.0f} | {:.0f} | {:.1f} | {:.0f} | {:.0f} | {:.2f} | {:.1f} | {:.2f} "
          "| {:.2f} | {} |\n",
          name, bits, n, l.aggregate_tok_s, l.steady_tok_s, l.per_seq_tok_s, l.ttft_mean_ms,
          l.ttft_max_ms, l.step_ms, l.forwards_per_step, l.gb_per_step, l.gb_per_step_batched,
          peak_bandwidth > 0 ? fmt::format("{:.0f}%", 100.0 * bw / peak_bandwidth) : "n/a");
    } catch (const std::exception& e) {
      std::string why = e.what();
      std::replace(why.begin(), why.end(), '|', '/');
      out += fmt::format("| {} | {} | {} | failed: {} ||||||||||\n", name, bits, n, why);
    }
  }
  if (breakdown != nullptr && plan.breakdown && engine.model().device() == Device::kCuda)
    *breakdown += step_breakdown(name, bits, ck, settings, plan);
  return out;
}

std::string concurrency_notes(const ConcurrencyPlan& plan) {
  return fmt::format(
      "\nEach run adds its requests at once ({}-token prompts of distinct token ids, {} greedy "
      "tokens each, no "
      "stop) to one engine with a slot per request of the largest run; the engine steps until all "
      "end.\n"
      "- aggregate tok/s: every generated token over the run's wall time (prefill included).\n"
      "- steady decode tok/s: tokens that arrived while every request was decoding (after the last "
      "first token, "
      "before the first end), over that window; step ms: that window over the engine steps in it.\n"
      "- per-sequence tok/s: mean over requests of (tokens − 1) / (last token − first token).\n"
      "- TTFT: from the run's start (all requests added) to each request's first token.\n"
      "- forwards/step: decode forwards in the window over its steps (a forward carries up to the "
      "model's max_decode_batch() sequences; running ahead, a step's decodes may take two).\n"
      "- GB/step as run: the weights once a forward (a decode matmul of more than 16 rows reads "
      "them once per 16), plus every sequence's recurrent state (read and written) and KV rows (at "
      "the run's mean context); GB/step batched: the same with the weights read once per step. "
      "% of peak BW: GB/step as run over step ms.\n",
      plan.prompt, plan.tokens);
}

}  // namespace strata::cli
