// On the GPU, requests run together give exactly the tokens each gives alone (greedy and seeded
// sampling, dense, hybrid and MoE fixtures, and random-weight MLX 4-bit checkpoints whose matrices
// take the tensor-core decode kernels, one row and many, or the CUDA-core ones), with run-ahead on as it is by default
// there: batches of 3 and 17 with prompts cut into several chunks, arrivals while others run, slot
// reuse, and cancellations.
#include <gtest/gtest.h>

#include <deque>

#include "../model/tiny_configs.h"
#include "backend/memory.h"
#include "backend/tuning.h"
#include "batch_check.h"
#include "prefix_check.h"
#include "formats/safetensors.h"
#include "model/golden.h"
#include "model/synthetic.h"
#include "runtime/engine.h"

namespace strata {
namespace {

class CudaBatchExactness : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!backend::device_available(Device::kCuda)) GTEST_SKIP() << "no CUDA device";
  }
  static runtime::EngineOptions options(int64_t parallel) {
    runtime::EngineOptions o;
    o.context_size = 96;
    o.prefill_chunk = 8;
    o.step_tokens = 12;
    o.parallel = parallel;
    return o;
  }
  // A fixture's name, or "q4_<family>": a random-weight MLX 4-bit checkpoint (groups of 32 and 64)
  // of a tiny config whose widths are whole k-tiles of the tensor-core kernels (256 at 4 bits).
  std::unique_ptr<model::Model> load() {
    model::LoadOptions o;
    o.device = Device::kCuda;
    const std::string name = GetParam();
    if (name.rfind("q4_", 0) != 0) return model::load_model(test::test_fixture("models/" + name), o);
    Json config;
    if (name == "q4_dense" || name == "q4_narrow") {
      // q4_narrow: 128 wide, less than a k-tile: the CUDA-core decode kernels instead.
      config = name == "q4_dense" ? test::tiny_llama_config(512, 64, 512) : test::tiny_llama_config(512, 32, 192);
    } else {
      config = name == "q4_moe" ? test::tiny_hybrid_tiles_config(true, 256) : test::tiny_hybrid_tiles_config(false, 512);
    }
    checkpoints_.push_back(
        model::make_synthetic_checkpoint(config, {.bits = 4, .group_size = name == "q4_dense" ? 32 : 64}));
    const model::SyntheticCheckpoint& ck = checkpoints_.back();
    return model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), o);
  }
  std::deque<model::SyntheticCheckpoint> checkpoints_;  // their memory outlives the models
};

// The models batch as many sequences as their kernels keep exact: all of a step's (up to 64) where
// every matrix takes the tensor-core kernels (a MoE's routed experts take their token kernels and
// its float router 8 rows at a time), else 8.
TEST_P(CudaBatchExactness, DecodeBatchSize) {
  const std::string name = GetParam();
  EXPECT_EQ(load()->max_decode_batch(), name == "q4_dense" || name == "q4_hybrid" || name == "q4_moe" ? 64 : 8);
}

TEST_P(CudaBatchExactness, ThreeRequestsTogether) {
  runtime::Engine solo(load(), options(1));
  runtime::Engine batch(load(), options(3));
  test::check_batch(solo, batch, test::load_golden("llama").prompt, 3, {});
}

TEST_P(CudaBatchExactness, SeventeenRequestsArrivingWhileOthersRunInFewerSlots) {
  runtime::Engine solo(load(), options(1));
  runtime::Engine batch(load(), options(9));
  test::check_batch(solo, batch, test::load_golden("llama").prompt, 17,
                    {0, 0, 0, 1, 2, 3, 5, 8, 8, 9, 13, 21});
}

// Too few KV blocks (of 8 tokens; a few more than one context) for 9 slots: the newest requests are
// preempted, their KV swapped to host memory and back into other blocks, and all stay exact.
TEST_P(CudaBatchExactness, TooFewKvBlocksPreemptAndResumeExactly) {
  runtime::Engine solo(load(), options(1));
  runtime::EngineOptions o = options(9);
  o.kv_block_tokens = 8;
  o.kv_blocks = 14;
  runtime::Engine batch(load(), o);
  test::check_batch(solo, batch, test::load_golden("llama").prompt, 17, {0, 0, 0, 1, 2, 3, 5, 8});
  EXPECT_GT(batch.stats().preemptions, 0u);
  EXPECT_EQ(batch.stats().kv_blocks_free, 14);
}

