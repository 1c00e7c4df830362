// Whether kernel launches use Programmatic Dependent Launch (launch.h): decided once per process.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "backend/cuda/launch.h"

namespace strata::backend::cuda {

bool pdl_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("STRATA_CUDA_PDL");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    int device = 0, major = 0;
    STRATA_CUDA_CHECK(cudaGetDevice(&device));
    STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
  }();
  return enabled;
}

}  // namespace strata::backend::cuda
