// The host-side throws behind STRATA_CUDA_CHECK and the backend's own checks (no CUDA headers, so it
// builds everywhere).
#include "core/error.h"

namespace strata::backend::cuda {

[[noreturn]] void throw_cuda_error(int status, const char* message, const char* file, int line) {
  fail(ErrorKind::kInternal, "CUDA error {} at {}:{}: {}", status, file, line, message);
}

[[noreturn]] void throw_internal_error(const char* message) { fail(ErrorKind::kInternal, "CUDA backend: {}", message); }

}  // namespace strata::backend::cuda
