// Buffer and copy: host memory through HostBuffer, device memory through the CUDA backend.
#include "backend/memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#ifdef STRATA_HAVE_CUDA
#include "backend/cuda/cuda_ops.h"
#endif

namespace strata::backend {

bool device_available(Device device) {
  if (device == Device::kCpu) return true;
#ifdef STRATA_HAVE_CUDA
  return cuda::device_available();
#else
  return false;
#endif
}

std::string device_name(Device device) {
#ifdef STRATA_HAVE_CUDA
  if (device == Device::kCuda) return cuda::device_name();
#endif
  return device_label(device);
}

DeviceInfo device_info(Device device) {
  DeviceInfo info;
  info.name = device_name(device);
#ifdef STRATA_HAVE_CUDA
  if (device == Device::kCuda) {
    info.total_bytes = cuda::device_memory_bytes();
    info.free_bytes = cuda::device_free_bytes();
    info.peak_bandwidth = cuda::device_peak_bandwidth_bytes();
  }
#endif
  return info;
}

const char* device_label(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda" || name == "gpu") {
    check(device_available(Device::kCuda), ErrorKind::kUnsupported, "device 'cuda': {}", [] {
#ifdef STRATA_HAVE_CUDA
      return "no usable CUDA GPU on this machine";
#else
            return "this build has no CUDA backend (nvcc was not found when it was configured)";
#endif
    }());
    return Device::kCuda;
  }
  check(name == "auto", ErrorKind::kInvalidInput,
        "unknown device '{}' (expected cpu, cuda or auto)", name);
  return device_available(Device::kCuda) ? Device::kCuda : Device::kCpu;
}

Buffer::Buffer(Device device, DType dtype, Shape shape) {
  view_.dtype = dtype;
  view_.shape = shape;
  view_.device = device;
  const size_t bytes = view_.nbytes();
  if (device == Device::kCpu) {
    auto host = std::make_shared<HostBuffer>(bytes);
    std::memset(host->data(), 0, bytes);
    view_.data = host->data();
    memory_ = std::move(host);
    return;
  }
#ifdef STRATA_HAVE_CUDA
  auto dev = std::make_shared<cuda::DeviceBuffer>(bytes);
  cuda::fill_zero(dev->data(), bytes);
  view_.data = dev->data();
  memory_ = std::move(dev);
#else
  throw Error(ErrorKind::kUnsupported, "this build has no CUDA backend");
#endif
}

void copy(const Tensor& src, const Tensor& dst) {
  check(src.nbytes() == dst.nbytes(), ErrorKind::kInternal, "copy: {} bytes into {}", src.nbytes(),
        dst.nbytes());
  if (src.nbytes() == 0 || src.data == dst.data) return;
  if (src.device == Device::kCpu && dst.device == Device::kCpu) {
    std::memmove(dst.data, src.data, src.nbytes());
    return;
  }
#ifdef STRATA_HAVE_CUDA
  cuda::copy(src.data, src.device, dst.data, dst.device, src.nbytes());
#else
  throw Error(ErrorKind::kUnsupported, "this build has no CUDA backend");
#endif
}

void copy_from_host(const void* src, const Tensor& dst) {
  Tensor host = dst;
  host.data = const_cast<void*>(src);
  host.device = Device::kCpu;
  copy(host, dst);
}

void copy_to_host(const Tensor& src, void* dst) {
  Tensor host = src;
  host.data = dst;
  host.device = Device::kCpu;
  copy(src, host);
}

void copy_queued(const Tensor& src, const Tensor& dst) {
  check(src.nbytes() == dst.nbytes(), ErrorKind::kInternal, "copy: {} bytes into {}", src.nbytes(),
        dst.nbytes());
#ifdef STRATA_HAVE_CUDA
  if (src.device == Device::kCuda || dst.device == Device::kCuda) {
    cuda::copy_queued(src.data, src.device, dst.data, dst.device, src.nbytes());
    return;
  }
#endif
  copy(src, dst);
}

