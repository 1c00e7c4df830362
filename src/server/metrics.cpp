// Counters under one mutex (requests are few per second; contention is not a concern) and the
// hand-written text format: "# HELP", "# TYPE", then `name{label="value"} number` lines.
#include "server/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>
#include <string_view>
#include <type_traits>
#include <utility>

namespace strata::server {

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++data_.requests[{route, status}];
}

void Metrics::observe_generation(double seconds_to_first_token, double engine_seconds) {
  std::lock_guard lock(mutex_);
  ++data_.generations;
  data_.ttft_seconds_sum += seconds_to_first_token;
  data_.generation_seconds_sum += engine_seconds;
}

void Metrics::count_think_control(bool budget_closed, bool loop_escaped, bool answer_loop_stopped) {
  std::lock_guard lock(mutex_);
  data_.think_budget_closes += budget_closed;
  data_.think_loop_escapes += loop_escaped;
  data_.answer_loop_stops += answer_loop_stopped;
}

void Metrics::count_router_activation() {
  std::lock_guard lock(mutex_);
  ++data_.think_router_activations;
}

Metrics::Snapshot Metrics::snapshot() const {
  std::lock_guard lock(mutex_);
  return data_;
}

ProcessMemory process_memory() {
  ProcessMemory m;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return m;
  unsigned long long pages_total = 0, pages_resident = 0;
  if (std::fscanf(f, "%llu %llu", &pages_total, &pages_resident) == 2) {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    m.virtual_bytes = pages_total * page;
    m.resident_bytes = pages_resident * page;
  }
  std::fclose(f);
  return m;
}

