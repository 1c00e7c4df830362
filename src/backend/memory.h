// Memory on any device: Buffer owns a zero-filled tensor on the host or a GPU, copy() moves bytes
// between any two places, and Device helpers say what this build and machine can run. State,
// scratch and uploaded weights use these, so model and runtime code never name a backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata::backend {

// True for the CPU; for CUDA, when this build has the CUDA backend and a GPU is present.
bool device_available(Device device);
std::string device_name(Device device);
// "cpu" or "cuda" (also accepted by parse_device, plus "auto": CUDA when available, else the CPU).
const char* device_label(Device device);
Device parse_device(const std::string& name);

// Memory and bandwidth of a device, for reports (zeros where unknown, e.g. the CPU's bandwidth).
struct DeviceInfo {
  std::string name;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  double peak_bandwidth = 0.0;  // bytes/s
};
DeviceInfo device_info(Device device);

class Buffer {
 public:
  Buffer() = default;
  Buffer(Device device, DType dtype, Shape shape);  // zero-filled

  const Tensor& view() const { return view_; }
  operator const Tensor&() const { return view_; }
  template <typename T>
  T* as() const {
    return view_.as<T>();
  }
  int64_t numel() const { return view_.numel(); }
  const Shape& shape() const { return view_.shape; }
  DType dtype() const { return view_.dtype; }
  Device device() const { return view_.device; }
  bool empty() const { return view_.empty(); }

 private:
  std::shared_ptr<void> memory_;
  Tensor view_;
};

// dst = src, byte for byte (same nbytes; any devices). Returns once dst may be read on its device:
// copies that end on the host wait for the GPU.
void copy(const Tensor& src, const Tensor& dst);
// Copies host bytes into a device or host tensor, and a tensor's bytes out to host memory.
void copy_from_host(const void* src, const Tensor& dst);
void copy_to_host(const Tensor& src, void* dst);
// Waits for all queued work on the device.
void synchronize(Device device);

// copy() queued behind the device's work without waiting for it, whichever way it goes: host
// memory taking part must stay as it is until synchronize(). From and to HostMemory of a GPU the
// copy is a DMA at the bus's speed (about 50 GB/s on PCIe 5; pageable memory gets 6-8). On the CPU
// it is done at once.
void copy_queued(const Tensor& src, const Tensor& dst);
// `bytes` bytes of t from byte `offset` on, as a U8 tensor.
Tensor byte_view(const Tensor& t, size_t offset, size_t bytes);
// n bytes of host memory at p, as a U8 tensor.
Tensor host_bytes(const void* p, size_t n);

// Host memory for bulk copies to and from a device, not zeroed: page-locked for a GPU (see
// copy_queued), plain memory for the CPU. Locking pages costs about 0.5 s per GiB, so it is
// allocated once and reused (runtime/host_pages.h).
class HostMemory {
 public:
  HostMemory(Device device, size_t bytes);
  uint8_t* data() const { return static_cast<uint8_t*>(memory_.get()); }
  size_t size() const { return size_; }

 private:
  std::shared_ptr<void> memory_;
  size_t size_ = 0;
};

// A small tensor (at most kMaxBytes) read back to the host behind the device's queued work,
// without waiting for it: start() queues the copy and returns at once, wait() blocks until the
// bytes have arrived and returns them (valid until the next start). On the CPU the copy is done
// by start(). One copy in flight per Readback.
class Readback {
 public:
  static constexpr size_t kMaxBytes = 64;
  explicit Readback(Device device);
  void start(const Tensor& src);
  const void* wait();

 private:
  Device device_;
  std::shared_ptr<void> impl_;  // the CUDA backend's page-locked slot and event
  alignas(8) unsigned char host_[kMaxBytes] = {};
};

// Small inputs copied to a device without waiting for its queued work (a step's token ids and
// positions): write the bytes to host(n), then start(dst) queues the copy. Two slots alternate,
// and a slot is reused only once its previous copy has finished, so the host may fill the next
// one while the device has not yet read the last. With `first` (a 4-byte tensor on the device),
// dst's first 4 bytes come from it instead, in the same queued work: a token the device picked.
// On the CPU start() copies at once.
class Upload {
 public:
  explicit Upload(Device device);
  void* host(size_t nbytes);
  void start(const Tensor& dst, const Tensor* first = nullptr);

 private:
  Device device_;
  int slot_ = 0;
  std::shared_ptr<void> impl_[2];  // the CUDA backend's page-locked slots
  std::vector<unsigned char> cpu_;
};

// A host copy of any tensor (downloaded when it lives on a GPU).
HostTensor to_host(const Tensor& t);

}  // namespace strata::backend
