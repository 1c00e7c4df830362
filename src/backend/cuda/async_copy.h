// Asynchronous copies from global into shared memory (cp.async, sm_80 and above), for the kernels
// that stage their inputs: attention, the delta rule's tiled and chunked forms, the decode matmul.
// A copy is complete once a wait covering it returns; the waiting thread then still needs a barrier
// before other threads read what it copied.
#pragma once

#include <cuda_runtime.h>

namespace strata::backend::cuda {

// 16 bytes, bypassing L1 (.cg).
__device__ __forceinline__ void copy_async16(void* shared, const void* global) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global) : "memory");
}

// The same, reading only the first src_bytes (0 to 16) and zeroing the rest: 0 writes zeros
// without reading `global`.
__device__ __forceinline__ void copy_async16(void* shared, const void* global, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(global), "r"(src_bytes) : "memory");
}

// 4 bytes (through L1: copies under 16 bytes cannot bypass it).
__device__ __forceinline__ void copy_async4(void* shared, const void* global) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(global) : "memory");
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most N of the committed groups (the newest) are still in flight.
template <int N>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Waits for every copy this thread issued, committed or not.
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

}  // namespace strata::backend::cuda
