// strata bench --concurrency: many requests at once on one engine (--parallel of them), a table
// per model of aggregate and per-sequence decode speed, time to first token and bytes moved per
// step against the device's peak bandwidth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/settings.h"

namespace strata::cli {

struct ConcurrencyPlan {
  std::vector<int64_t> levels;  // concurrent requests per run, e.g. 1, 4, 16, 64
  int64_t prompt = 512;         // tokens per request's prompt
  int64_t tokens = 128;         // tokens each request generates
  // On CUDA: per-op device times of the largest run's decode steps, run again without graphs.
  bool breakdown = false;
};

// The markdown rows (after concurrency_table_header()) of one model: config (random weights of
// `bits`) loaded with `settings`, one run per level. A level that fails is a row with its error.
// With plan.breakdown on CUDA, appends to *breakdown a table of the largest run's step by op.
std::string concurrency_table_header();
std::string bench_concurrency(const std::string& name, const Json& config, int bits,
                              const Settings& settings, const ConcurrencyPlan& plan,
                              double peak_bandwidth, std::string* breakdown = nullptr);
std::string concurrency_notes(const ConcurrencyPlan& plan);

}  // namespace strata::cli
