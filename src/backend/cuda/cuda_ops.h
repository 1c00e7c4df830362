// CUDA implementations of backend ops (same signatures as backend/ops.h, gdn.h and moe.h, namespace
// cuda) and the device memory they run on. Host code sees only this header; kernels live in the .cu
// files. Every kernel and copy is issued on stream(), so a decode step can be captured as a CUDA
// graph: ops never allocate (they use workspace(), grown on an eager call before any capture), never
// synchronize, and read positions and token ids from device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/gdn.h"
#include "backend/ops.h"
#include "backend/weight.h"
#include "core/tensor.h"

// cudaStream_t without including the CUDA headers in host code.
struct CUstream_st;

namespace strata::backend::cuda {

bool device_available();  // a CUDA device is present and usable
std::string device_name();
size_t device_memory_bytes();           // total global memory
size_t device_free_bytes();             // free global memory now
double device_peak_bandwidth_bytes();   // HBM peak from the memory clock and bus width (bytes/s)
int sm_count();                         // streaming multiprocessors
int max_optin_shared_bytes();           // shared memory a block may opt into (cudaFuncSetAttribute)

// The stream every op runs on (created on first use; non-blocking).
CUstream_st* stream();
void synchronize();  // waits for stream()

// Device memory owned by RAII (cudaMalloc/cudaFree), plus copies to and from the host.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A device tensor with its memory.
struct DeviceTensor {
  DeviceBuffer buffer;
  Tensor view;
};
DeviceTensor upload(const Tensor& host);
void download(const Tensor& device, const Tensor& host);

// Page-locked host memory for small copies that must not wait for the stream (a step's inputs
// going in, a picked token coming out), with an event behind its last copy. host(n) returns the
// memory once that copy has finished, growing it if needed; to_device() and from_device() queue a
// copy and the event; wait() blocks until the event has passed and returns the memory. Copies of
// up to 64 bytes in whole aligned words are one-block kernels, not transfers: to_device() passes
// the bytes as the kernel's parameter (no event: the memory is free again at once), and
// from_device() writes the memory through its mapping.
class PinnedStage {
 public:
  PinnedStage() = default;
  ~PinnedStage();
  PinnedStage(const PinnedStage&) = delete;
  PinnedStage& operator=(const PinnedStage&) = delete;
  void* host(size_t nbytes);
  // With first_word (device memory), the copy's first 4 bytes come from there.
  void to_device(void* device_dst, size_t nbytes, const void* first_word = nullptr);
  void from_device(const void* device_src, size_t nbytes);
  const void* wait();

 private:
  void* host_ = nullptr;
  void* device_alias_ = nullptr;  // host_ as kernels address it (mapped)
  void* event_ = nullptr;  // cudaEvent_t
  size_t bytes_ = 0;
};

// Copies nbytes between any two of host and device memory, in stream order. Copies that end on
// the host wait for the stream.
void copy(const void* src, Device src_device, void* dst, Device dst_device, size_t nbytes);
// copy() without the wait: host memory taking part must stay until the stream has passed it.
void copy_queued(const void* src, Device src_device, void* dst, Device dst_device, size_t nbytes);
// Page-locked host memory (not zeroed), and its release.
void* host_alloc(size_t nbytes);
void host_free(void* p);
void fill_zero(void* dst, size_t nbytes);

// Scratch memory an op may use during one call: `slot` names the user (one per op family), and the
// memory grows on demand. Growing frees the old block, so it must not happen while a graph that
// uses the slot is alive or being captured: callers run each shape eagerly once before capture,
// and workspace_generation() changes whenever any slot grows (graph caches compare it). A grown
// block reads as zeros.
enum class WorkspaceSlot {
  kMatmul,
  kMatmulB,
  kMatmulBPaired,  // x in bf16 in the order gemm_rows.cu pairs codes (gemm_rows_activations)
  kMatmulX,
  kMatmulSlices,  // the staged multi-row matmul's k slices' sums (gemv_tc_staged.cu)
  kFeed0,  // the forms of MatmulFeed slots 0 and 1 (feed.h)
  kFeed1,
  kFeedCounts,  // the gate/up matmul's arrivals per run of a SiLU(gate) ⊙ up feed
  kAttention,
  kDeltaRule,
  kMoeAct,
  kSample,
  kCount
};
void* workspace(WorkspaceSlot slot, size_t bytes);
uint64_t workspace_generation();

// ---- ops (contracts in backend/ops.h, gdn.h and moe.h; tensors already checked there) ----

void embedding(const Weight& table, const Tensor& ids, const Tensor& out);
void matmul(const Tensor& x, const Weight& w, const Tensor& out, const MatmulFeed* feed = nullptr);
int64_t batch_invariant_rows(std::span<const Weight* const> weights);
void matmul_group(const Tensor& x, std::span<const Weight* const> ws, std::span<const Tensor> outs,
                  const MatmulFeed* feed = nullptr, MatmulFeed* glu_feed = nullptr);
void silu_mul_matmul(const Tensor& gate, const Tensor& up, const Weight& w, const Tensor& act,
                     const Tensor& out, const MatmulFeed* feed = nullptr);
void add_bias(const Tensor& x, const Tensor& bias);
void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out,
              MatmulFeed* feed = nullptr);
