// Warp-level bf16 tensor-core helpers (mma.sync m16n8k16 with fp32 accumulation, and ldmatrix to
// load its fragments from shared memory), shared by the kernels that multiply bf16 tiles: the
// routed experts' grouped GEMM and the prefill attention over a BF16 KV cache.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace strata::backend::cuda {

// Four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j, and lane t receives
// row t / 4, columns 2 (t % 4) and 2 (t % 4) + 1 of each.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The same, transposed: lane t receives rows 2 (t % 4) and 2 (t % 4) + 1 of column t / 4.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// d += a · b for a 16x16 A (row-major fragment) and a 16x8 B (column-major fragment).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace strata::backend::cuda
