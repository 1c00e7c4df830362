// Matmul feeds on CUDA: where a form lives and who may use it (feed.h).
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/feed.h"
#include "backend/cuda/gemv_tc.h"
#include "backend/tuning.h"

namespace strata::backend::cuda {

namespace {
// Per k-tile: its B vectors, then a float4 of run info for each of its 4 runs.
template <int kBits>
size_t bytes_of(int64_t K) {
  using G = gemv_math::Geometry<kBits>;
  return static_cast<size_t>(K / G::kTileK * (G::kTileVecs + 4)) * sizeof(uint4);
}

bool feeds_enabled(FeedKind kind) { return ((tuning().feeds >> static_cast<int>(kind)) & 1) != 0; }
}  // namespace

size_t form_bytes(int bits, int64_t K) { return bits == 4 ? bytes_of<4>(K) : bytes_of<8>(K); }

int64_t run_length(int bits) { return bits == 4 ? gemv_math::Geometry<4>::kRun : gemv_math::Geometry<8>::kRun; }

int64_t form_run(const MatmulFeed* feed) {
  if (feed == nullptr || feed->weight == nullptr) return 0;
  return run_length(feed->weight->bits);
}

FeedForm begin_feed(FeedKind kind, MatmulFeed* feed, const void* source, int64_t rows, int64_t K,
                    bool extra_ok) {
  if (feed == nullptr) return {};
  MatmulFeed::none(feed);
  const Weight* w = feed->weight;
  const int64_t most_rows = kind == FeedKind::kNorm ? decode_kernel_rows() : 1;
  if (w == nullptr || rows < 1 || rows > most_rows || w->cols() != K || !extra_ok ||
      !feeds_enabled(kind) || !gemv_tc_supported(*w))
    return {};
  const FeedForm form{
      w->bits, form_folds(*w), K,
      static_cast<uint4*>(workspace(feed->slot == 0 ? WorkspaceSlot::kFeed0 : WorkspaceSlot::kFeed1,
                                    static_cast<size_t>(rows) * form_bytes(w->bits, K)))};
  feed->source = source;
  feed->form = form.data;
  return form;
}

const uint4* fed_form(const MatmulFeed* feed, const void* x, const Weight& w) {
  if (feed == nullptr || feed->form == nullptr || feed->source != x || feed->weight == nullptr)
    return nullptr;
  const Weight& f = *feed->weight;
  const bool same = f.bits == w.bits && f.group_size == w.group_size && f.cols() == w.cols();
  return same ? static_cast<const uint4*>(feed->form) : nullptr;
}

}  // namespace strata::backend::cuda
