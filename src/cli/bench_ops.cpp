#include "cli/bench_ops.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/graph.h"

namespace strata::cli {

std::vector<OpTime> harvest_op_times(Device device, double divisor) {
  std::vector<OpTime> ops;
  for (const auto& [op, ms] : backend::op_timer_results(device)) ops.push_back({op, ms / divisor});
  backend::reset_op_timers(device);
  std::sort(ops.begin(), ops.end(), [](const OpTime& x, const OpTime& y) { return x.ms > y.ms; });
  return ops;
}

std::string op_rows(const std::vector<OpTime>& ops) {
  double total = 0;
  for (const OpTime& o : ops) total += o.ms;
  std::string out;
  for (const OpTime& o : ops)
    out += fmt::format("| {} | {:.3f} | {:.1f}% |\n", o.op, o.ms, total > 0 ? 100.0 * o.ms / total : 0.0);
  out += fmt::format("| all ops | {:.3f} | 100% |\n\n", total);
  return out;
}

}  // namespace strata::cli
