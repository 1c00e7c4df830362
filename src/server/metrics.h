// Server counters, and their Prometheus text exposition (format 0.0.4) for GET /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "server/generation_queue.h"
#include "server/http.h"

namespace strata::server {

class Metrics {
 public:
  void count_request(const std::string& route, int status);
  // One generation: from queued to its first token, and the engine time it took.
  void observe_generation(double seconds_to_first_token, double engine_seconds);
  // Think control: what a finished chat generation's controller did; a router activation.
  void count_think_control(bool budget_closed, bool loop_escaped, bool answer_loop_stopped);
  void count_router_activation();

  struct Snapshot {
    std::map<std::pair<std::string, int>, uint64_t> requests;  // (route, status) -> count
    uint64_t generations = 0;
    double ttft_seconds_sum = 0;
    double generation_seconds_sum = 0;
    uint64_t think_budget_closes = 0;
    uint64_t think_loop_escapes = 0;
    uint64_t answer_loop_stops = 0;
    uint64_t think_router_activations = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  Snapshot data_;
};

struct ProcessMemory {
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
};
ProcessMemory process_memory();  // from /proc/self/statm; zeros where unavailable

// The exposition text: request counters, queue gauges and token totals, latencies, connections,
// memory.
std::string prometheus_text(const Metrics::Snapshot& metrics, const QueueStats& queue,
                            const HttpServer::Stats& http, const std::string& model_id,
                            double uptime_seconds, uint64_t weight_bytes);

}  // namespace strata::server