void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& w, float eps, bool one_plus_w,
                  const Tensor& out, MatmulFeed* feed = nullptr);
void rope(const Tensor& x, const Tensor& positions, const RopeParams& params);
void qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                        const RopeParams& rope_params, const Tensor& positions, const Tensor& q_out,
                        const Tensor& gate_out, const Tensor& k_cache, const Tensor& v_cache,
                        const KvBlocks& blocks);
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
               int64_t kv_bound, float scale, int64_t window, const Tensor& out, const KvBlocks& blocks);
void store_rows(const Tensor& src, const Tensor& positions, const Tensor& dst);
// The _rows ops (ops.h) as one launch where the decode kernels take the rows' shape; false: the
// caller runs the rows one by one.
bool attention_rows(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                    std::span<const KvBlocks> row_blocks, std::span<const int64_t> kv_bounds, float scale,
                    int64_t window, const Tensor& out);
bool qk_norm_rope_store_rows(const Tensor& q, const Tensor& k, const Tensor& v, const QkNorm& norm,
                             const RopeParams& rope_params, const Tensor& positions, const Tensor& q_out,
                             const Tensor& gate_out, const Tensor& k_cache, const Tensor& v_cache,
                             std::span<const KvBlocks> row_blocks);

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void add(const Tensor& a, const Tensor& b);
void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out,
                 MatmulFeed* feed = nullptr);
void split_columns(const Tensor& x, std::span<const Tensor> outs);
void argmax(const Tensor& x, const Tensor& out);
void argmax_rows(std::span<const Tensor> xs, std::span<const Tensor> outs);
void sample_row(const Tensor& x, const RowDraw& draw, const Tensor& out);
void mask_logits(const Tensor& x, const Tensor& mask);
void edit_logits(const Tensor& x, const Tensor& ids, const Tensor& counts, const Tensor& biases,
                 const LogitPenalties& penalties);

void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& window, const Tensor& out);
void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
               const Tensor& beta);
void l2_norm(const Tensor& x, float eps, float scale, const Tensor& out);
void gdn_prepare(const Tensor& qkv, const Tensor& conv_weight, const Tensor& window, const Tensor& a,
                 const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, float l2_eps, float q_scale,
                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta);
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const Tensor& out, DeltaRuleForm form);
void rms_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, float eps, const Tensor& out);
void gdn_core(const GdnCore& core, const Tensor& y, MatmulFeed* feed = nullptr);
// gdn_core_rows (backend/gdn.h) as one launch where the one-token kernel takes the shape; false
// where it does not (the caller then runs the rows one by one).
bool gdn_core_rows(const GdnCore& core, std::span<const Tensor> windows, std::span<const Tensor> states,
                   const Tensor& y);
// gdn_core_positions (backend/gdn.h) as one launch where the one-token kernel takes the shape;
// false where it does not (the caller then runs the positions one by one).
bool gdn_core_positions(const GdnCore& core, std::span<const Tensor> after_windows,
                        std::span<const Tensor> after_states, const Tensor& y);

void topk_softmax(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids, const Tensor& weights,
                  bool shared_last);
// gate0: expert 0's gate (expert_table() checked that every matrix shares its format).
void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Weight& gate0, int64_t E,
                 const Tensor& table, const Tensor& out);
void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate);

// ---- graphs and timing ----

// Stream capture into a CUDA graph and its replay.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch() const;
  bool empty() const { return exec_ == nullptr; }

 private:
  friend void begin_capture();
  friend Graph end_capture();
  void* exec_ = nullptr;  // cudaGraphExec_t
};
void begin_capture();
Graph end_capture();

// Per-op timing with CUDA events (profiling only: while enabled, each op is bracketed by two events;
// nested ops count toward the outer one; nothing is recorded during graph capture).
void timer_enable(bool on);
void timer_begin(const char* label);  // label must outlive the timer (string literal or interned)
void timer_end();
// Accumulated milliseconds per label since the last reset, in first-seen order; synchronizes.
std::vector<std::pair<std::string, double>> timer_results();
void timer_reset();

}  // namespace strata::backend::cuda
