// strata bench: builds random-weight models of real shapes in memory (no download, no files), runs
// them with the real Engine on the device and prints one markdown table (prefill speed, time to
// first token, decode speed and the share of the memory bandwidth it reaches, memory used), then a
// per-op breakdown of an eager Qwen3.5-9B decode step on CUDA. Numbers are printed, never judged.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>

#include "backend/graph.h"
#include "backend/memory.h"
#include "cli/bench_shapes.h"
#include "cli/bench_traffic.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/mmap.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/engine.h"

namespace strata::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kPrefillChunk = 4096;
constexpr const char* kBreakdownShape = "qwen3.5-9b";
constexpr int64_t kBreakdownSteps = 8;  // timed decode steps (after as many untimed ones)
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Settings {
  std::vector<std::string> shapes;
  std::vector<int> bits;
  Device device = Device::kCpu;
  std::vector<int64_t> prompts;   // prefill lengths
  std::vector<int64_t> contexts;  // prompt lengths before a decode run
  int64_t decode = 0;             // tokens per decode run
  int64_t layers = 0;             // 0: the shape's own
  bool breakdown = false;
};

Settings resolve(const BenchArgs& args) {
  Settings s;
  s.shapes = args.shapes.empty() ? bench_shape_names() : args.shapes;
  for (const std::string& name : s.shapes)
    (void)bench_shape_config(name);  // unknown names fail before any work
  s.bits = args.bits.empty() ? std::vector<int>{4, 8} : args.bits;
  s.device = backend::parse_device(args.device);
  s.prompts = !args.prompts.empty() ? args.prompts
              : args.quick          ? std::vector<int64_t>{16, 64}
                                    : std::vector<int64_t>{512, 4096};
  s.contexts = !args.contexts.empty() ? args.contexts
               : args.quick           ? std::vector<int64_t>{16, 64}
                                      : std::vector<int64_t>{512, 16384};
  s.decode = args.decode > 0 ? args.decode : args.quick ? 8 : 128;
  s.layers = args.layers;
  s.breakdown = args.breakdown && s.device == Device::kCuda;
  for (int64_t n : s.prompts)
    check(n > 0, ErrorKind::kInvalidInput, "--prompt lengths must be positive");
  for (int64_t n : s.contexts)
    check(n > 0, ErrorKind::kInvalidInput, "--contexts lengths must be positive");
  check(s.decode >= 2, ErrorKind::kInvalidInput,
        "--decode must be at least 2 (a rate needs two tokens)");
  for (int b : s.bits)
    check(b == 4 || b == 8, ErrorKind::kInvalidInput, "--bits must be 4 or 8, got {}", b);
  return s;
}

std::string trim_copy(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "512", "4K", "16K".
std::string length_label(int64_t n) {
  return n >= 1024 && n % 1024 == 0 ? fmt::format("{}K", n / 1024) : fmt::format("{}", n);
}

// Three significant digits without exponents for the magnitudes in the table.
std::string num(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v); }

// Device memory in use (total − free, so the CUDA context and other processes count too); nullopt
// where the device does not report it (the CPU).
std::optional<double> used_gib(Device device) {
  const backend::DeviceInfo info = backend::device_info(device);
  if (info.total_bytes == 0) return std::nullopt;
  return static_cast<double>(info.total_bytes - info.free_bytes) / kGiB;
}

// The CPU's model name and thread count (the device name says only "cpu").
std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      name = trim_copy(line.substr(line.find(':') + 1));
      break;
    }
  return fmt::format("{}, {} threads", name, omp_get_max_threads());
}

// Sets an environment variable for as long as it lives.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~EnvOverride() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// One generate() call with the arrival time of every token.
struct Timed {
  runtime::GenerationResult result;
  double wall = 0;                  // the whole call, per-request state setup included
  std::vector<double> token_times;  // seconds since the call began, one per token
};

