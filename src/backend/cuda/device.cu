// Device discovery, memory, copies, the op stream, workspaces, graph capture and op timers for the
// CUDA backend. Every CUDA call is checked.
#include <cuda_runtime.h>

#include <array>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/row_copy.h"

namespace strata::backend::cuda {

bool device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

namespace {
const cudaDeviceProp& properties() {
  static const cudaDeviceProp prop = [] {
    cudaDeviceProp p{};
    STRATA_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    return p;
  }();
  return prop;
}
}  // namespace

std::string device_name() { return properties().name; }

size_t device_memory_bytes() { return properties().totalGlobalMem; }

size_t device_free_bytes() {
  size_t free_bytes = 0, total = 0;
  STRATA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

int sm_count() { return properties().multiProcessorCount; }

int max_optin_shared_bytes() { return static_cast<int>(properties().sharedMemPerBlockOptin); }

double device_peak_bandwidth_bytes() {
  int clock_khz = 0, bus_bits = 0;
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0));
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
  return 2.0 * clock_khz * 1e3 * bus_bits / 8.0;  // double data rate
}

CUstream_st* stream() {
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  return s;
}

void synchronize() { STRATA_CUDA_CHECK(cudaStreamSynchronize(stream())); }

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  if (bytes > 0) STRATA_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

// ---- small copies as kernels ----
// A copy engine's transfer on the stream costs a few µs of idle GPU on each side, and no kernel
// after it launches early (PDL). The copies of a decode step's boundary (its ids and positions in,
// the previous pick's token, the pick out) are a few words each, so they run as one-block kernels.
// Measured on an H100 (2026-11-27, decode @512 at 4 bits, same call): 9B 444-445 to 448 tok/s,
// 0.8B 1632-1634 to 1659-1664.

namespace {
constexpr int kSmallWords = 16;  // 64 bytes: a step's ids and positions up to 8 tokens
struct SmallWords {
  uint32_t w[kSmallWords];
};

// dst = v's words, the first from *first where given.
__global__ void write_small_kernel(uint32_t* dst, SmallWords v, int words, const uint32_t* first) {
  wait_for_inputs();
  const int i = static_cast<int>(threadIdx.x);
  if (i < words) dst[i] = i == 0 && first != nullptr ? *first : v.w[i];
}

// Whole aligned words, at most kSmallWords of them.
bool small_words(const void* a, const void* b, size_t nbytes) {
  return nbytes <= sizeof(SmallWords) && nbytes % 4 == 0 && reinterpret_cast<uintptr_t>(a) % 4 == 0 &&
         reinterpret_cast<uintptr_t>(b) % 4 == 0;
}

// One row of nbytes, by the row-copy kernel the ops share.
void copy_small(const void* src, void* dst, size_t nbytes) {
  copy_rows(src, nullptr, 1, dst, nullptr, 1, 1, static_cast<int64_t>(nbytes));
}
}  // namespace

void copy(const void* src, Device src_device, void* dst, Device dst_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (src_device == Device::kCuda && dst_device == Device::kCuda && small_words(src, dst, nbytes)) {
    copy_small(src, dst, nbytes);
    return;
  }
  copy_queued(src, src_device, dst, dst_device, nbytes);
  if (dst_device == Device::kCpu) synchronize();
}

void copy_queued(const void* src, Device src_device, void* dst, Device dst_device, size_t nbytes) {
  if (nbytes == 0) return;
  const cudaMemcpyKind kind =
      src_device == Device::kCuda
          ? (dst_device == Device::kCuda ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
          : (dst_device == Device::kCuda ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  STRATA_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, stream()));
}

void* host_alloc(size_t nbytes) {
  void* p = nullptr;
  STRATA_CUDA_CHECK(cudaHostAlloc(&p, nbytes, cudaHostAllocDefault));
  return p;
}

void host_free(void* p) {
  if (p != nullptr) cudaFreeHost(p);  // (at exit the runtime may be gone: nothing to report then)
}

PinnedStage::~PinnedStage() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  if (host_ != nullptr) cudaFreeHost(host_);
}

void* PinnedStage::host(size_t nbytes) {
  if (event_ == nullptr) {
    cudaEvent_t event = nullptr;
    STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    event_ = event;
  } else {
    STRATA_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));  // the last copy is done with it
  }
  if (nbytes > bytes_) {
    if (host_ != nullptr) STRATA_CUDA_CHECK(cudaFreeHost(host_));
    host_ = nullptr;
    // Mapped, so a kernel can write it (from_device).
    STRATA_CUDA_CHECK(cudaHostAlloc(&host_, nbytes, cudaHostAllocMapped));
    STRATA_CUDA_CHECK(cudaHostGetDevicePointer(&device_alias_, host_, 0));
    bytes_ = nbytes;
  }
  return host_;
}

