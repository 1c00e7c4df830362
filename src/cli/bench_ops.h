// Per-op device times for the benches' breakdowns: the op timers' totals (backend/graph.h) by op
// name, and the markdown rows that print them.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata::cli {

struct OpTime {
  std::string op;
  double ms = 0;  // per step (or per run, as the caller divides)
};

// The op timers' totals on `device`, each divided by `divisor`, largest first; resets the timers.
std::vector<OpTime> harvest_op_times(Device device, double divisor);

// Rows of "| op | ms | % |" and a total row.
std::string op_rows(const std::vector<OpTime>& ops);

}  // namespace strata::cli
