// The speculative bench: one engine per target (one request at a time), a plain greedy run that
// records the target's tokens and sets the pace, then speculative runs of the same prompt, each
// checked token for token against the plain run (greedy verification is exact).
#include "cli/bench_speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "backend/graph.h"
#include "cli/bench_oracle.h"
#include "cli/bench_ops.h"
#include "cli/bench_shapes.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/engine.h"
#include "runtime/speculative.h"
#include "text/chat/chat_template.h"
#include "text/tokenizer.h"

namespace strata::cli {

namespace {

using Clock = std::chrono::steady_clock;
using Method = runtime::SpeculativeParams::Method;

// The file the code-editing prompt asks a real model to repeat with one edit: where the output
// repeats its input, n-gram lookup drafts well.
constexpr const char* kCodeFile = R"(import json
import os
from dataclasses import dataclass, field


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 4
    timeout_seconds: float = 30.0
    allowed_origins: list = field(default_factory=list)


def parse_config(path):
    """Reads a JSON config file and returns a ServerConfig."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no config at {path}")
    with open(path) as f:
        data = json.load(f)
    config = ServerConfig()
    for key, value in data.items():
        if not hasattr(config, key):
            raise KeyError(f"unknown config key: {key}")
        setattr(config, key, value)
    if config.port <= 0 or config.port > 65535:
        raise ValueError(f"port out of range: {config.port}")
    if config.workers < 1:
        raise ValueError("at least one worker is needed")
    return config


def merge_configs(base, override):
    """Returns a copy of base with every field override sets."""
    merged = ServerConfig(**vars(base))
    for key, value in vars(override).items():
        if value is not None:
            setattr(merged, key, value)
    return merged


def main():
    config = parse_config(os.environ.get("SERVER_CONFIG", "server.json"))
    print(f"listening on {config.host}:{config.port} with {config.workers} workers")


if __name__ == "__main__":
    main()
)";

constexpr const char* kRealPrompts[] = {
    "Write a short story about a robot who learns to paint.",
    "Explain how a hash map works, with an example.",
    "List five tips for writing clear code.",
};

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string cell_text(std::string s) {  // one table cell
  std::replace(s.begin(), s.end(), '|', '/');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// One greedy request, each token's arrival timed from when it was given.
struct Run {
  std::vector<int32_t> tokens;
  std::vector<double> times;
  runtime::SpeculativeStats speculative;
  // Decode only: the tokens after the first (which the prefill picks) over the time since it came.
  double tok_s() const {
    const size_t n = times.size();
    return n >= 2 && times[n - 1] > times[0]
               ? static_cast<double>(n - 1) / (times[n - 1] - times[0])
               : 0.0;
  }
  double accepted_per_step() const {
    return speculative.steps > 0
               ? static_cast<double>(speculative.accepted) / static_cast<double>(speculative.steps)
               : 0.0;
  }
};

struct Prompt {
  std::string name;
  std::vector<int32_t> ids;
};

// A target loaded on one engine, with what its runs share.
struct Bench {
  std::string name, bits;  // bits: the width of random weights, or a directory's quantization
  model::SyntheticCheckpoint checkpoint, draft_checkpoint;  // random weights (kept while loaded)
  std::unique_ptr<text::Tokenizer> tokenizer;               // a model directory's, and its template
  std::optional<text::chat::ChatTemplate> chat_template;
  std::vector<int32_t> stop_ids;  // a model directory's; the random shapes run to max_tokens
  std::unique_ptr<model::Model> draft_shape;
  std::shared_ptr<model::Model> draft_model;
  std::unique_ptr<runtime::Engine> engine;
  int64_t vocab = 0;
  int64_t most_drafts = 0;  // what a verify step takes besides the request's own token
};

Run run(Bench& b, const std::vector<int32_t>& prompt, int64_t tokens,
        runtime::SpeculativeParams speculative, runtime::Drafter* drafter = nullptr) {
  runtime::GenerationRequest request;
  request.prompt = prompt;
  request.max_tokens = tokens;
  request.sampling.temperature = 0.0f;
  request.stop_ids = b.stop_ids;
  request.speculative = speculative;
  request.drafter = drafter;
  Run r;
  r.times.reserve(static_cast<size_t>(tokens));
  const Clock::time_point t0 = Clock::now();
  const runtime::GenerationResult result = b.engine->generate(request, [&](int32_t) {
    r.times.push_back(seconds_between(t0, Clock::now()));
    return true;
  });
  r.tokens = result.tokens;
  r.speculative = result.speculative;
  return r;
}

const runtime::SpeculativeParams kPlain = {.method = Method::kOff};

// A config of the draft shape that drafts for this target: the shape's layers and widths, the
// target's vocabulary (a draft model shares its target's ids).
Json with_vocabulary(Json config, int64_t vocab) {
  (config.contains("text_config") ? config["text_config"] : config)["vocab_size"] = vocab;
  return config;
}

// The prompts of the real-drafter table: a code-editing one first, then (for a model with a
// tokenizer) the few real ones.
std::vector<Prompt> real_prompts(const Bench& b, const SpeculativePlan& plan) {
  std::vector<Prompt> out;
  if (!b.tokenizer) {
    // Token ids: a "file" of distinct ids, then its start again, as if being repeated.
    const int64_t file = std::max<int64_t>(plan.prompt * 3 / 5, 1);
    Prompt p{"code edit (token ids: a file, then its start again)", {}};
    for (int64_t i = 0; i < plan.prompt; ++i)
      p.ids.push_back(static_cast<int32_t>(((i % file) * 7919 + 3) % b.vocab));
    out.push_back(std::move(p));
    return out;
  }
  auto encode = [&](const std::string& message) {
    text::chat::ChatRequest request;
    request.messages.push_back({{"role", "user"}, {"content", message}});
    return b.tokenizer->encode(b.chat_template->render(request).text, /*add_special_tokens=*/false);
  };
  out.push_back(
      {"code edit (repeat a 50-line Python file, renaming a function)",
       encode(std::string(
                  "Repeat this file exactly, but rename the function parse_config to load_config "
                  "everywhere:\n\n```python\n") +
              kCodeFile + "```")});
  for (const char* text : kRealPrompts) out.push_back({fmt::format("\"{}\"", text), encode(text)});
  return out;
}

// Loads into b in place: the models hold views of its checkpoints' memory.
void load(Bench& b, const SpeculativeTarget& target, const Settings& settings,
          const SpeculativePlan& plan) {
  b.name = target.name;
  const model::LoadOptions options = load_options(settings, "");
  std::unique_ptr<model::Model> m;
  if (!target.dir.empty()) {
    m = model::load_model(target.dir, options);
    b.bits = m->info().quantization;
    b.tokenizer = text::Tokenizer::load(target.dir);
    b.chat_template.emplace(
        text::chat::ChatTemplate::load(target.dir));  // ChatML where it ships none
    b.stop_ids = b.tokenizer->eos_ids();
    for (int32_t id : m->config().eos_token_ids)
      if (std::find(b.stop_ids.begin(), b.stop_ids.end(), id) == b.stop_ids.end())
        b.stop_ids.push_back(id);
  } else {
    b.bits = std::to_string(target.bits);
    b.checkpoint = model::make_synthetic_checkpoint(target.config, {.bits = target.bits});
    m = model::load_model(b.checkpoint.config,
                          formats::WeightStore::from_tensors(b.checkpoint.tensors), options);
  }
  b.vocab = m->config().vocab_size;
  b.most_drafts = m->max_verify_tokens() - 1;
  check(b.most_drafts >= 1, ErrorKind::kUnsupported,
        "{} cannot verify drafts (Model::max_verify_tokens)", b.name);
  if (!plan.draft_shape.empty()) {
    const int bits = target.dir.empty() ? target.bits : 4;
    b.draft_checkpoint = model::make_synthetic_checkpoint(
        with_vocabulary(bench_shape_config(plan.draft_shape), b.vocab), {.bits = bits});
    b.draft_shape =
        model::load_model(b.draft_checkpoint.config,
                          formats::WeightStore::from_tensors(b.draft_checkpoint.tensors), options);
  }
  if (!plan.draft_model.empty()) {  // loaded as --draft-model loads it: without quantizing
    b.draft_model = model::load_model(plan.draft_model, load_options(settings, "none"));
    check(b.draft_model->config().vocab_size == b.vocab, ErrorKind::kInvalidInput,
          "the draft model's vocabulary has {} tokens; the target's {}",
          b.draft_model->config().vocab_size, b.vocab);
  }
  int64_t longest = plan.prompt;
  for (const Prompt& p : real_prompts(b, plan))
    longest = std::max(longest, static_cast<int64_t>(p.ids.size()));
  Settings engine_settings = settings;
  engine_settings.draft_model.clear();  // the bench's own --draft-model, loaded above
  runtime::EngineOptions o = engine_options(engine_settings, longest + plan.tokens + 1);
  o.parallel = 1;
  o.prefix_cache = 0;  // every prompt runs cold
  o.draft_model = b.draft_model;
  b.engine = std::make_unique<runtime::Engine>(std::move(m), o);
}

std::string lengths_cell(int64_t asked, int64_t k) {
  return k == asked ? std::to_string(k) : fmt::format("{} ({} asked)", k, asked);
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The sweep's rows for one target: plain, then per draft length and drafter cost, per acceptance.
std::string sweep(Bench& b, const SpeculativePlan& plan) {
  std::vector<int32_t> prompt(static_cast<size_t>(plan.prompt));
  for (int64_t i = 0; i < plan.prompt; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 1) % b.vocab);
  std::fprintf(stderr, "bench: %s: plain greedy decoding, %lld tokens after %lld\n", b.name.c_str(),
               static_cast<long long>(plan.tokens), static_cast<long long>(plan.prompt));
  const Run recorded =
      run(b, prompt, plan.tokens, kPlain);  // the tokens; also warms workspaces and graphs
  const Run plain = run(b, prompt, plan.tokens, kPlain);
  const double plain_step = plain.tok_s() > 0 ? 1.0 / plain.tok_s() : 0;
  std::string out = fmt::format(
      "| {} | {} | plain | — | — | {:.1f} | 1.00 | — | {:.3f} | — | — | — | {} |\n", b.name, b.bits,
      plain.tok_s(), plain_step * 1e3, yes_no(plain.tokens == recorded.tokens));
  struct Cost {
    std::string name;
    model::Model* model;  // null: free drafts
  };
  std::vector<Cost> costs = {{"none (free drafts)", nullptr}};
  if (b.draft_shape) costs.push_back({plan.draft_shape + " (random weights)", b.draft_shape.get()});
  if (b.draft_model) costs.push_back({"draft model", b.draft_model.get()});
  const int64_t ctx = b.engine->options().context_size;
  // Every length fixed (each step drafts k), then the longest adapting (runtime::DraftLength: as
  // many as pay, none while drafts do not) with free drafts.
  std::vector<std::pair<int64_t, bool>> lengths;
  for (int64_t asked : plan.lengths) lengths.emplace_back(asked, false);
  if (!plan.lengths.empty()) lengths.emplace_back(plan.lengths.back(), true);
  for (const auto& [asked, adaptive] : lengths) {
    const int64_t k = std::min(asked, b.most_drafts);
    const runtime::SpeculativeParams params = {.method = Method::kCustom, .draft_max = k, .adaptive = adaptive};
    double verify_step = 0;  // from the free-draft run below that accepts every draft
    for (const Cost& cost : costs) {
      if (adaptive && cost.model != nullptr) continue;
      // A fresh drafter per run; a draft model first sees the prompt alone (its prefill), untimed.
      std::unique_ptr<runtime::ModelDrafter> inner;
      auto oracle = [&](double acceptance) {
        inner.reset();
        if (cost.model != nullptr) {
          inner = std::make_unique<runtime::ModelDrafter>(*cost.model, ctx);
          std::vector<int32_t> scratch;
          inner->propose(prompt, 1, scratch);
        }
        return OracleDrafter(prompt.size(), recorded.tokens, acceptance, plan.seed, b.vocab,
                             inner.get());
      };
      std::fprintf(stderr, "bench: %s: %lld drafts a step, drafter cost %s\n", b.name.c_str(),
                   static_cast<long long>(k), cost.name.c_str());
      {  // untimed: captures this length's verify graphs (and the draft model's); times a verify
         // step
        OracleDrafter all = oracle(1.0);
        (void)run(b, prompt, plan.tokens, params, &all);
        if (cost.model == nullptr) verify_step = median(all.gaps());
      }
      for (int a : plan.acceptance) {
        const double acceptance = a / 100.0;
        try {
          OracleDrafter drafter = oracle(acceptance);
          const Run r = run(b, prompt, plan.tokens, params, &drafter);
          const double draft_step =
              drafter.calls() > 0 ? drafter.inner_seconds() / static_cast<double>(drafter.calls())
                                  : 0;
          double expected = 0;  // sum of a^i, i = 1..k: P(the first i drafts are right)
          for (int64_t i = 1; i <= k; ++i) expected += std::pow(acceptance, static_cast<double>(i));
          const double predicted =
              verify_step + draft_step > 0
                  ? (1.0 + r.accepted_per_step()) * plain_step / (verify_step + draft_step)
                  : 0;
          out += fmt::format(
              "| {} | {} | {} | {} | {} | {:.1f} | {:.2f} | {:.2f} ({:.2f}) | {:.3f} | {:.3f} | "
              "{:.3f} | "
              "{:.2f} | {} |\n",
              b.name, b.bits, cost.name, adaptive ? "≤ " + lengths_cell(asked, k) + " adaptive" : lengths_cell(asked, k), a, r.tok_s(),
              plain.tok_s() > 0 ? r.tok_s() / plain.tok_s() : 0, r.accepted_per_step(), expected,
              plain_step * 1e3, verify_step * 1e3, draft_step * 1e3, predicted,
              yes_no(r.tokens == recorded.tokens));
        } catch (const std::exception& e) {
          out += fmt::format("| {} | {} | {} | {} | {} | failed: {} |||||||\n", b.name, b.bits,
                             cost.name, lengths_cell(asked, k), a, cell_text(e.what()));
        }
      }
    }
  }
  return out;
}

// The real drafters' rows for one target: per prompt, plain, then each drafter at each length.
std::string real(Bench& b, const SpeculativePlan& plan) {
  std::vector<std::pair<std::string, Method>> drafters = {{"n-gram", Method::kNgram}};
  if (b.draft_model)
    drafters.emplace_back(fmt::format("draft model {}", plan.draft_model), Method::kDraft);
  std::string out;
  for (const Prompt& p : real_prompts(b, plan)) {
    std::fprintf(stderr, "bench: %s: real drafters on %s\n", b.name.c_str(), p.name.c_str());
    const Run recorded = run(b, p.ids, plan.tokens, kPlain);  // also warms this prompt's graphs
    const Run plain = run(b, p.ids, plan.tokens, kPlain);
    std::vector<std::pair<int64_t, bool>> lengths;  // each fixed, then the longest adapting
    for (int64_t asked : plan.lengths) lengths.emplace_back(asked, false);
    if (!plan.lengths.empty()) lengths.emplace_back(plan.lengths.back(), true);
    for (const auto& [name, method] : drafters)
      for (const auto& [asked, adaptive] : lengths) {
        const int64_t k = std::min(asked, b.most_drafts);
        const runtime::SpeculativeParams params = {.method = method, .draft_max = k, .adaptive = adaptive};
        try {
          (void)run(b, p.ids, plan.tokens, params);  // untimed: this length's verify graphs
          const Run r = run(b, p.ids, plan.tokens, params);
          const runtime::SpeculativeStats& s = r.speculative;
          out += fmt::format(
              "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} | {:.1f} | {:.1f} | {:.2f} | {} "
              "|\n",
              b.name, b.bits, name, p.name, p.ids.size(),
              adaptive ? "≤ " + lengths_cell(asked, k) + " adaptive" : lengths_cell(asked, k), r.tokens.size(),
              s.drafted > 0 ? fmt::format("{:.1f}", 100.0 * static_cast<double>(s.accepted) /
                                                        static_cast<double>(s.drafted))
                            : std::string("—"),
              r.accepted_per_step(), plain.tok_s(), r.tok_s(),
              plain.tok_s() > 0 ? r.tok_s() / plain.tok_s() : 0,
              yes_no(r.tokens == recorded.tokens && plain.tokens == recorded.tokens));
        } catch (const std::exception& e) {
          out +=
              fmt::format("| {} | {} | {} | {} | {} | {} | failed: {} ||||||\n", b.name, b.bits,
                          name, p.name, p.ids.size(), lengths_cell(asked, k), cell_text(e.what()));
        }
      }
  }
  return out;
}

std::string join(const auto& values) {
  std::string s;
  for (const auto& v : values) {
    if (!s.empty()) s += ',';
    s += fmt::format("{}", v);
  }
  return s;
}

}  // namespace

std::string speculative_settings(const SpeculativePlan& plan, const Settings& settings) {
  return fmt::format(
      "settings: greedy, {} tokens per request; sweep prompt {} token ids; acceptance {} %; draft "
      "lengths {}; "
      "drafter costs: none{}{}; oracle seed {}; KV cache {}; run_ahead {} (plain decoding, on a "
      "GPU); CUDA graphs {}",
      plan.tokens, plan.prompt, join(plan.acceptance), join(plan.lengths),
      plan.draft_shape.empty() ? "" : ", " + plan.draft_shape + " (random weights)",
      plan.draft_model.empty() ? "" : ", " + plan.draft_model, plan.seed,
      settings.kv_cache_type.empty() ? "auto" : settings.kv_cache_type,
      settings.run_ahead ? "on" : "off", settings.cuda_graphs ? "on" : "off");
}

std::string speculative_sweep_header() {
  return "| model | bits | drafter cost | drafts/step | acceptance % | decode tok/s | speedup | "
         "accepted/step "
         "(expected) | plain step ms | verify step ms | draft ms/step | predicted speedup | tokens "
         "match |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
}

std::string speculative_real_header() {
  return "| model | bits | drafter | prompt | prompt tokens | drafts/step | tokens | accepted % | "
         "accepted/step | "
         "plain tok/s | speculative tok/s | speedup | tokens match |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
}

// Where a decode step's time and a verify step's go on a GPU, op by op: the same weights loaded
// again with graphs off (op timers see launches, not graph replays), one plain run and runs whose
// drafts are all right at 1 draft and at the most, each op's device time per step of the decode
// (the prefill untimed).
std::string verify_breakdown(Bench& b, const SpeculativeTarget& target, const Settings& settings,
                             const SpeculativePlan& plan) {
  model::LoadOptions options = load_options(settings, "");
  options.cuda_graphs = false;
  const Device device = options.device;
  runtime::EngineOptions o = b.engine->options();
  o.draft_model = nullptr;
  o.run_ahead = runtime::EngineOptions::RunAhead::kOff;  // every step launched after the timers start
  runtime::Engine engine(target.dir.empty() ? model::load_model(b.checkpoint.config,
                                                                formats::WeightStore::from_tensors(b.checkpoint.tensors),
                                                                options)
                                            : model::load_model(target.dir, options),
                         o);
  std::vector<int32_t> prompt(static_cast<size_t>(std::min<int64_t>(plan.prompt, 512)));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 1) % b.vocab);
  constexpr int64_t kSteps = 8;
  auto generate = [&](int64_t tokens, runtime::SpeculativeParams params, runtime::Drafter* drafter, bool timed) {
    runtime::GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = tokens;
    r.sampling.temperature = 0.0f;
    r.speculative = params;
    r.drafter = drafter;
    if (timed) backend::reset_op_timers(device);
    const runtime::GenerationResult result = engine.generate(r, [&](int32_t) {
      if (timed) backend::enable_op_timers(device, true);  // from the first token on: decode only
      return true;
    });
    backend::enable_op_timers(device, false);
    return result;
  };
  // Per step: plain, then verify steps of 2 and of the most tokens (all drafts right).
  std::vector<std::pair<std::string, std::vector<OpTime>>> columns;
  (void)generate(1 + kSteps, kPlain, nullptr, false);  // workspaces
  (void)generate(1 + kSteps, kPlain, nullptr, true);
  columns.emplace_back("decode step", harvest_op_times(device, static_cast<double>(kSteps)));
  for (int64_t k : {int64_t{1}, b.most_drafts}) {
    const int64_t tokens = 1 + (k + 1) * kSteps;  // every verify step takes k drafts
    const runtime::GenerationResult want = generate(tokens, kPlain, nullptr, false);
    const runtime::SpeculativeParams params = {.method = Method::kCustom, .draft_max = k, .adaptive = false};
    OracleDrafter warm(prompt.size(), want.tokens, 1.0, plan.seed, b.vocab, nullptr);
    (void)generate(tokens, params, &warm, false);
    OracleDrafter right(prompt.size(), want.tokens, 1.0, plan.seed, b.vocab, nullptr);
    const runtime::GenerationResult got = generate(tokens, params, &right, true);
    columns.emplace_back(fmt::format("verify step, {} tokens", k + 1),
                         harvest_op_times(device, static_cast<double>(std::max<int64_t>(got.speculative.steps, 1))));
  }
  // One row per op, in the order of the longest verify's time.
  std::vector<std::string> ops;
  for (const OpTime& t : columns.back().second) ops.push_back(t.op);
  for (const auto& [name, times] : columns)
    for (const OpTime& t : times)
      if (std::find(ops.begin(), ops.end(), t.op) == ops.end()) ops.push_back(t.op);
  std::string out = "| op |";
  for (const auto& [name, times] : columns) out += fmt::format(" {} ms |", name);
  out += "\n|---|";
  for (size_t i = 0; i < columns.size(); ++i) out += "---|";
  out += "\n";
  std::vector<double> totals(columns.size(), 0.0);
  for (const std::string& op : ops) {
    out += fmt::format("| {} |", op);
    for (size_t c = 0; c < columns.size(); ++c) {
      double ms = 0;
      for (const OpTime& t : columns[c].second)
        if (t.op == op) ms = t.ms;
      totals[c] += ms;
      out += fmt::format(" {:.3f} |", ms);
    }
    out += "\n";
  }
  out += "| all ops |";
  for (double t : totals) out += fmt::format(" {:.3f} |", t);
  return fmt::format("{} ({}), {} tokens of context, graphs off:\n\n{}\n", b.name, b.bits, prompt.size(), out);
}

SpeculativeRows bench_speculative(const SpeculativeTarget& target, const Settings& settings,
                                  const SpeculativePlan& plan) {
  std::fprintf(stderr, "bench: %s: loading\n", target.name.c_str());
  Bench b;
  load(b, target, settings, plan);
  SpeculativeRows rows;
  rows.sweep = sweep(b, plan);
  rows.real = real(b, plan);
  if (b.engine->model().device() == Device::kCuda) {
    try {
      rows.breakdown = verify_breakdown(b, target, settings, plan);
    } catch (const std::exception& e) {
      rows.breakdown = fmt::format("{}: failed: {}\n", b.name, e.what());
    }
  }
  return rows;
}

std::string speculative_sweep_notes(const SpeculativePlan& plan) {
  return fmt::format(
      "\nForced acceptance: random weights never agree with a real draft, so a plain greedy run "
      "first records "
      "the target's {} tokens for a prompt of {} token ids; a second plain run sets the pace "
      "(plain). Each "
      "speculative run drafts with an oracle: for generated position i it proposes the recorded "
      "token when a "
      "hash of (seed, i) falls below the acceptance, else another token, and it always proposes "
      "the full draft "
      "length (draws go on after a wrong draft, which ends the step's acceptance), so every verify "
      "step checks "
      "the same number of rows. With a drafter cost, a draft model (a fresh ModelDrafter per run, "
      "shown the "
      "prompt first, untimed) also drafts at every step and its proposals are discarded.\n"
      "- decode tok/s: tokens after the first over the time since the first arrived (the first "
      "comes from the "
      "prefill); speedup: over plain, measured in the same run on the same engine.\n"
      "- accepted/step: accepted drafts over verify steps; expected: a + a^2 + ... + a^k.\n"
      "- plain step ms: 1 / plain decode tok/s. verify step ms: the median time between one "
      "proposal's end and "
      "the next's start in an untimed run at this length whose drafts are all right and free (the "
      "forward of "
      "k + 1 rows, the picks read back, the engine's host work); draft ms/step: time in the draft "
      "model per "
      "proposal.\n"
      "- predicted speedup: (1 + accepted/step) x plain step / (verify step + draft ms/step).\n"
      "- tokens match: the run's tokens equal the recorded plain ones (greedy verification is "
      "exact).\n"
      "- A model verifies at most Model::max_verify_tokens() tokens a step (its own and the "
      "drafts): a longer "
      "draft length runs at that most, shown as \"k (n asked)\".\n",
      plan.tokens, plan.prompt);
}

std::string speculative_real_notes(const SpeculativePlan& plan) {
  return fmt::format(
      "\nReal drafters through the engine's own methods (n-gram prompt lookup; the draft model, "
      "whose prefill of "
      "the prompt runs at the first verify step, inside the decode time). Each prompt runs plain "
      "twice (the "
      "first records the tokens and warms up), then each drafter and length once untimed and once "
      "timed, up to "
      "{} tokens (a model directory's end-of-sequence ids stop it; random shapes run to the end). "
      "A model "
      "directory's prompts are rendered with its chat template; a random shape's are token ids.\n"
      "- accepted %: accepted over drafted tokens; accepted/step: accepted over verify steps.\n"
      "- tok/s: tokens after the first over the time since the first arrived; speedup: speculative "
      "over plain, "
      "same prompt, same engine.\n"
      "- tokens match: the speculative and plain runs' tokens equal the recorded ones.\n",
      plan.tokens);
}

}  // namespace strata::cli