void PinnedStage::to_device(void* device_dst, size_t nbytes, const void* first_word) {
  if (nbytes > bytes_) throw_internal_error("PinnedStage: more bytes than its host memory holds");
  if (small_words(host_, device_dst, nbytes)) {
    // The bytes travel as the kernel's parameter, so the host memory is free again at once.
    SmallWords v{};
    std::memcpy(v.w, host_, nbytes);
    launch(write_small_kernel, 1, 32, 0, static_cast<uint32_t*>(device_dst), v, static_cast<int>(nbytes / 4),
           static_cast<const uint32_t*>(first_word));
    return;
  }
  STRATA_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_, nbytes, cudaMemcpyHostToDevice, stream()));
  STRATA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), stream()));
  if (first_word != nullptr) copy(first_word, Device::kCuda, device_dst, Device::kCuda, 4);
}

void PinnedStage::from_device(const void* device_src, size_t nbytes) {
  if (nbytes > bytes_) throw_internal_error("PinnedStage: more bytes than its host memory holds");
  if (small_words(device_src, host_, nbytes)) {
    copy_small(device_src, device_alias_, nbytes);  // writes the mapped host memory
  } else {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(host_, device_src, nbytes, cudaMemcpyDeviceToHost, stream()));
  }
  STRATA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), stream()));
}

const void* PinnedStage::wait() {
  STRATA_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
  return host_;
}

void fill_zero(void* dst, size_t nbytes) {
  if (nbytes > 0) STRATA_CUDA_CHECK(cudaMemsetAsync(dst, 0, nbytes, stream()));
}

DeviceTensor upload(const Tensor& host) {
  DeviceTensor t{DeviceBuffer(host.nbytes()), host};
  t.view.data = t.buffer.data();
  t.view.device = Device::kCuda;
  copy(host.data, Device::kCpu, t.view.data, Device::kCuda, host.nbytes());
  return t;
}

void download(const Tensor& device, const Tensor& host) {
  copy(device.data, Device::kCuda, host.data, Device::kCpu, device.nbytes());
}

namespace {
std::array<DeviceBuffer, static_cast<size_t>(WorkspaceSlot::kCount)> g_workspaces;
uint64_t g_workspace_generation = 0;
}  // namespace

void* workspace(WorkspaceSlot slot, size_t bytes) {
  DeviceBuffer& b = g_workspaces[static_cast<size_t>(slot)];
  if (b.size() < bytes) {
    // The old block may still be read by queued kernels.
    synchronize();
    b = DeviceBuffer(bytes + bytes / 4);
    fill_zero(b.data(), b.size());
    ++g_workspace_generation;
  }
  return b.data();
}

uint64_t workspace_generation() { return g_workspace_generation; }

// ---- graphs ----

Graph::~Graph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

Graph::Graph(Graph&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void Graph::launch() const {
  STRATA_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream()));
}

void begin_capture() {
  STRATA_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
}

Graph end_capture() {
  cudaGraph_t graph = nullptr;
  STRATA_CUDA_CHECK(cudaStreamEndCapture(stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  STRATA_CUDA_CHECK(status);
  Graph g;
  g.exec_ = exec;
  return g;
}

// ---- op timers ----

namespace {
struct TimerState {
  bool enabled = false;
  std::vector<std::pair<const char*, std::pair<cudaEvent_t, cudaEvent_t>>> records;
  std::vector<cudaEvent_t> pool;
  size_t used = 0;
  int depth = 0;
  cudaEvent_t event() {
    if (used == pool.size()) {
      cudaEvent_t e = nullptr;
      STRATA_CUDA_CHECK(cudaEventCreate(&e));
      pool.push_back(e);
    }
    return pool[used++];
  }
};
TimerState& timers() {
  static TimerState t;
  return t;
}
bool capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(stream(), &status);
  return status != cudaStreamCaptureStatusNone;
}
}  // namespace

void timer_enable(bool on) { timers().enabled = on; }

void timer_begin(const char* label) {
  TimerState& t = timers();
  if (!t.enabled || t.depth++ > 0 || capturing()) return;
  cudaEvent_t start = t.event(), stop = t.event();
  STRATA_CUDA_CHECK(cudaEventRecord(start, stream()));
  t.records.push_back({label, {start, stop}});
}

void timer_end() {
  TimerState& t = timers();
  if (!t.enabled || --t.depth > 0 || capturing() || t.records.empty()) return;
  STRATA_CUDA_CHECK(cudaEventRecord(t.records.back().second.second, stream()));
}

std::vector<std::pair<std::string, double>> timer_results() {
  synchronize();
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [label, events] : timers().records) {
    float ms = 0.0f;
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, events.first, events.second));
    auto it = out.begin();
    while (it != out.end() && it->first != label) ++it;
    if (it == out.end()) {
      out.emplace_back(label, ms);
    } else {
      it->second += ms;
    }
  }
  return out;
}

void timer_reset() {
  timers().records.clear();
  timers().used = 0;
}

}  // namespace strata::backend::cuda
