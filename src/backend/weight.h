// Weight: a matrix as the ops see it, either float ([rows, cols], F32 on the CPU) or MLX affine
// quantized (packed U32 codes + per-group scales and biases). Views only; the model owns memory.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace strata::backend {

struct Weight {
  Tensor w;       // F32 [rows, cols], or U32 [rows, cols * bits / 32] when quantized
  Tensor scales;  // quantized only: [rows, cols / group_size]
  Tensor biases;  // quantized only: same shape as scales
  int bits = 0;   // 0: float
  int group_size = 0;

  bool quantized() const { return bits != 0; }
  bool empty() const { return w.empty(); }
  int64_t rows() const { return w.dim(0); }
  int64_t cols() const { return quantized() ? w.dim(1) * 32 / bits : w.dim(1); }
  // Bytes read to use the whole matrix once (weights + scales + biases).
  size_t nbytes() const { return w.nbytes() + scales.nbytes() + biases.nbytes(); }
};

// Whether a and b are stored alike (bits, group size, dtypes of codes or values, scales and biases),
// so that one kernel instance reads both.
inline bool same_format(const Weight& a, const Weight& b) {
  return a.bits == b.bits && a.group_size == b.group_size && a.w.dtype == b.w.dtype &&
         (!a.quantized() || (a.scales.dtype == b.scales.dtype && a.biases.dtype == b.biases.dtype));
}

}  // namespace strata::backend
