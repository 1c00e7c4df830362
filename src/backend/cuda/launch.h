// Kernel launches with Programmatic Dependent Launch (PDL, sm_90+): a kernel launched with launch()
// may start while the kernel before it on stream() is finishing, so launch latency overlaps that
// kernel's tail instead of sitting in the gap between them (in captured graphs, too).
//
// The contract: every kernel launched with launch() calls wait_for_inputs() before it writes any
// global memory (a kernel may overwrite a buffer its predecessor still reads) or reads memory the
// kernel just before it may write. wait_for_inputs() returns once the preceding grid has completed
// and its writes are visible; without PDL it returns at once. Since every kernel waits so, when a
// kernel starts, all but the one just before it have completed: it may read what only they wrote
// (weights, a layer's recurrent state or conv window, written by that layer a step earlier) before
// its wait, to overlap those loads with the tail of the kernel before.
//
// PDL is on by default on devices of compute capability 9.0 and above. STRATA_CUDA_PDL=0 in the
// environment turns it off (read once, on the first launch): launch() then launches plainly.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"

namespace strata::backend::cuda {

// Whether launch() uses PDL (device capability ≥ 9.0 and STRATA_CUDA_PDL is not 0); fixed on the
// first call.
bool pdl_enabled();

// kernel<<<grid, block, shared_bytes, stream()>>>(args...), with PDL when enabled; throws on
// failure.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream();
  config.attrs = &attribute;
  config.numAttrs = pdl_enabled() ? 1 : 0;  // no attributes: an ordinary launch
  STRATA_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

#ifdef __CUDACC__  // host code (tests) may include this header for pdl_enabled()
// Waits for the grid launched before this one (griddepcontrol.wait), then lets the next one launch
// (griddepcontrol.launch_dependents: it starts once every block of this grid has passed here, and
// its own wait_for_inputs() still holds it until this grid has finished). Called by every kernel
// launched with launch(), before its writes and its reads of what the kernel before writes; a no-op
// when compiled for devices without PDL (below sm_90).
__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
#endif

}  // namespace strata::backend::cuda
