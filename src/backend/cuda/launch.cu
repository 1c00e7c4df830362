// Whether kernel launches use Programmatic Dependent Launch and clusters (launch.h).
#include <cuda_runtime.h>

#include "backend/cuda/launch.h"
#include "backend/tuning.h"

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

bool pdl_enabled() { return tuning().pdl && hopper_or_newer(); }

bool clusters_supported() { return hopper_or_newer(); }

}  // namespace strata::backend::cuda