Tensor byte_view(const Tensor& t, size_t offset, size_t bytes) {
  check(offset + bytes <= t.nbytes(), ErrorKind::kInternal, "bytes [{}, {}) of a tensor of {}", offset,
        offset + bytes, t.nbytes());
  Tensor out;
  out.data = static_cast<uint8_t*>(t.data) + offset;
  out.dtype = DType::kU8;
  out.shape = Shape{static_cast<int64_t>(bytes)};
  out.device = t.device;
  return out;
}

Tensor host_bytes(const void* p, size_t n) {
  Tensor out;
  out.data = const_cast<void*>(p);
  out.dtype = DType::kU8;
  out.shape = Shape{static_cast<int64_t>(n)};
  return out;
}

HostMemory::HostMemory(Device device, size_t bytes) : size_(bytes) {
#ifdef STRATA_HAVE_CUDA
  if (device == Device::kCuda) {
    memory_ = std::shared_ptr<void>(cuda::host_alloc(std::max<size_t>(bytes, 1)), cuda::host_free);
    return;
  }
#endif
  check(device == Device::kCpu, ErrorKind::kUnsupported, "this build has no CUDA backend");
  memory_ = std::shared_ptr<void>(std::malloc(std::max<size_t>(bytes, 1)), std::free);
  check(memory_ != nullptr, ErrorKind::kIo, "out of memory allocating {} bytes", bytes);
}

void synchronize(Device device) {
#ifdef STRATA_HAVE_CUDA
  if (device == Device::kCuda) cuda::synchronize();
#else
  (void)device;
#endif
}

Readback::Readback(Device device) : device_(device) {
#ifdef STRATA_HAVE_CUDA
  if (device == Device::kCuda) {  // sized once: a copy out never needs to wait for the one before
    auto stage = std::make_shared<cuda::PinnedStage>();
    stage->host(kMaxBytes);
    impl_ = std::move(stage);
  }
#endif
}

void Readback::start(const Tensor& src) {
  check(src.nbytes() <= kMaxBytes && src.device == device_, ErrorKind::kInternal,
        "Readback: {} bytes on {}", src.nbytes(), device_label(src.device));
#ifdef STRATA_HAVE_CUDA
  if (device_ == Device::kCuda) {
    static_cast<cuda::PinnedStage*>(impl_.get())->from_device(src.data, src.nbytes());
    return;
  }
#endif
  std::memcpy(host_, src.data, src.nbytes());
}

const void* Readback::wait() {
#ifdef STRATA_HAVE_CUDA
  if (device_ == Device::kCuda) return static_cast<cuda::PinnedStage*>(impl_.get())->wait();
#endif
  return host_;
}

Upload::Upload(Device device) : device_(device) {
#ifdef STRATA_HAVE_CUDA
  if (device == Device::kCuda)
    for (auto& slot : impl_) slot = std::make_shared<cuda::PinnedStage>();
#endif
}

void* Upload::host(size_t nbytes) {
#ifdef STRATA_HAVE_CUDA
  if (device_ == Device::kCuda) {
    slot_ ^= 1;
    return static_cast<cuda::PinnedStage*>(impl_[slot_].get())->host(nbytes);
  }
#endif
  cpu_.resize(nbytes);
  return cpu_.data();
}

void Upload::start(const Tensor& dst, const Tensor* first) {
  check(dst.device == device_, ErrorKind::kInternal, "Upload: to {}", device_label(dst.device));
  check(first == nullptr || (first->device == device_ && first->nbytes() == 4 && dst.nbytes() >= 4),
        ErrorKind::kInternal, "Upload: a first word of {} bytes", first == nullptr ? 0 : first->nbytes());
#ifdef STRATA_HAVE_CUDA
  if (device_ == Device::kCuda) {
    static_cast<cuda::PinnedStage*>(impl_[slot_].get())
        ->to_device(dst.data, dst.nbytes(), first == nullptr ? nullptr : first->data);
    return;
  }
#endif
  check(dst.nbytes() <= cpu_.size(), ErrorKind::kInternal, "Upload: {} bytes from {}", dst.nbytes(), cpu_.size());
  std::memcpy(dst.data, cpu_.data(), dst.nbytes());
  if (first != nullptr) std::memcpy(dst.data, first->data, 4);
}

HostTensor to_host(const Tensor& t) {
  HostTensor out(t.dtype, t.shape);
  copy(t, out.view());
  return out;
}

}  // namespace strata::backend
