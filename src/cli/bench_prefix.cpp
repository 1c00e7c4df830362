// The prefix-cache bench: each measured request runs alone on the engine thread; its time to first
// token runs from add() to the first token's callback.
#include "cli/bench_prefix.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "cli/bench_shapes.h"
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
  runtime::CacheTier tier = runtime::CacheTier::kNone;
  std::vector<int32_t> answer;
};

// One request alone; `starts`: where its messages after the first begin (as a chat's).
Run run_one(runtime::Engine& engine, std::vector<int32_t> prompt, std::vector<int64_t> starts, int64_t answer) {
  auto w = std::make_shared<FirstTokenWork>();
  w->request.prompt = std::move(prompt);
  w->request.boundaries = std::move(starts);
  w->request.max_tokens = answer;
  w->request.sampling.temperature = 0.0f;
  const Clock::time_point t0 = Clock::now();
  engine.add(w);
  while (!engine.idle()) engine.step();
  check(w->error.empty() && !w->tokens.empty(), ErrorKind::kInternal, "bench: a request failed: {}", w->error);
  return {std::chrono::duration<double, std::milli>(w->first - t0).count(), w->result.cached_tokens,
          w->result.cached_tier, w->tokens};
}

// What the server does after a chat answer while the user types (not timed): the conversation so
// far and the next message's first token prefilled in the background, generating nothing.
void prefill_ahead(runtime::Engine& engine, std::vector<int32_t> history, std::vector<int64_t> starts) {
  starts.push_back(static_cast<int64_t>(history.size()));
  history.push_back(history.back());
  runtime::GenerationRequest r;
  r.prompt = std::move(history);
  r.boundaries = std::move(starts);
  r.max_tokens = 0;
  r.background = true;
  (void)engine.generate(r);
}

// Asks the kernel to forget the cached pages of the files under dir (written and synced, so clean).
void drop_from_page_cache(const std::filesystem::path& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

std::string cell(const Run& r) { return fmt::format("{:.0f} ({})", r.ttft_ms, r.cached); }

}  // namespace

std::string prefix_table_header(const PrefixPlan& plan) {
  std::string h = "| model | bits | system tokens | cold | warm, device | warm, host | disk, after a restart |";
  std::string rule = "|---|---|---|---|---|---|---|";
  for (int t = 1; t <= plan.turns; ++t) {
    h += fmt::format(" turn {} |", t);
    rule += "---|";
  }
  return h + "\n" + rule + "\n";
}