// Greedy requests over deterministic token ids, with no stop tokens: every run generates exactly
// max_tokens. `on_token(k)` runs after token k (1-based) is timed.
Timed generate(runtime::Engine& engine, int64_t prompt, int64_t max_tokens,
               const std::function<void(size_t)>& on_token = {}) {
  const int64_t vocab = engine.model().config().vocab_size;
  runtime::GenerationRequest request;
  request.prompt.resize(static_cast<size_t>(prompt));
  for (int64_t i = 0; i < prompt; ++i)
    request.prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 1) % vocab);
  request.max_tokens = max_tokens;
  request.sampling.temperature = 0.0f;
  Timed t;
  const auto t0 = Clock::now();
  t.result = engine.generate(request, [&](int32_t) {
    t.token_times.push_back(seconds_between(t0, Clock::now()));
    if (on_token) on_token(t.token_times.size());
    return true;
  });
  t.wall = seconds_between(t0, Clock::now());
  check(static_cast<int64_t>(t.result.tokens.size()) == max_tokens, ErrorKind::kInternal,
        "bench: asked for {} tokens, got {}", max_tokens, t.result.tokens.size());
  return t;
}

// Steady decode: the tokens after the third over the time since the third arrived. (The first comes
// from the prefill; the steps making the second and third run eagerly and capture the CUDA graph
// that later steps of the same context bucket replay.) Shorter runs skip fewer.
struct DecodeRate {
  double tok_s = 0;
  double mean_context = 0;  // tokens attended per measured step, averaged
};
DecodeRate steady_rate(const Timed& t, int64_t prompt) {
  const size_t n = t.token_times.size();
  const size_t skip = std::min<size_t>(3, n - 1);
  DecodeRate r;
  r.tok_s = static_cast<double>(n - skip) / (t.token_times[n - 1] - t.token_times[skip - 1]);
  // The step making token m (1-based) feeds token m − 1 at position prompt + m − 2: it attends over
  // prompt + m − 1 tokens. Measured: m = skip + 1 … n.
  r.mean_context = static_cast<double>(prompt) + static_cast<double>(skip + 1 + n) / 2.0 - 1.0;
  return r;
}

struct Row {
  std::string model;
  int bits = 0;
  std::string error;  // set when the run failed
  double build_s = 0, load_s = 0, weights_gib = 0, checkpoint_gb = 0;
  int64_t parameters = 0;
  std::vector<double> prefill_tok_s;  // per prompt length
  double ttft_ms = 0, setup_ms = 0;
  std::vector<double> decode_tok_s;         // per context: steady
  std::vector<double> decode_engine_tok_s;  // per context: (tokens − 1) / decode_seconds
  std::vector<double> gb_per_token;         // per context
  std::optional<double> mem_load_gib, mem_peak_gib;
  std::string traffic_warning;
};

struct OpTime {
  std::string op;
  double ms = 0;  // per step
};
struct Breakdown {
  std::string model;
  std::string error;  // set when it could not be measured
  int64_t prompt = 0;
  std::vector<OpTime> ops;
  double eager_ms = 0, eager_timed_ms = 0, graph_ms = 0;
};

