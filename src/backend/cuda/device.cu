// Device discovery, memory and copies for the CUDA backend. Every CUDA call is checked.
#include <cuda_runtime.h>

#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"

namespace strata::backend::cuda {

bool device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string device_name() {
  cudaDeviceProp prop{};
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

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

DeviceTensor upload(const Tensor& host) {
  DeviceTensor t{DeviceBuffer(host.nbytes()), host};
  t.view.data = t.buffer.data();
  t.view.device = Device::kCuda;
  STRATA_CUDA_CHECK(cudaMemcpy(t.view.data, host.data, host.nbytes(), cudaMemcpyHostToDevice));
  return t;
}

void download(const Tensor& device, const Tensor& host) {
  STRATA_CUDA_CHECK(cudaMemcpy(host.data, device.data, device.nbytes(), cudaMemcpyDeviceToHost));
}

}  // namespace strata::backend::cuda