std::string bench_prefix(const std::string& name, const Json& config, int bits, const Settings& settings,
                         const PrefixPlan& plan) {
  // The built-in model runs with its own weights; a shape with random ones.
  const bool demo = name == kDemoShape;
  const model::SyntheticCheckpoint ck =
      demo ? model::SyntheticCheckpoint{} : model::make_synthetic_checkpoint(config, {.bits = bits});
  auto load = [&] {
    return demo ? model::load_model(model_path(Settings{}, nullptr), load_options(settings, ""))
                : model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), load_options(settings, ""));
  };
  const int64_t ctx = plan.system + plan.turns * (plan.user + plan.answer) + 1;
  // The disk tier's runs keep their files in a directory of their own, removed after.
  const std::filesystem::path state_dir =
      std::filesystem::temp_directory_path() / fmt::format("strata-bench-state-{}", ::getpid());
  auto engine_with = [&](int64_t device_entries, bool disk = false) {
    runtime::EngineOptions o = engine_options(settings, ctx);
    o.prefix_cache_lock_host = true;  // as the server does
    o.prefix_cache = device_entries;
    o.prefix_cache_host_bytes = size_t{2} << 30;  // room for every prefix the host runs leave (page-locked at start)
    // KV blocks for four contexts: the server sizes its pool from half the GPU's memory, so that
    // cached prefixes and a running request seldom compete for blocks (with blocks for one context
    // only, a turn may wait while whole prefixes are copied out to make room).
    o.kv_blocks = 4 * runtime::StatePool::blocks_for(ctx, o.kv_block_tokens);
    o.prefix_cache_disk_bytes = disk ? uint64_t{64} << 30 : 0;
    o.state_dir = disk ? state_dir : std::filesystem::path();
    return std::make_unique<runtime::Engine>(load(), o);
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
  const std::vector<int64_t> user_start = {plan.system};  // the user's message after the system's
  const std::vector<int64_t> none;
  (void)run_one(*engine, tokens_of(99, 64, vocab), none, 2);  // workspaces, cuBLAS, the first graphs
  const Run cold = run_one(*engine, with(system, 2), user_start, plan.answer);
  const Run warm = run_one(*engine, with(system, 3), user_start, plan.answer);
  // The host tier: one device entry, pushed out by another prompt's.
  engine = engine_with(1);
  (void)run_one(*engine, tokens_of(99, 64, vocab), none, 2);
  (void)run_one(*engine, with(system, 2), user_start, 2);
  const int64_t other = std::min<int64_t>(2 * 512, plan.system);  // (it must fit the context too)
  (void)run_one(*engine, with(tokens_of(5, other, vocab), 6), {other}, 2);
  const Run host = run_one(*engine, with(system, 3), user_start, plan.answer);
  // The disk tier after a restart: the prompt's longest prefix is written as it runs; a new engine
  // finds the file, out of the page cache too (so that it is read from the disk itself).
  std::filesystem::remove_all(state_dir);
  engine = engine_with(64, true);
  (void)run_one(*engine, with(system, 2), user_start, 2);
  engine.reset();  // (its writes land before it goes)
  engine = engine_with(64, true);
  drop_from_page_cache(state_dir);
  (void)run_one(*engine, tokens_of(99, 64, vocab), none, 2);
  const Run disk = run_one(*engine, with(system, 3), user_start, plan.answer);
  const runtime::PrefixCacheStats read = engine->stats().prefix;
  std::fprintf(stderr, "bench: after the restart, %.0f MB read from disk in %.0f ms (checksum included)\n",
               static_cast<double>(read.disk_read_bytes) / 1e6, read.disk_read_seconds * 1e3);
  engine.reset();
  std::filesystem::remove_all(state_dir);
  // The session, on an engine that has seen nothing: each turn a user message and the answer, and
  // between turns the next one prefilled ahead as the server does.
  engine = engine_with(64);
  (void)run_one(*engine, tokens_of(99, 64, vocab), none, 2);
  std::vector<int32_t> history = system;
  std::vector<int64_t> starts;
  std::string turns;
  for (int t = 1; t <= plan.turns; ++t) {
    starts.push_back(static_cast<int64_t>(history.size()));
    history = with(std::move(history), 10 + t);
    const Run r = run_one(*engine, history, starts, plan.answer);
    const runtime::PrefixCacheStats p = engine->stats().prefix;
    std::fprintf(stderr, "bench: turn %d: %.0f ms, %lld cached (%s); so far %llu device and %llu host evictions\n", t,
                 r.ttft_ms, static_cast<long long>(r.cached), runtime::cache_tier_name(r.tier),
                 static_cast<unsigned long long>(p.evictions[1]), static_cast<unsigned long long>(p.evictions[2]));
    starts.push_back(static_cast<int64_t>(history.size()));
    history.insert(history.end(), r.answer.begin(), r.answer.end());
    if (t < plan.turns) prefill_ahead(*engine, history, starts);
    turns += " " + cell(r) + " |";
  }
  return fmt::format("| {} | {} | {} | {} | {} | {}{} | {}{} |{}\n", name,
                     demo ? engine->model().info().quantization : std::to_string(bits), plan.system, cell(cold),
                     cell(warm), cell(host), host.tier == runtime::CacheTier::kHost ? "" : " (not from host)",
                     cell(disk), disk.tier == runtime::CacheTier::kDisk ? "" : " (not from disk)", turns);
}

std::string prefix_notes(const PrefixPlan& plan) {
  return fmt::format(
      "\nEach cell: time to first token in ms (prompt tokens served from the prefix cache). A system prompt of "
      "{} token ids and a {}-token user turn: cold on a fresh engine; warm, device: another user turn after "
      "it; warm, host: the same after another prompt pushed the prefix out of an engine's one device "
      "entry into host memory; disk, after a restart: the same on a new engine over the state directory a first one wrote the prefix to, its files dropped from the page cache. Prompts are cut where each message begins (as the server cuts chat prompts) and every 512 tokens from there; the engines have KV blocks for four contexts. Turns: a session on a fresh engine, each turn adding a {}-token user turn "
      "to the history with the {} tokens the last turn answered (greedy); between turns the next one is "
      "prefilled ahead (untimed), as the server does after a chat answer.\n",
      plan.system, plan.user, plan.user, plan.answer);
}

}  // namespace strata::cli