// The batch_invariant tuning off (the fast option): decode batches of more than 24 sequences take
// the GEMM, so tokens may differ from solo runs after the first; every request still runs to its
// length, its first token (from its own prefill) is its solo one, and the model batches up to 64.
TEST_P(CudaBatchExactness, NotInvariantBatchesRunWideAndComplete) {
  const std::string name = GetParam();
  if (name != "q4_dense" && name != "q4_hybrid" && name != "q4_moe") GTEST_SKIP() << "batches of 8 at most";
  backend::Tuning t = backend::tuning();
  t.batch_invariant = false;
  const backend::ScopedTuning scope(t);
  runtime::Engine solo(load(), options(1));
  runtime::Engine batch(load(), options(32));
  const std::vector<int32_t> base = test::load_golden("llama").prompt;
  const int64_t V = solo.model().config().vocab_size;
  std::vector<std::shared_ptr<test::Recorder>> works;
  for (int i = 0; i < 32; ++i) {
    works.push_back(test::recorder_for(test::nth_request(base, V, i)));
    batch.add(works.back());
  }
  while (!batch.idle()) batch.step();
  for (int i = 0; i < 32; ++i) {
    const test::Outcome alone = test::run_alone(solo, test::nth_request(base, V, i));
    ASSERT_TRUE(works[i]->result) << i << ": " << works[i]->error;
    EXPECT_EQ(works[i]->result->tokens.size(), alone.tokens.size()) << i;
    EXPECT_EQ(works[i]->result->tokens.front(), alone.tokens.front()) << i;
  }
  EXPECT_EQ(batch.model().max_decode_batch(), 64);
  const runtime::EngineStats s = batch.stats();
  EXPECT_GT(s.decode_tokens, s.decode_forwards) << s.decode_tokens << " in " << s.decode_forwards;
}

// The prefix cache on the GPU: prompts sharing whole chunks with earlier ones start from the cached
// state (shared KV blocks, the recurrent state copied back) and give exactly the cold tokens.
TEST_P(CudaBatchExactness, CachedPrefixesGiveTheColdTokens) {
  runtime::Engine cold(load(), options(1));
  runtime::EngineOptions o = options(3);
  o.kv_block_tokens = 8;
  o.prefix_cache = 6;
  runtime::Engine warm(load(), o);
  const std::vector<int32_t> base = test::load_golden("llama").prompt;
  const int64_t V = cold.model().config().vocab_size;
  auto request = [&](int i, int shared, int tail) {
    runtime::GenerationRequest r = test::nth_request(base, V, i);
    r.prompt.clear();
    for (int k = 0; k < shared; ++k) r.prompt.push_back(static_cast<int32_t>((base[k % base.size()] + 3 * k) % V));
    for (int k = 0; k < tail; ++k) r.prompt.push_back(static_cast<int32_t>((i * 31 + k * 7 + 5) % V));
    return r;
  };
  const runtime::GenerationRequest requests[] = {request(0, 24, 5), request(1, 24, 9), request(0, 24, 5),
                                                 request(3, 11, 6), request(5, 24, 8)};
  const int64_t want_cached[] = {0, 24, 24, 8, 24};
  for (size_t i = 0; i < std::size(requests); ++i) {
    const test::Outcome alone = test::run_alone(cold, requests[i]);
    const auto w = test::run_to_end(warm, requests[i]);
    ASSERT_TRUE(w->result) << i << ": " << w->error;
    EXPECT_EQ(w->result->tokens, alone.tokens) << "request " << i;
    EXPECT_EQ(w->result->cached_tokens, want_cached[i]) << "request " << i;
  }
}

// The prefix cache's tiers on the GPU (tests/prefix_check.h): host memory; disk across a restart;
// prompts cut where their messages begin (resuming in a partly filled block, copied on the device);
// the next turn prefilled ahead. Each against cold runs of the same requests.
TEST_P(CudaBatchExactness, PrefixesMovedToHostMemoryComeBackExactly) {
  test::check_host_tier([&] { return load(); }, options, test::load_golden("llama").prompt);
}

TEST_P(CudaBatchExactness, PromotionsShareTheBlocksOfAShorterPrefixInDeviceMemory) {
  test::check_shared_promotion([&] { return load(); }, options, test::load_golden("llama").prompt);
}

TEST_P(CudaBatchExactness, PrefixesOnDiskSurviveARestartExactly) {
  test::check_disk_restart([&] { return load(); }, options, test::load_golden("llama").prompt);
}

TEST_P(CudaBatchExactness, CompressedPrefixesOnDiskSurviveARestartExactly) {
  test::check_disk_restart(
      [&] { return load(); },
      [&](int64_t n) {
        runtime::EngineOptions o = options(n);
        o.prefix_cache_compress = true;
        return o;
      },
      test::load_golden("llama").prompt);
}

TEST_P(CudaBatchExactness, PrefixesCachedAtMessageStartsGiveTheColdTokens) {
  test::check_message_starts([&] { return load(); }, options, test::load_golden("llama").prompt, 2);
}

TEST_P(CudaBatchExactness, BackgroundPrefillsLeaveTheNextTurnAndGiveWay) {
  test::check_background_prefill([&] { return load(); }, options, test::load_golden("llama").prompt);
}

TEST_P(CudaBatchExactness, CancellationsLeaveTheOthersExact) {
  runtime::Engine solo(load(), options(1));
  runtime::Engine batch(load(), options(3));
  test::check_cancellations(solo, batch, test::load_golden("llama").prompt);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaBatchExactness,
                         ::testing::Values("llama", "qwen35", "qwen35_moe", "q4_dense", "q4_hybrid", "q4_moe",
                                           "q4_narrow"));

}  // namespace
}  // namespace strata
