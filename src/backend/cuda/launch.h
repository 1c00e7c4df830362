// Kernel launches with Programmatic Dependent Launch (PDL, sm_90+): a kernel launched with launch()
// may start while the kernels before it on stream() are still running, so launch latency, and the
// loads that need nothing from them (weights), overlap their work instead of sitting in the gaps.
//
// The contract: every kernel launched with launch() calls wait_for_inputs() (the matmuls:
// wait_for_inputs_then_release()) before it writes any global memory (a kernel may overwrite a
// buffer a kernel before it still reads) or reads memory a kernel before it may write. Both return
// once the preceding grid has completed and its writes are visible (so every kernel before it has
// completed too); without PDL they return at once.
//
// They differ in when they let the next kernel launch. wait_for_inputs() does so at once, so a
// chain of small kernels has its successors resident and waiting, up to the next matmul, whose
// blocks then issue their first weight loads while the chain still runs. The matmuls let the next
// kernel launch only after their wait: measured on an H100 (2026-11-22), releasing everywhere at
// entry took Qwen3.5-9B decode from 373 to 396 tok/s but Qwen3.5-0.8B from 1206 to 1051; holding
// the release in the matmuls kept 396 and gave 0.8B 1249. The matmuls also bound how far ahead
// kernels run: when a kernel starts, every kernel before the latest matmul ahead of it (the
// matmul's predecessor included) has completed. So a kernel may read before its wait only what was
// written before that: weights, a layer's recurrent state, conv window or KV-cache rows of earlier
// steps, last written by that layer a step earlier, with the layer's input projection (a matmul)
// in between, and the step's positions, staged before its first kernel. (An L2 prefetch may name
// any address: it reads nothing into the kernel.)
//
// PDL is on by default on devices of compute capability 9.0 and above. Tuning::pdl
// (backend/tuning.h) turns it off: launch() then launches plainly.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"

namespace strata::backend::cuda {

// Whether launch() uses PDL (device capability ≥ 9.0 and Tuning::pdl).
bool pdl_enabled();

// Whether the device runs thread-block clusters (compute capability 9.0 and above).
bool clusters_supported();

// kernel<<<grid, block, shared_bytes, stream()>>>(args...), with PDL when enabled and, when
// `cluster` > 1, the grid cut into clusters of that many blocks along x (grid.x a multiple of it;
// only where clusters_supported()); throws on failure.
template <typename... Params, typename... Args>
void launch_clustered(unsigned cluster, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                      Args&&... args) {
  cudaLaunchAttribute attributes[2]{};
  unsigned n = 0;
  if (pdl_enabled()) {
    attributes[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attributes[n].id = cudaLaunchAttributeClusterDimension;
    attributes[n++].val.clusterDim = {cluster, 1, 1};
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream();
  config.attrs = attributes;
  config.numAttrs = n;  // none: an ordinary launch
  STRATA_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, Args&&... args) {
  launch_clustered(1, kernel, grid, block, shared_bytes, std::forward<Args>(args)...);
}

// Lets `kernel` take up to `bytes` of dynamic shared memory (above the 48 KB a launch gets without
// asking); throws on failure. Callers do this once per kernel, before its first launch.
template <typename... Params>
void allow_shared_bytes(void (*kernel)(Params...), size_t bytes) {
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

#ifdef __CUDACC__  // host code (tests) may include this header for pdl_enabled()
// Lets the next kernel launch (griddepcontrol.launch_dependents: its own wait still holds it until
// this grid has finished), then waits for the grid launched before this one (griddepcontrol.wait).
// A no-op when compiled for devices without PDL (below sm_90).
__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The matmuls' wait: as wait_for_inputs(), but the next kernel may launch only once this one has
// waited (see the contract above).
__device__ __forceinline__ void wait_for_inputs_then_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
#endif

}  // namespace strata::backend::cuda
