// Decode matmuls of weights that share one activation input (q/k/v, gate/up, the GDN input
// projections) run as one launch: each weight is a segment with its own range of work units (a
// block each in the CUDA-core kernel; 16-row m-tiles in the tensor-core kernel, whose blocks take a
// range of them), and a unit's index finds its segment.
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
  unsigned first_unit;
};
struct WeightSegments {
  WeightSegment s[kMaxSegments];
  int count;
};

// The segments of ws (at most kMaxSegments) writing outs, at unit_rows rows per unit (first_unit:
// the segment's first unit); returns the number of units they need together.
inline unsigned make_segments(std::span<const Weight* const> ws, std::span<float* const> outs,
                              int64_t unit_rows, WeightSegments& segs) {
  segs = {};
  segs.count = static_cast<int>(ws.size());
  unsigned units = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const Weight& w = *ws[i];
    segs.s[i] = {w.w.data, w.scales.data, w.biases.data, outs[i], w.rows(), units};
    units += static_cast<unsigned>((w.rows() + unit_rows - 1) / unit_rows);
  }
  return units;
}

#ifdef __CUDACC__
// The segment of work unit `unit`.
__device__ __forceinline__ const WeightSegment& unit_segment(const WeightSegments& segs, unsigned unit) {
  int si = 0;
#pragma unroll
  for (int i = 1; i < kMaxSegments; ++i)
    if (i < segs.count && unit >= segs.s[i].first_unit) si = i;
  return segs.s[si];
}

// The segment this block serves.
__device__ __forceinline__ const WeightSegment& block_segment(const WeightSegments& segs) {
  return unit_segment(segs, blockIdx.x);
}
#endif

}  // namespace strata::backend::cuda