// Per-op device times of kBreakdownSteps eager decode steps after `prompt` tokens, on an instance
// built without CUDA graphs (STRATA_CUDA_GRAPHS is read when the model is made), so every op is
// dispatched, and timed, on its own.
Breakdown run_breakdown(const model::SyntheticCheckpoint& ck, const Row& row, Device device,
                        int64_t prompt) {
  std::unique_ptr<model::Model> m;
  {
    EnvOverride no_graphs("STRATA_CUDA_GRAPHS", "0");
    model::LoadOptions options;
    options.device = device;
    m = model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), options);
  }
  const int64_t tokens = 1 + 2 * kBreakdownSteps;
  runtime::Engine engine(std::move(m), runtime::EngineOptions{.context_size = prompt + tokens + 1,
                                                              .prefill_chunk = kPrefillChunk});
  (void)generate(engine, std::min<int64_t>(prompt, kPrefillChunk), 4);  // workspaces, cuBLAS
  const Timed t = generate(engine, prompt, tokens, [&](size_t k) {
    if (k == static_cast<size_t>(1 + kBreakdownSteps)) {
      backend::reset_op_timers(device);
      backend::enable_op_timers(device, true);
    } else if (k == static_cast<size_t>(tokens)) {
      backend::enable_op_timers(device, false);
    }
  });
  Breakdown b;
  b.model = fmt::format("{} {}-bit", row.model, row.bits);
  b.prompt = prompt;
  for (const auto& [op, ms] : backend::op_timer_results(device))
    b.ops.push_back({op, ms / static_cast<double>(kBreakdownSteps)});
  backend::reset_op_timers(device);
  std::sort(b.ops.begin(), b.ops.end(),
            [](const OpTime& x, const OpTime& y) { return x.ms > y.ms; });
  const auto& tt = t.token_times;  // token k arrived at tt[k − 1]
  // Untimed: the steps making tokens 4 … 1 + kBreakdownSteps; timed: the kBreakdownSteps after.
  b.eager_ms = (tt[kBreakdownSteps] - tt[2]) * 1e3 / static_cast<double>(kBreakdownSteps - 2);
  b.eager_timed_ms =
      (tt[2 * kBreakdownSteps] - tt[kBreakdownSteps]) * 1e3 / static_cast<double>(kBreakdownSteps);
  if (!row.decode_tok_s.empty() && row.decode_tok_s.front() > 0)
    b.graph_ms = 1e3 / row.decode_tok_s.front();
  return b;
}

