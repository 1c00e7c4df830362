// CUDA implementations of backend ops (same signatures as backend/ops.h, namespace cuda) and the
// device memory they run on. Host code sees only this header; kernels live in the .cu files.
#pragma once

#include <cstddef>
#include <string>

#include "backend/weight.h"
#include "core/tensor.h"

namespace strata::backend::cuda {

bool device_available();  // a CUDA device is present and usable
std::string device_name();

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

void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out);

// out = x · wᵀ for F32 or MLX affine 4/8-bit w (groups of 32, 64 or 128), all on the device.
void matmul(const Tensor& x, const Weight& w, const Tensor& out);

}  // namespace strata::backend::cuda
