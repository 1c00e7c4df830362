// Checks shared by the op dispatchers (backend/*.cpp): device placement and dtypes, and the one
// macro that hands an op to the CUDA backend.
#pragma once

#include <initializer_list>

#include "core/error.h"
#include "core/tensor.h"
#ifdef STRATA_HAVE_CUDA
#include "backend/cuda/cuda_ops.h"
#endif

namespace strata::backend::detail {

// Where an op runs: every tensor on the CPU, or every tensor on the GPU (CUDA builds only).
inline Device placement(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Device d = (*tensors.begin())->device;
  for (const Tensor* t : tensors)
    check(t->device == d, ErrorKind::kInternal, "op {}: tensors on different devices", op);
#ifndef STRATA_HAVE_CUDA
  check(d == Device::kCpu, ErrorKind::kUnsupported,
        "op {}: tensors on this device are not supported by this build", op);
#endif
  return d;
}

inline void require_f32(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    check(t->dtype == DType::kF32, ErrorKind::kInternal, "op {}: expected F32, got {}", op,
          dtype_name(t->dtype));
}

#ifdef STRATA_HAVE_CUDA
// Times one CUDA op when profiling is on (cuda::timer_*), under the op's name.
class CudaOpTimer {
 public:
  explicit CudaOpTimer(const char* label) { cuda::timer_begin(label); }
  ~CudaOpTimer() { cuda::timer_end(); }
  CudaOpTimer(const CudaOpTimer&) = delete;
  CudaOpTimer& operator=(const CudaOpTimer&) = delete;
};
#endif

}  // namespace strata::backend::detail

// Runs `call` (a cuda:: op) and returns from the dispatcher when `device` is the GPU.
#ifdef STRATA_HAVE_CUDA
#define STRATA_CUDA_DISPATCH(label, device, call)               \
  if ((device) == ::strata::Device::kCuda) {                    \
    const ::strata::backend::detail::CudaOpTimer timer_(label); \
    call;                                                       \
    return;                                                     \
  }
#else
#define STRATA_CUDA_DISPATCH(label, device, call) (void)(device);
#endif