// Builds, loads and measures one shape at one width (see the notes printed under the table).
Row bench_one(const std::string& shape, int bits, const Settings& s,
              std::optional<Breakdown>& breakdown) {
  Row row;
  row.bits = bits;
  Json config = bench_shape_config(shape);
  const int64_t all_layers = (config.contains("text_config") ? config["text_config"] : config)
                                 .at("num_hidden_layers")
                                 .get<int64_t>();
  row.model = shape;
  if (s.layers > 0 && s.layers < all_layers) {
    config = with_layers(std::move(config), s.layers);
    row.model = fmt::format("{} ({} of {} layers)", shape, s.layers, all_layers);
  }
  const std::string tag = fmt::format("{} {}-bit", row.model, bits);

  auto t0 = Clock::now();
  const model::SyntheticCheckpoint ck = model::make_synthetic_checkpoint(config, {.bits = bits});
  row.build_s = seconds_between(t0, Clock::now());
  row.checkpoint_gb = static_cast<double>(ck.nbytes) / 1e9;
  std::fprintf(stderr, "bench: %s: built %.2f GB of tensors in %.1f s\n", tag.c_str(),
               row.checkpoint_gb, row.build_s);

  model::LoadOptions options;
  options.device = s.device;
  t0 = Clock::now();
  std::unique_ptr<model::Model> m =
      model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), options);
  backend::synchronize(s.device);
  row.load_s = seconds_between(t0, Clock::now());
  const model::ModelInfo info = m->info();
  row.weights_gib = static_cast<double>(info.weight_bytes) / kGiB;
  row.parameters = info.parameters;
  row.mem_load_gib = used_gib(s.device);
  std::fprintf(stderr, "bench: %s: loaded in %.1f s (%.2f GiB of weights)\n", tag.c_str(),
               row.load_s, row.weights_gib);

  const DecodeTraffic traffic = decode_traffic(m->config(), ck.tensors);
  if (std::abs(traffic.weights_total - static_cast<double>(info.weight_bytes)) >
      0.01 * traffic.weights_total)
    row.traffic_warning =
        fmt::format("the traffic model counts {:.3f} GB of weights, the loader placed {:.3f} GB",
                    traffic.weights_total / 1e9, static_cast<double>(info.weight_bytes) / 1e9);

  const int64_t longest_context = *std::max_element(s.contexts.begin(), s.contexts.end());
  const int64_t longest_prompt =
      std::max(*std::max_element(s.prompts.begin(), s.prompts.end()), longest_context);
  std::optional<runtime::Engine> engine;
  engine.emplace(std::move(m),
                 runtime::EngineOptions{
                     .context_size = std::max(longest_prompt, longest_context + s.decode) + 1,
                     .prefill_chunk = kPrefillChunk});
  // The peak: sampled when a request's first token arrives, while its state and every scratch
  // buffer the prefill grew are still allocated.
  auto sample_peak = [&](size_t k) {
    if (k != 1) return;
    const std::optional<double> used = used_gib(s.device);
    if (used) row.mem_peak_gib = std::max(row.mem_peak_gib.value_or(0.0), *used);
  };

  // Untimed: sizes scratch and workspaces for the largest prefill chunk, initialises cuBLAS and
  // captures a first decode graph.
  (void)generate(*engine, std::min(longest_prompt, kPrefillChunk), 4, sample_peak);

  for (size_t i = 0; i < s.prompts.size(); ++i) {
    std::fprintf(stderr, "bench: %s: prefill %lld\n", tag.c_str(),
                 static_cast<long long>(s.prompts[i]));
    const Timed t = generate(*engine, s.prompts[i], 1, sample_peak);
    row.prefill_tok_s.push_back(static_cast<double>(s.prompts[i]) / t.result.prefill_seconds);
    if (i == 0) {
      row.ttft_ms = t.wall * 1e3;
      row.setup_ms = (t.wall - t.result.prefill_seconds - t.result.decode_seconds) * 1e3;
    }
  }
  for (int64_t context : s.contexts) {
    std::fprintf(stderr, "bench: %s: decode %lld after %lld\n", tag.c_str(),
                 static_cast<long long>(s.decode), static_cast<long long>(context));
    const Timed t = generate(*engine, context, s.decode, sample_peak);
    const DecodeRate r = steady_rate(t, context);
    row.decode_tok_s.push_back(r.tok_s);
    row.decode_engine_tok_s.push_back(static_cast<double>(s.decode - 1) / t.result.decode_seconds);
    row.gb_per_token.push_back(traffic.at_context(r.mean_context) / 1e9);
  }

  if (s.breakdown && shape == kBreakdownShape && bits == s.bits.front()) {
    engine.reset();  // the measured instance goes first: two would not fit some GPUs
    std::fprintf(stderr, "bench: %s: per-op breakdown of eager decode steps\n", tag.c_str());
    try {
      breakdown = run_breakdown(ck, row, s.device, s.contexts.front());
    } catch (const std::exception& e) {
      // The row stands; the breakdown reports its own failure.
      breakdown.emplace();
      breakdown->model = tag;
      breakdown->error = e.what();
    }
  }
  return row;
}

struct Document {
  std::string text;
  std::string output;  // file also written (rewritten as rows arrive), "" for none
  void add(const std::string& s) {
    text += s;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
    if (!output.empty()) write_file_atomic(output, text);
  }
};

std::string table_header(const Settings& s) {
  std::string h = "| model | bits | weights GiB | load s |";
  for (int64_t p : s.prompts) h += fmt::format(" prefill {} tok/s |", length_label(p));
  h += fmt::format(" TTFT {} ms |", length_label(s.prompts.front()));
  for (int64_t c : s.contexts) {
    const std::string l = length_label(c);
    h += fmt::format(" decode @{0} tok/s | GB read/token @{0} | % peak BW @{0} |", l);
  }
  h += " GPU mem GiB (load / peak) |\n|";
  const size_t columns = 6 + s.prompts.size() + 3 * s.contexts.size();
  for (size_t i = 0; i < columns; ++i) h += "---|";
  return h + "\n";
}

