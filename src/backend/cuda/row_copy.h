// Row copies by index on the GPU, shared by the ops that move whole rows (embedding of a float
// table, KV-cache stores, MoE gathers): the widest access unit the sizes and addresses allow.
#pragma once

#include <cstdint>

namespace strata::backend::cuda {

// dst row (dst_rows ? dst_rows[i] : i) = src row (src_rows ? src_rows[i] : i) for i < n, rows of
// row_bytes; indices are device arrays. A source index outside [0, src_limit) zeroes its
// destination row; a destination index outside [0, dst_limit) skips the row.
void copy_rows(const void* src, const int32_t* src_rows, int64_t src_limit, void* dst,
               const int32_t* dst_rows, int64_t dst_limit, int64_t n, int64_t row_bytes);

}  // namespace strata::backend::cuda
