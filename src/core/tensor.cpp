// Shape, tensor views and owned host memory.
#include "core/tensor.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace strata {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  check(dims.size() <= kMaxRank, ErrorKind::kUnsupported, "tensor rank {} exceeds {}", dims.size(), kMaxRank);
  rank_ = static_cast<int>(dims.size());
  for (int i = 0; i < rank_; ++i) dims_[i] = dims[i];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

std::string Shape::str() const { return fmt::format("[{}]", fmt::join(dims_.begin(), dims_.begin() + rank_, ", ")); }

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  check(rank() >= 1 && begin >= 0 && begin <= end && end <= shape[0], ErrorKind::kInternal,
        "rows [{}, {}) out of range for shape {}", begin, end, shape.str());
  Tensor out = *this;
  const size_t row_bytes = shape[0] == 0 ? 0 : nbytes() / static_cast<size_t>(shape[0]);
  out.data = static_cast<char*>(data) + row_bytes * static_cast<size_t>(begin);
  out.shape[0] = end - begin;
  return out;
}

Tensor Tensor::reshaped(Shape new_shape) const {
  check(new_shape.numel() == numel(), ErrorKind::kInternal, "cannot reshape {} to {}", shape.str(),
        new_shape.str());
  Tensor out = *this;
  out.shape = new_shape;
  return out;
}

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  check(p != nullptr, ErrorKind::kIo, "out of memory allocating {} bytes", bytes);
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  data_.reset(p);
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

HostTensor::HostTensor(DType dtype, Shape shape)
    : buffer_(static_cast<size_t>(shape.numel()) * dtype_size(dtype)) {
  view_.data = buffer_.data();
  view_.dtype = dtype;
  view_.shape = shape;
  view_.device = Device::kCpu;
}

HostTensor to_f32(const Tensor& t) {
  HostTensor out(DType::kF32, t.shape);
  convert_to_f32(t.dtype, t.data, out.as<float>(), static_cast<size_t>(t.numel()));
  return out;
}

}  // namespace strata
