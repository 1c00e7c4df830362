// The host-side throw behind STRATA_CUDA_CHECK (needs no CUDA headers, so it builds everywhere).
#include "core/error.h"

namespace strata::backend::cuda {

[[noreturn]] void throw_cuda_error(int status, const char* message, const char* file, int line) {
  fail(ErrorKind::kInternal, "CUDA error {} at {}:{}: {}", status, file, line, message);
}

}  // namespace strata::backend::cuda
