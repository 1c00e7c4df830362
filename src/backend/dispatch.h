// Checks shared by the op dispatchers (backend/*.cpp): device placement and dtypes.
#pragma once

#include <initializer_list>

#include "core/error.h"
#include "core/tensor.h"

namespace strata::backend::detail {

inline void require_cpu(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    check(t->device == Device::kCpu, ErrorKind::kUnsupported,
          "op {}: tensors on this device are not supported by this build", op);
  }
}

inline void require_f32(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    check(t->dtype == DType::kF32, ErrorKind::kInternal, "op {}: expected F32, got {}", op, dtype_name(t->dtype));
}

}  // namespace strata::backend::detail
