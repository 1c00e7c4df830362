// Thread-block clusters (sm_90+): barriers across a cluster's blocks and addresses in another block's
// shared memory (distributed shared memory). Below sm_90 a kernel runs in clusters of one block, so
// the barriers are the block's own and every address is the block's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strata::backend::cuda {

// barrier.cluster in two halves: arrive (this block's shared memory writes released to the
// cluster) and wait (until every block has arrived; their writes acquired).
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __syncthreads();
#endif
}
// An arrival that releases nothing (the thread wrote nothing the cluster reads after the wait).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// This block's rank in its cluster.
__device__ __forceinline__ int cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return static_cast<int>(r);
#else
  return 0;
#endif
}

// The address of `p` (in this block's shared memory) in block `rank` of the cluster; T may be
// const (to read another block's shared memory) or not (to write it).
template <typename T>
__device__ __forceinline__ T* in_block(T* p, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint64_t out;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
  return reinterpret_cast<T*>(out);
#else
  (void)rank;
  return p;
#endif
}

}  // namespace strata::backend::cuda
