// Tensor: a non-owning view (dtype, shape, device, pointer) that ops take; HostTensor: the same view
// over memory it owns. Row-major and contiguous; the last dimension varies fastest.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace strata {

enum class Device : uint8_t { kCpu, kCuda };

class Shape {
 public:
  static constexpr int kMaxRank = 6;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i < 0 ? i + rank_ : i]; }
  int64_t& operator[](int i) { return dims_[i < 0 ? i + rank_ : i]; }
  int64_t numel() const;
  std::vector<int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + rank_}; }
  std::string str() const;  // "[2, 3]"
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Device device = Device::kCpu;

  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[i]; }
  int rank() const { return shape.rank(); }
  bool empty() const { return data == nullptr; }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  // Rows [begin, end) of the first dimension, as a view.
  Tensor rows(int64_t begin, int64_t end) const;
  // The same bytes with another shape (numel must match).
  Tensor reshaped(Shape new_shape) const;
};

// Aligned host memory (64 bytes, for SIMD), owned.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);
  void* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
};

// A tensor that owns its host memory (zero-initialised).
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);
  const Tensor& view() const { return view_; }
  operator const Tensor&() const { return view_; }
  template <typename T>
  T* as() const { return view_.as<T>(); }
  int64_t numel() const { return view_.numel(); }
  const Shape& shape() const { return view_.shape; }
  DType dtype() const { return view_.dtype; }

 private:
  HostBuffer buffer_;
  Tensor view_;
};

// Copies any float tensor into a new F32 host tensor.
HostTensor to_f32(const Tensor& t);

}  // namespace strata
