// How the CUDA kernels run where there is a choice kept for comparisons and tuning: set at start
// from the settings (core/settings.h: cuda_pdl, cuda_gemv, gemv_row_warps, gdn_split, cuda_feeds,
// batch_invariant, gemv_staged_rows)
// and read by the kernels' launch code.
//
// Process-wide, unlike the settings passed down in load and engine options: these are read deep
// under the op interface (every kernel launch, each decode matmul's shape), which no options reach
// without an argument threaded through every op, and they choose how a kernel runs, not what a
// model is, so they are the same for every model of a process. Set it before the first op runs;
// tests change it between ops on their one thread. (When ops take a per-model device context, this
// can move into it.)
#pragma once

namespace strata {
struct Settings;  // core/settings.h
}  // namespace strata

namespace strata::backend {

struct Tuning {
  bool pdl = true;                // Programmatic Dependent Launch, from compute capability 9.0
  bool gemv_tensor_cores = true;  // the decode matmul on integer tensor cores (false: CUDA cores)
  int gemv_row_warps = 0;         // that matmul's row groups per block: 1, 2, 4, 8; 0: per shape
  int gdn_split = 0;  // the one-token GDN kernel's split: 1, 2, 4, 8 where it fits; 0: its own
  int feeds = 15;     // bit (1 << cuda::FeedKind) set: that producer writes a matmul feed
  // Decode batches: kernels that give every row the one-row kernel's bits (true), or, beyond 24
  // rows, the prefill GEMM (false: faster there, not batch-invariant).
  bool batch_invariant = true;
  // Decode batches of at least this many rows take the staged multi-row matmul
  // (gemv_tc_staged.cu), fewer the one that reads from global memory (gemv_tc_rows.cu); both give
  // each row the one-row kernel's bits. 0: never the staged one.
  int gemv_staged_rows = 17;
  // How that kernel splits its work, for tests: 0 per shape, 1 one k slice a block (their sums
  // added by a second launch), 2 every slice in each block.
  int gemv_staged_split = 0;
  // ... and the tokens a block takes: 16, 32 or 64; 0 per batch.
  int gemv_staged_tokens = 0;
};

namespace detail {
// In the header: strata_cuda reads it and does not link strata_backend, so an inline variable
// gives both one object.
inline Tuning current_tuning;
}  // namespace detail

inline void set_tuning(const Tuning& tuning) { detail::current_tuning = tuning; }
inline const Tuning& tuning() { return detail::current_tuning; }

// Sets a tuning for a scope (a test's) and puts the one before back at its end, however it ends.
class ScopedTuning {
 public:
  explicit ScopedTuning(const Tuning& tuning) : saved_(backend::tuning()) { set_tuning(tuning); }
  ~ScopedTuning() { set_tuning(saved_); }
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  Tuning saved_;
};

// The settings' cuda_pdl, cuda_gemv, gemv_row_warps, gdn_split, cuda_feeds, batch_invariant and
// gemv_staged_rows.
Tuning tuning_from(const Settings& settings);

}  // namespace strata::backend
