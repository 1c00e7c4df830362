// A token drawn from one row of logits by temperature, top-k, top-p and min-p (backend::sample_row),
// and the sampler's logit edits before it (backend::edit_logits): their parameters, and the
// arithmetic the host and the devices share so that all pick the same token.
//
// The draw, for a row x of V logits (V < 2^24):
// - candidates: the tokens whose logit is neither NaN nor −inf, with v = x / temperature (−0 as +0),
//   in one strict order: v descending, then id ascending;
// - weights: w = e^(v − max v) (1 for the tokens at the maximum, so +inf logits share the draw) and
//   W = round(2^40 · w), an integer; sums of W are exact, in any order (V · 2^40 < 2^64);
// - top-k keeps the first k candidates (when 0 < k < their number), top-p the shortest prefix of
//   those whose ΣW reaches reach_target(top_p, ΣW) (when top_p < 1), min-p those of them with
//   w ≥ min_p (when min_p > 0); every step keeps at least the first;
// - the pick walks the kept tokens in id order (on a device that order needs no sort) and takes
//   the first at which the running ΣW reaches reach_target(u, ΣW of the kept).
// Sampler::sample draws the same token but for rounding (its probabilities are floats): with the
// same generator state, u is the uniform number its draw takes.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

namespace strata::backend {

struct RowDraw {
  float temperature = 1.0f;  // > 0
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // in (0, 1]; 1: off
  float min_p = 0.0f;        // in [0, 1]; 0: off
  double u = 0.0;            // in [0, 1): where in the kept weight the draw lands
};

// A sampler's penalties on the logits of tokens seen before (backend::edit_logits).
struct LogitPenalties {
  float repetition = 1.0f;  // divides positive logits, multiplies negative ones
  float presence = 0.0f;    // subtracted once
  float frequency = 0.0f;   // subtracted once per occurrence
};

// A logit after its bias and, for a token seen `count` times (count > 0), the penalties: the
// one formula of the host sampler and the devices (no fused multiply-add, so all round alike).
STRATA_HOST_DEVICE inline float edited_logit(float x, float bias, int32_t count, const LogitPenalties& p) {
  x += bias;
  if (count <= 0) return x;
  if (p.repetition != 1.0f) x = x > 0.0f ? x / p.repetition : x * p.repetition;
#ifdef __CUDA_ARCH__
  return x - __fadd_rn(p.presence, __fmul_rn(p.frequency, static_cast<float>(count)));
#else
  return x - (p.presence + p.frequency * static_cast<float>(count));
#endif
}

namespace row_draw {

constexpr int kIdBits = 24;  // ids below 2^24: the low bits of a candidate's order key
constexpr int64_t kMaxVocab = int64_t{1} << kIdBits;
constexpr float kWeightScale = 1099511627776.0f;  // 2^40

// A candidate's value v as an unsigned key in the same order (larger v, larger key).
STRATA_HOST_DEVICE inline uint32_t value_key(float v) {
  union {
    float f;
    uint32_t u;
  } bits{v + 0.0f};  // -0 + 0 = +0: equal values get one key
  return (bits.u & 0x80000000u) != 0 ? ~bits.u : (bits.u | 0x80000000u);
}

// The candidate's place in the draw's order as one 56-bit key: larger is earlier.
STRATA_HOST_DEVICE inline uint64_t order_key(float v, int64_t id) {
  return (static_cast<uint64_t>(value_key(v)) << kIdBits) | static_cast<uint64_t>((kMaxVocab - 1) - id);
}

// w = e^(v − max_v), 1 at the maximum.
STRATA_HOST_DEVICE inline float weight(float v, float max_v) { return v == max_v ? 1.0f : expf(v - max_v); }

// W = round(2^40 · w) (to nearest, ties to even: the float rounding mode).
STRATA_HOST_DEVICE inline uint64_t fixed_weight(float w) {
#ifdef __CUDA_ARCH__
  return __float2ull_rn(w * kWeightScale);
#else
  return static_cast<uint64_t>(std::nearbyint(w * kWeightScale));
#endif
}

// The running sum a prefix must reach to hold `fraction` of `total`: ⌈fraction · total⌉, at least 1
// and at most total (total > 0).
STRATA_HOST_DEVICE inline uint64_t reach_target(double fraction, uint64_t total) {
  const double t = ceil(fraction * static_cast<double>(total));
  if (!(t >= 1.0)) return 1;
  if (t >= static_cast<double>(total)) return total;
  return static_cast<uint64_t>(t);
}

}  // namespace row_draw

}  // namespace strata::backend
