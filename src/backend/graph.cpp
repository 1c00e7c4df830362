// StepGraph and op timers: CUDA graphs and events where the CUDA backend is built.
#include "backend/graph.h"

#include "core/error.h"
#ifdef STRATA_HAVE_CUDA
#include "backend/cuda/cuda_ops.h"
#endif

namespace strata::backend {

#ifdef STRATA_HAVE_CUDA
struct StepGraph::Impl {
  cuda::Graph graph;
};
bool graphs_supported(Device device) { return device == Device::kCuda; }
void begin_capture(Device device) {
  check(device == Device::kCuda, ErrorKind::kInternal, "graph capture needs a CUDA device");
  cuda::begin_capture();
}
StepGraph end_capture(Device device) {
  check(device == Device::kCuda, ErrorKind::kInternal, "graph capture needs a CUDA device");
  StepGraph g;
  g.impl_->graph = cuda::end_capture();
  return g;
}
void StepGraph::launch() const { impl_->graph.launch(); }
uint64_t device_memory_generation(Device device) {
  return device == Device::kCuda ? cuda::workspace_generation() : 0;
}
void enable_op_timers(Device device, bool on) {
  if (device == Device::kCuda) cuda::timer_enable(on);
}
std::vector<std::pair<std::string, double>> op_timer_results(Device device) {
  if (device == Device::kCuda) return cuda::timer_results();
  return {};
}
void reset_op_timers(Device device) {
  if (device == Device::kCuda) cuda::timer_reset();
}
#else
struct StepGraph::Impl {};
bool graphs_supported(Device) { return false; }
void begin_capture(Device) {
  throw Error(ErrorKind::kInternal, "this build has no graph-capable device");
}
StepGraph end_capture(Device) {
  throw Error(ErrorKind::kInternal, "this build has no graph-capable device");
}
void StepGraph::launch() const {
  throw Error(ErrorKind::kInternal, "this build has no graph-capable device");
}
uint64_t device_memory_generation(Device) { return 0; }
void enable_op_timers(Device, bool) {}
std::vector<std::pair<std::string, double>> op_timer_results(Device) { return {}; }
void reset_op_timers(Device) {}
#endif

StepGraph::StepGraph() : impl_(std::make_unique<Impl>()) {}
StepGraph::~StepGraph() = default;
StepGraph::StepGraph(StepGraph&&) noexcept = default;
StepGraph& StepGraph::operator=(StepGraph&&) noexcept = default;

}  // namespace strata::backend
