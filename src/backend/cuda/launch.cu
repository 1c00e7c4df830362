// Whether kernel launches use Programmatic Dependent Launch and clusters (launch.h): decided once
// per process.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "backend/cuda/launch.h"

namespace strata::backend::cuda {

namespace {

bool hopper_or_newer() {
  static const bool newer = [] {
    int device = 0, major = 0;
    STRATA_CUDA_CHECK(cudaGetDevice(&device));
    STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
  }();
  return newer;
}

}  // namespace

bool pdl_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("STRATA_CUDA_PDL");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    return hopper_or_newer();
  }();
  return enabled;
}

bool clusters_supported() { return hopper_or_newer(); }

}  // namespace strata::backend::cuda