std::string table_row(const Row& r, const Settings& s, double peak_bw) {
  std::string line = fmt::format("| {} | {} |", r.model, r.bits);
  if (!r.error.empty()) {
    line += fmt::format(" error: {} |", r.error);
    for (size_t i = 1; i < 4 + s.prompts.size() + 3 * s.contexts.size(); ++i) line += " — |";
    return line + "\n";
  }
  line += fmt::format(" {} | {} |", num(r.weights_gib), num(r.load_s));
  for (double v : r.prefill_tok_s) line += fmt::format(" {} |", num(v));
  line += fmt::format(" {} |", num(r.ttft_ms));
  for (size_t i = 0; i < s.contexts.size(); ++i) {
    const double bytes_per_s = r.gb_per_token[i] * 1e9 * r.decode_tok_s[i];
    line +=
        fmt::format(" {} | {} | {} |", num(r.decode_tok_s[i]), num(r.gb_per_token[i]),
                    peak_bw > 0 ? fmt::format("{:.0f}%", 100.0 * bytes_per_s / peak_bw) : "n/a");
  }
  line += r.mem_load_gib ? fmt::format(" {:.1f} / {:.1f} |", *r.mem_load_gib,
                                       r.mem_peak_gib.value_or(*r.mem_load_gib))
                         : " n/a |";
  return line + "\n";
}

std::string notes(const Settings& s, const std::vector<Row>& rows) {
  const int64_t n = s.decode;
  std::string out = fmt::format(
      "\nSynthetic random-weight checkpoints of the real shapes (MLX affine codes, group 64, bf16 "
      "scales), built in "
      "memory and loaded on the device; greedy decoding with no stop tokens; prefill in chunks of "
      "{} tokens; one "
      "untimed warm-up request first.\n"
      "- prefill tok/s: prompt tokens / the Engine's prefill_seconds (a max_tokens=1 request).\n"
      "- TTFT: wall time of generate() for the first prompt length with max_tokens=1: per-request "
      "state setup "
      "(a KV cache for the whole context this run needs), the prefill and the first token's pick.\n"
      "- decode @C tok/s: after a C-token prompt, N = {} greedy tokens; steady state: tokens 4..{} "
      "over the time from "
      "token 3 to token {} (token 1 comes from the prefill; the steps making tokens 2 and 3 run "
      "eagerly and capture "
      "the CUDA graph the rest replay). The whole run, (N-1)/decode_seconds, is listed below.\n"
      "- GB read/token: weights as placed on the device (codes, F32 scales and biases, F32 norms) "
      "that a decode step "
      "reads: all of them except the embedding table, of which one row (tied: the whole table, as "
      "the lm_head); for "
      "MoE the router, the shared expert and top-k of the routed experts; plus the F32 KV cache "
      "over the context "
      "(averaged over the measured steps), the new token's K and V, and the recurrent state read "
      "and written. "
      "Activations and logits are left out.\n"
      "- % peak BW: GB read/token x decode tok/s over the device's peak memory bandwidth (memory "
      "clock x bus "
      "width).\n"
      "- GPU mem: total - free on the device (the CUDA context and other processes count too) "
      "after loading, and "
      "the largest value seen when a request's first token arrived (its state and the grown "
      "scratch allocated): "
      "an approximation of the peak.\n",
      kPrefillChunk, n, n, n);
  out += "\nPer model:\n";
  bool first = true;
  for (const Row& r : rows) {
    if (!r.error.empty()) continue;
    first = false;
    std::string decode;
    for (size_t i = 0; i < s.contexts.size(); ++i)
      decode += fmt::format("{}{} @{}", i ? ", " : "", num(r.decode_engine_tok_s[i]),
                            length_label(s.contexts[i]));
    const double params = static_cast<double>(r.parameters);
    out += fmt::format(
        "- {} {}-bit: {} parameters; checkpoint of {} GB built in {:.1f} s; request setup "
        "{} ms of the TTFT; whole-run decode tok/s {}.{}\n",
        r.model, r.bits, params >= 1e9 ? num(params / 1e9) + " B" : num(params / 1e6) + " M",
        num(r.checkpoint_gb), r.build_s, num(std::max(r.setup_ms, 0.0)), decode,
        r.traffic_warning.empty() ? "" : " Warning: " + r.traffic_warning + ".");
  }
  if (first) out += "- none measured.\n";
  return out;
}

