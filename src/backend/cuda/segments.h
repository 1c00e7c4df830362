// Decode matmuls of weights that share one activation input (q/k/v, gate/up, the GDN input
// projections) run as one launch: each weight is a segment with its own range of work units (a
// block each in the CUDA-core kernel; the tensor-core kernel's blocks may take several in turn), and
// a unit's index finds its segment.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "backend/weight.h"

namespace strata::backend::cuda {

constexpr int kMaxSegments = 4;  // weights per launch

struct WeightSegment {
  const void* codes;
  const void* scales;  // the kernel's scale type
  const void* biases;
  float* out;
  int64_t n;  // rows
  unsigned first_block;
};
struct WeightSegments {
  WeightSegment s[kMaxSegments];
  int count;
};

// The segments of ws (at most kMaxSegments) writing outs, at rows_per_block rows per unit
// (first_block: the segment's first unit); returns the number of units they need together.
inline unsigned make_segments(std::span<const Weight* const> ws, std::span<float* const> outs,
                              int64_t rows_per_block, WeightSegments& segs) {
  segs = {};
  segs.count = static_cast<int>(ws.size());
  unsigned blocks = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const Weight& w = *ws[i];
    segs.s[i] = {w.w.data, w.scales.data, w.biases.data, outs[i], w.rows(), blocks};
    blocks += static_cast<unsigned>((w.rows() + rows_per_block - 1) / rows_per_block);
  }
  return blocks;
}

#ifdef __CUDACC__
// The segment of work unit `unit`.
__device__ __forceinline__ const WeightSegment& unit_segment(const WeightSegments& segs, unsigned unit) {
  int si = 0;
#pragma unroll
  for (int i = 1; i < kMaxSegments; ++i)
    if (i < segs.count && unit >= segs.s[i].first_block) si = i;
  return segs.s[si];
}

// The segment this block serves.
__device__ __forceinline__ const WeightSegment& block_segment(const WeightSegments& segs) {
  return unit_segment(segs, blockIdx.x);
}
#endif

}  // namespace strata::backend::cuda
