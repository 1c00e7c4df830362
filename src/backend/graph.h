// Replaying recorded work: a StepGraph holds the ops issued between begin_capture() and
// end_capture() on a device (a CUDA graph), so one launch replays a whole decode step. Also the
// per-op timers that profile a step. Devices without graphs (the CPU) report so and run eagerly.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace strata::backend {

bool graphs_supported(Device device);

class StepGraph {
 public:
  StepGraph();
  ~StepGraph();
  StepGraph(StepGraph&&) noexcept;
  StepGraph& operator=(StepGraph&&) noexcept;
  void launch() const;

 private:
  friend StepGraph end_capture(Device device);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Ops issued on `device` between these two calls are recorded, not run.
void begin_capture(Device device);
StepGraph end_capture(Device device);

// Changes whenever device scratch memory that graphs may have recorded is reallocated.
uint64_t device_memory_generation(Device device);

// Per-op timing on the device: while enabled, each op dispatched there is timed (ms per op name).
void enable_op_timers(Device device, bool on);
std::vector<std::pair<std::string, double>> op_timer_results(Device device);  // synchronizes
void reset_op_timers(Device device);

}  // namespace strata::backend
