// Matmul feeds on CUDA (MatmulFeed, backend/ops.h): the decode matmul's activations, converted by
// the op that produces them. gemv_tc.cu converts its F32 input into limb B vectors and per-run
// scales (gemv_math.h) in every block, after its wait for the kernel before it; a producer handed a
// feed writes that form once, in the layout a block holds it in shared memory (the B vectors of
// every k-tile, then a float4 of run info per run), and the matmul's blocks copy it.
//
// Measured on an H100 (2026-11-27, timing only: every decode matmul copying a form nobody wrote,
// so that no block converted; `strata bench --shape S --bits 4 --prompt 512 --contexts 512`):
// 9B 4-bit decode 421-422 → 442 tok/s, and 458 with the down projection's conversion launch gone
// too; 0.8B 1516-1520 → 1695-1698; llama-3.1-8b 429 → 452-453 (466-468).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/gemv_math.h"
#include "backend/cuda/scale_type.h"
#include "backend/ops.h"
#include "backend/weight.h"

namespace strata::backend::cuda {

// Rows a producer writes forms for (the norms; the others one row) and the multi-row decode
// matmul takes at most in one call (gemv_tc_rows): a decode step's sequences, or a short prompt chunk.
constexpr int64_t kMaxFedRows = 64;

// The most rows the tensor-core decode kernels take now (matmul.cu): kMaxFedRows, or fewer with
// batch invariance off, where more go to the GEMM, which reads no forms.
int64_t decode_kernel_rows();

// The form a producer writes: its weight's bits and folds (runs of 64 four-bit codes in groups of
// 32 fold twice), over K activations, at `data`; null data: no form.
struct FeedForm {
  int bits = 0, folds = 0;
  int64_t K = 0;
  uint4* data = nullptr;
};

// The folds of a run of w's codes: two at 4 bits in groups of 32 (a run spans two groups), else one.
inline int form_folds(const Weight& w) { return w.bits == 4 && w.group_size == 32 ? 2 : 1; }

// Bytes of the form of K activations for a weight of `bits`.
size_t form_bytes(int bits, int64_t K);

// Activations of one run of a form for a weight of `bits` (64 at 4 bits, 32 at 8: the values that
// share a scale).
int64_t run_length(int bits);

// The producers, each of which Tuning::feeds (backend/tuning.h: a bit mask of 1 << kind; default
// 15, all) can turn off, to compare.
enum class FeedKind { kNorm, kGlu, kGdnCore, kSigmoidMul };

// For a producer of `kind` about to write `rows` rows of K activations at `source`: the form to
// write as well (rows forms back to back, in the multi-row layout where more than one), recorded in the feed, or no form (recorded as none)
// where the decode matmul of the feed's weight would not take one (more than one row, or more than
// kMaxFedRows for a norm; a K other than its input's; a weight gemv_tc does not serve) or
// Tuning::feeds turns the kind off. `extra_ok` is the producer's
// own condition (a shape its kernel cannot write).
FeedForm begin_feed(FeedKind kind, MatmulFeed* feed, const void* source, int64_t rows, int64_t K,
                    bool extra_ok = true);

// run_length of the feed's weight, or 0 without a feed or its weight; a producer whose blocks each
// convert a share of the row needs whole runs in each share.
int64_t form_run(const MatmulFeed* feed);

// The form a decode matmul of weight w (its group's first) finds for its input x: the feed's, when
// its producer wrote one for x and for w's format; else null.
const uint4* fed_form(const MatmulFeed* feed, const void* x, const Weight& w);

#ifdef __CUDACC__
// The 8 values of task u of a row (floats 8u..8u+7), as two 16-byte loads.
__device__ __forceinline__ void load_task(const float* row, int64_t u, float (&v)[8]) {
  const float4* p = reinterpret_cast<const float4*>(row) + 2 * u;
  const float4 a = p[0], b = p[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// Task u of a form (activations 8u..8u+7, v; gemv_math::store_converted): every lane of the warp
// calls it, the kSteps lanes of a run together; lanes with `active` false write nothing. kRows: the
// multi-row matmul's layout (gemv_math::b_vec), which forms of more than one row take.
template <int kBits, int kFolds, bool kRows = false>
__device__ __forceinline__ void write_form(const float (&v)[8], int64_t u, bool active, uint4* form,
                                           int64_t K) {
  using G = gemv_math::Geometry<kBits>;
  float4* info = reinterpret_cast<float4*>(form + K / G::kTileK * G::kTileVecs);
  gemv_math::store_converted<kBits, kFolds, kRows>(v, u, active, form, info);
}

// f(bits, folds) with both as compile-time constants, for a form's format: in host code that
// launches a form's kernel, or in a kernel that writes a form of a format it learns at run time.
#pragma nv_exec_check_disable
template <typename F>
__host__ __device__ __forceinline__ void with_format(int bits, int folds, F&& f) {
  if (bits == 8) {
    f(std::integral_constant<int, 8>{}, std::integral_constant<int, 1>{});
  } else if (folds == 2) {
    f(std::integral_constant<int, 4>{}, std::integral_constant<int, 2>{});
  } else {
    f(std::integral_constant<int, 4>{}, std::integral_constant<int, 1>{});
  }
}

// f(bits, folds, scale) for a weight the tensor-core kernels take, all three compile-time values
// (the scale a value of its scale type).
template <typename F>
void with_weight_format(const Weight& w, F&& f) {
  with_scale_type(w, [&](auto s) {
    with_format(w.bits, form_folds(w), [&](auto bits, auto folds) { f(bits, folds, s); });
  });
}

// with_format for a form that is not empty.
template <typename F>
void with_form_format(const FeedForm& form, F&& f) {
  with_format(form.bits, form.folds, static_cast<F&&>(f));
}
#endif

}  // namespace strata::backend::cuda
