// The element types a KV cache may have on the GPU: F32, or BF16 (half the bytes attention reads;
// values rounded to nearest even when stored, as the CPU's f32_to_bf16, and widened exactly when
// read). Kernels take the type as a template parameter; with_cache_type picks the instance.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <utility>

#include "backend/cuda/scale_type.h"
#include "backend/ops.h"
#include "core/tensor.h"

namespace strata::backend::cuda {

__device__ __forceinline__ float load_cache(const float* p) { return *p; }
__device__ __forceinline__ float load_cache(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_cache(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_cache(__nv_bfloat16* p, float x) {
  *p = __float2bfloat16_rn(x);
}

// Two BF16 values packed in a 32-bit word (the lower address in the low half), widened exactly.
__device__ __forceinline__ float2 widen_bf16_pair(uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// Where token `key` of a sequence lies in a cache (ops.h KvBlocks): row `key` of the sequence's own
// cache, or through its block table in a pool of blocks of 2^shift rows.
struct KvRows {
  const int32_t* table = nullptr;  // null: token i in row i
  int shift = 0;                   // log2 of the tokens per block
  __device__ __forceinline__ int64_t row(int key) const {
    if (table == nullptr) return key;
    return (static_cast<int64_t>(__ldg(table + (key >> shift))) << shift) |
           (key & ((1 << shift) - 1));
  }
};
KvRows kv_rows(const KvBlocks& blocks);

// Calls f(C{}) with C the element type of the cache `t`.
template <typename F>
void with_cache_type(const Tensor& t, F&& f) {
  with_float_type</*kHalf=*/false>(t.dtype, "KV cache: not F32 or BF16", std::forward<F>(f));
}

}  // namespace strata::backend::cuda
