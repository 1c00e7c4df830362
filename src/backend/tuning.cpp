// The CUDA kernels' switches, from the settings registry.
#include "backend/tuning.h"

#include "core/settings.h"

namespace strata::backend {

Tuning tuning_from(const Settings& settings) {
  Tuning t;
  t.pdl = settings.cuda_pdl;
  t.gemv_tensor_cores = settings.cuda_gemv == "tensor-cores";
  t.gemv_row_warps = static_cast<int>(settings.gemv_row_warps);
  t.gdn_split = static_cast<int>(settings.gdn_split);
  t.feeds = static_cast<int>(settings.cuda_feeds);
  t.batch_invariant = settings.batch_invariant;
  t.gemv_staged_rows = static_cast<int>(settings.gemv_staged_rows);
  return t;
}

}  // namespace strata::backend