std::string breakdown_table(const Breakdown& b) {
  if (!b.error.empty())
    return fmt::format("\nThe per-op breakdown of {} failed: {}\n", b.model, b.error);
  double total = 0;
  for (const OpTime& o : b.ops) total += o.ms;
  std::string out = fmt::format(
      "\n## Decode step by op: {}, eager (STRATA_CUDA_GRAPHS=0), after a {}-token prompt, mean of "
      "{} steps\n\n"
      "| op | ms / step | % of op time |\n|---|---|---|\n",
      b.model, b.prompt, kBreakdownSteps);
  for (const OpTime& o : b.ops)
    out += fmt::format("| {} | {:.3f} | {:.1f}% |\n", o.op, o.ms,
                       total > 0 ? 100.0 * o.ms / total : 0.0);
  out += fmt::format("| all ops | {:.3f} | 100% |\n\n", total);
  out += fmt::format(
      "Device time per op from CUDA events around each op (all calls of an op name summed; an op's "
      "events include "
      "its launch gaps). Step wall time: eager {:.3f} ms without timers, {:.3f} ms with them; "
      "replayed as a CUDA "
      "graph {} ms (decode @{} above).\n",
      b.eager_ms, b.eager_timed_ms, b.graph_ms > 0 ? fmt::format("{:.3f}", b.graph_ms) : "n/a",
      length_label(b.prompt));
  return out;
}

}  // namespace

int run_bench(const BenchArgs& args) {
  const Settings s = resolve(args);
  const backend::DeviceInfo device = backend::device_info(s.device);
  Document doc;
  doc.output = args.output;
  std::string head = fmt::format(
      "# strata bench\n\ncommand: `{}`\n\ndevice: {} ({})", args.command_line,
      s.device == Device::kCpu ? cpu_description() : device.name, backend::device_label(s.device));
  if (device.total_bytes > 0)
    head += fmt::format(
        ", {:.1f} GiB, peak memory bandwidth {:.0f} GB/s, {:.1f} GiB in use before loading",
        static_cast<double>(device.total_bytes) / kGiB, device.peak_bandwidth / 1e9,
        static_cast<double>(device.total_bytes - device.free_bytes) / kGiB);
  doc.add(head + "\n\n" + table_header(s));

  std::vector<Row> rows;
  std::optional<Breakdown> breakdown;
  bool failed = false;
  for (const std::string& shape : s.shapes) {
    for (int bits : s.bits) {
      Row row;
      try {
        row = bench_one(shape, bits, s, breakdown);
      } catch (const std::exception& e) {
        // Report it in the table and go on: one shape that does not fit must not hide the others.
        row = Row{};
        row.model = shape;
        row.bits = bits;
        row.error = e.what();
        // One table cell.
        std::replace(row.error.begin(), row.error.end(), '|', '/');
        std::replace(row.error.begin(), row.error.end(), '\n', ' ');
        failed = true;
        std::fprintf(stderr, "bench: %s %d-bit failed: %s\n", shape.c_str(), bits, e.what());
      }
      rows.push_back(row);
      doc.add(table_row(row, s, device.peak_bandwidth));
    }
  }
  doc.add(notes(s, rows));
  if (breakdown) doc.add(breakdown_table(*breakdown));
  return failed ? 1 : 0;
}

}  // namespace strata::cli