namespace {

std::string label_value(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// A family with one unlabelled sample.
template <typename T>
void single(std::string& out, const char* name, const char* type, const char* help, T value) {
  family(out, name, type, help);
  if constexpr (std::is_floating_point_v<T>) {
    out += fmt::format("{} {:.6f}\n", name, value);
  } else {
    out += fmt::format("{} {}\n", name, value);
  }
}

// One labelled sample: `name{label="value",...} number`.
template <typename T>
void sample(std::string& out, std::string_view name,
            std::initializer_list<std::pair<std::string_view, std::string_view>> labels, T value) {
  std::string text;
  for (const auto& [label, label_text] : labels)
    text += fmt::format("{}{}=\"{}\"", text.empty() ? "" : ",", label, label_value(label_text));
  out += fmt::format("{}{{{}}} {}\n", name, text, value);
}

// A family's samples by one label, in order: `name{label="label_values[i]"} values[i]`.
template <typename T, size_t N>
void series(std::string& out, std::string_view name, std::string_view label,
            const std::string_view (&label_values)[N], const T (&values)[N]) {
  for (size_t i = 0; i < N; ++i) sample(out, name, {{label, label_values[i]}}, values[i]);
}

}  // namespace

std::string prometheus_text(const Metrics::Snapshot& m, const QueueStats& q,
                            const HttpServer::Stats& http, const std::string& model_id,
                            double uptime_seconds, uint64_t weight_bytes) {
  std::string out;
  family(out, "strata_model_info", "gauge", "The served model (always 1).");
  out += fmt::format("strata_model_info{{model=\"{}\"}} 1\n", label_value(model_id));
  family(out, "strata_uptime_seconds", "gauge", "Seconds since the server started.");
  out += fmt::format("strata_uptime_seconds {:.3f}\n", uptime_seconds);

  family(out, "strata_http_requests_total", "counter",
         "HTTP requests answered, by route and status.");
  for (const auto& [key, count] : m.requests)
    out += fmt::format("strata_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n",
                       label_value(key.first), key.second, count);

  single(out, "strata_http_connections", "gauge", "Client connections open.", http.connections);
  family(out, "strata_http_connections_total", "counter",
         "Client connections, by what became of them: accepted, refused at a cap with nothing to "
         "evict, evicted to make room, closed at a deadline.");
  series(out, "strata_http_connections_total", "event",
         {"accepted", "refused", "evicted", "timed_out"},
         {http.accepted, http.refused, http.evicted, http.timed_out});
  single(out, "strata_http_rejected_requests_total", "counter",
         "Requests the HTTP layer refused itself (malformed, too large, too slow, unknown route).",
         http.rejected_requests);

  const runtime::EngineStats& e = q.engine;
  single(out, "strata_requests_waiting", "gauge", "Generations waiting for a sequence slot.", e.waiting);
  single(out, "strata_requests_running", "gauge", "Generations running on the engine (one slot each).", e.running);
  family(out, "strata_sequence_slots", "gauge", "Sequence state slots (--parallel), by use.");
  series(out, "strata_sequence_slots", "state", {"used", "free"},
         {e.slots - e.slots_free, e.slots_free});
  family(out, "strata_kv_blocks", "gauge", "KV cache blocks of the pool (--kv-blocks; 64 tokens each), by use.");
  series(out, "strata_kv_blocks", "state", {"used", "free"},
         {e.kv_blocks - e.kv_blocks_free, e.kv_blocks_free});
  single(out, "strata_requests_swapped", "gauge", "Running generations preempted now (their KV cache in host memory until blocks free up).", e.swapped);
  single(out, "strata_preemptions_total", "counter", "Generations preempted for KV blocks (their KV cache swapped to host memory).", e.preemptions);
  const runtime::PrefixCacheStats& p = e.prefix;
  family(out, "strata_prefix_cache_entries", "gauge", "Prompt prefixes kept for later requests, by tier (disk: files, whatever else holds them).");
  series(out, "strata_prefix_cache_entries", "tier", {"device", "host", "disk"},
         {p.device_entries, p.host_entries, p.disk_entries});
  family(out, "strata_prefix_cache_bytes", "gauge", "Bytes holding cached prompt prefixes, by tier (device: their KV blocks are counted in strata_kv_blocks).");
  series(out, "strata_prefix_cache_bytes", "tier", {"host", "disk"}, {p.host_bytes, p.disk_bytes});
  family(out, "strata_prefix_cache_hits_total", "counter", "Prefix-cache hits, by the tier that served them.");
  family(out, "strata_prefix_cache_evictions_total", "counter", "Cached prefixes that left a tier (moved down, or their file removed), by tier.");
  for (const runtime::CacheTier t : {runtime::CacheTier::kDevice, runtime::CacheTier::kHost, runtime::CacheTier::kDisk}) {
    const auto i = static_cast<size_t>(t);
    sample(out, "strata_prefix_cache_hits_total", {{"tier", runtime::cache_tier_name(t)}},
           p.hits[i]);
    sample(out, "strata_prefix_cache_evictions_total", {{"tier", runtime::cache_tier_name(t)}},
           p.evictions[i]);
  }
  family(out, "strata_prefix_cache_disk_operations_total", "counter", "Prefix-cache files written and read, by outcome.");
  sample(out, "strata_prefix_cache_disk_operations_total", {{"op", "write"}, {"outcome", "ok"}},
         p.disk_writes);
  sample(out, "strata_prefix_cache_disk_operations_total", {{"op", "write"}, {"outcome", "failed"}},
         p.disk_write_failures);
  sample(out, "strata_prefix_cache_disk_operations_total", {{"op", "read"}, {"outcome", "ok"}},
         p.disk_reads);
  sample(out, "strata_prefix_cache_disk_operations_total", {{"op", "read"}, {"outcome", "failed"}},
         p.disk_read_failures);
  family(out, "strata_prefix_cache_disk_seconds_total", "counter", "Time the disk tier's threads spent writing and reading files.");
  series(out, "strata_prefix_cache_disk_seconds_total", "op", {"write", "read"},
         {p.disk_write_seconds, p.disk_read_seconds});
  family(out, "strata_prefix_cache_lookups_total", "counter", "Requests that looked for a cached prompt prefix, by outcome.");
  series(out, "strata_prefix_cache_lookups_total", "outcome", {"hit", "miss"},
         {e.prefix_hits, e.prefix_misses});
  single(out, "strata_prefix_cache_tokens_total", "counter", "Prompt tokens served from cached prefixes instead of being run.", e.cached_tokens);
  single(out, "strata_engine_steps_total", "counter", "Engine steps run (each serves every running generation).", e.steps);
  single(out, "strata_engine_step_tokens_total", "counter", "Tokens the model ran in engine steps (prompt chunks and generated tokens).", e.step_tokens);
  single(out, "strata_engine_decode_forwards_total", "counter", "Model steps that ran decode tokens (each serves a group of generations at once where the device allows).", e.decode_forwards);
  single(out, "strata_engine_decode_tokens_total", "counter", "Decode tokens those model steps ran.", e.decode_tokens);
  single(out, "strata_engine_step_requests_total", "counter", "Generations served by engine steps, summed over steps.", e.step_requests);
  family(out, "strata_generations_total", "counter", "Generations ended, by outcome.");
  series(out, "strata_generations_total", "outcome", {"finished", "cancelled", "failed"},
         {e.finished, e.cancelled, e.failed});

  single(out, "strata_prompt_tokens_total", "counter", "Prompt tokens processed.", e.prompt_tokens);
  single(out, "strata_generation_tokens_total", "counter", "Tokens generated.", e.generated_tokens);
  single(out, "strata_speculative_verify_steps_total", "counter", "Speculative verify steps (a token and its drafts checked in one step).", e.verify_steps);
  single(out, "strata_speculative_draft_tokens_total", "counter", "Draft tokens checked by verify steps.", e.drafted_tokens);
  single(out, "strata_speculative_accepted_tokens_total", "counter", "Draft tokens accepted (the model picked them too).", e.accepted_tokens);
  single(out, "strata_prefill_seconds_total", "counter", "Time from a generation's start to its first token, summed.", e.prefill_seconds);
  single(out, "strata_decode_seconds_total", "counter", "Time from a generation's first token to its end, summed.", e.decode_seconds);

  family(out, "strata_time_to_first_token_seconds", "summary",
         "From request queued to first token (queue wait included).");
  out += fmt::format("strata_time_to_first_token_seconds_sum {:.6f}\n", m.ttft_seconds_sum);
  out += fmt::format("strata_time_to_first_token_seconds_count {}\n", m.generations);
  family(out, "strata_generation_seconds", "summary",
         "Engine time per generation (prompt and tokens).");
  out += fmt::format("strata_generation_seconds_sum {:.6f}\n", m.generation_seconds_sum);
  out += fmt::format("strata_generation_seconds_count {}\n", m.generations);

  single(out, "strata_think_budget_closes_total", "counter", "Thinking blocks closed by strata at the thinking budget.", m.think_budget_closes);
  single(out, "strata_think_loop_escapes_total", "counter", "Loops in thinking escaped with the task's hint.", m.think_loop_escapes);
  single(out, "strata_answer_loop_stops_total", "counter", "Answers stopped because they repeated themselves.", m.answer_loop_stops);
  single(out, "strata_think_router_activations_total", "counter", "Requests whose thinking the retrieval router turned on.", m.think_router_activations);

  const ProcessMemory mem = process_memory();
  single(out, "strata_model_weight_bytes", "gauge", "Bytes of model weights.", weight_bytes);
  single(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", mem.resident_bytes);
  single(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", mem.virtual_bytes);
  return out;
}

}  // namespace strata::server
