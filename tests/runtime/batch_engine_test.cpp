// Requests run together give exactly the tokens each gives alone: dense, hybrid and MoE models,
// greedy and seeded sampling (with penalties, logit bias and logprobs mixed in), batches of 1, 3
// and 17 with prompts of mixed lengths cut into several chunks, so that some requests prefill
// while others decode, more requests than slots (slots are reused), arrivals while others
// generate, cancellations (by the callback and while waiting), and too few KV blocks (preemption).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../model/tiny_configs.h"
#include "batch_check.h"
#include "prefix_check.h"
#include "formats/safetensors.h"
#include "model/golden.h"
#include "model/synthetic.h"
#include "runtime/engine.h"
#include "runtime/request_queue.h"

namespace strata {
namespace {

using runtime::Engine;
using runtime::EngineOptions;
using runtime::FinishReason;
using runtime::GenerationRequest;
using runtime::GenerationResult;
using test::check_batch;
using test::disk_options;
using test::nth_request;
using test::Outcome;
using test::recorder_for;
using test::run_alone;
using test::run_to_end;
using test::StateDir;
using test::system_prompt_requests;

struct Case {
  const char* model;
  EngineOptions::RunAhead run_ahead;
};

class BatchExactness : public ::testing::TestWithParam<Case> {
 protected:
  EngineOptions options(int64_t parallel) const {
    EngineOptions o;
    o.context_size = 96;
    o.prefill_chunk = 8;  // most prompts take several chunks
    o.step_tokens = 12;   // and wait for the budget when others prefill
    o.parallel = parallel;
    o.run_ahead = GetParam().run_ahead;
    return o;
  }
  static std::vector<int32_t> base() { return test::load_golden("llama").prompt; }
  // A fixture's name, or "q4_<family>": a random-weight checkpoint of a tiny config, every matrix
  // MLX 4-bit (the quantized decode kernels).
  std::unique_ptr<model::Model> load() {
    const std::string name = GetParam().model;
    if (name.rfind("q4_", 0) != 0) return model::load_model(test::test_fixture("models/" + name));
    Json config;
    if (name == "q4_dense") {
      config = test::tiny_llama_config(320, 32, 192);
    } else {
      config = test::tiny_hybrid_config(name == "q4_moe");
    }
    checkpoints_.push_back(model::make_synthetic_checkpoint(config, {.bits = 4, .group_size = 32}));
    const model::SyntheticCheckpoint& ck = checkpoints_.back();
    return model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors));
  }
  std::deque<model::SyntheticCheckpoint> checkpoints_;  // their memory outlives the models
};

TEST_P(BatchExactness, OneRequestIsItsSoloSelf) {
  Engine solo(load(), options(1));
  Engine batch(load(), options(4));
  check_batch(solo, batch, base(), 1, {});
}

TEST_P(BatchExactness, ThreeRequestsTogether) {
  Engine solo(load(), options(1));
  Engine batch(load(), options(3));
  check_batch(solo, batch, base(), 3, {});
}

TEST_P(BatchExactness, SeventeenRequestsArrivingWhileOthersRun) {
  Engine solo(load(), options(1));
  Engine batch(load(), options(17));
  check_batch(solo, batch, base(), 17, {0, 0, 0, 1, 2, 3, 5, 8, 8, 9, 13, 21, 21, 22, 30, 34, 40});
  // The CPU runs up to 8 sequences' decode tokens as one model step. (Running ahead, a step's
  // decodes are two groups: those queued before the picks are read, and the rest.)
  const runtime::EngineStats s = batch.stats();
  if (GetParam().run_ahead == EngineOptions::RunAhead::kOff) {
    EXPECT_GT(s.decode_tokens, 2 * s.decode_forwards)
        << s.decode_tokens << " tokens in " << s.decode_forwards;
  }
  EXPECT_GT(s.decode_tokens, s.decode_forwards)
      << s.decode_tokens << " tokens in " << s.decode_forwards;
}

TEST_P(BatchExactness, MoreRequestsThanSlotsReuseThem) {
  Engine solo(load(), options(1));
  Engine batch(load(), options(3));
  check_batch(solo, batch, base(), 17, {0, 0, 0, 0, 0, 2, 4});
}

// KV blocks of 8 tokens, a few more than one context holds, for 9 slots: the newest requests are
// preempted (their KV swapped to host memory, their blocks taken by older ones) and resumed again
// and again, and every request still gets exactly its solo tokens and logprobs.
TEST_P(BatchExactness, TooFewKvBlocksPreemptAndResumeExactly) {
  Engine solo(load(), options(1));
  EngineOptions o = options(9);
  o.kv_block_tokens = 8;
  o.kv_blocks = 14;  // one context of 96 tokens takes 12
  Engine batch(load(), o);
  check_batch(solo, batch, base(), 17, {0, 0, 0, 1, 2, 3, 5, 8});
  const runtime::EngineStats s = batch.stats();
  EXPECT_GT(s.preemptions, 0u);
  EXPECT_GT(s.resumptions, 0u);
  EXPECT_LE(s.resumptions, s.preemptions);  // one may end while out (its last pick was queued)
  EXPECT_EQ(s.swapped, 0);
  EXPECT_EQ(s.kv_blocks, 14);
  EXPECT_EQ(s.kv_blocks_free, 14);
}

// The prefix cache: requests whose prompts begin with an earlier prompt's whole chunks start from
// the cached state there and still give exactly a cold run's tokens and logprobs: the same prompt
// again, prompts sharing three chunks or one, and one sharing none; one at a time, then all at once.
TEST_P(BatchExactness, CachedPrefixesGiveTheColdTokens) {
  Engine cold(load(), options(1));
  EngineOptions o = options(3);
  o.kv_block_tokens = 8;  // a chunk (8 tokens) is a whole number of blocks
  o.prefix_cache = 6;
  Engine warm(load(), o);
  const int64_t V = cold.model().config().vocab_size;
  std::vector<int32_t> system;
  for (int i = 0; i < 24; ++i) system.push_back(static_cast<int32_t>((base()[i % base().size()] + 3 * i) % V));
  auto request = [&](int i, size_t shared, int tail) {
    GenerationRequest r = test::nth_request(base(), V, i);
    r.prompt.assign(system.begin(), system.begin() + static_cast<std::ptrdiff_t>(shared));
    for (int k = 0; k < tail; ++k) r.prompt.push_back(static_cast<int32_t>((i * 31 + k * 7 + 5) % V));
    return r;
  };
  const GenerationRequest requests[] = {request(0, 24, 5), request(1, 24, 9), request(0, 24, 5),
                                        request(3, 11, 6), request(4, 0, 13), request(5, 24, 8)};
  const int64_t want_cached[] = {0, 24, 24, 8, 0, 24};
  std::vector<Outcome> alone;
  for (const GenerationRequest& r : requests) alone.push_back(run_alone(cold, r));
  for (size_t i = 0; i < std::size(requests); ++i) {
    const auto w = run_to_end(warm, requests[i]);
    ASSERT_TRUE(w->result) << i << ": " << w->error;
    EXPECT_EQ(w->result->tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(w->result->cached_tokens, want_cached[i]) << "request " << i;
    test::expect_same_logprobs(w->logprobs, alone[i].logprobs, "request " + std::to_string(i));
  }
  std::vector<std::shared_ptr<test::Recorder>> together;
  for (const GenerationRequest& r : requests) {
    together.push_back(recorder_for(r));
    warm.add(together.back());
  }
  while (!warm.idle()) warm.step();
  for (size_t i = 0; i < std::size(requests); ++i) {
    ASSERT_TRUE(together[i]->result) << i;
    EXPECT_EQ(together[i]->result->tokens, alone[i].tokens) << "together, request " << i;
  }
  const runtime::EngineStats s = warm.stats();
  EXPECT_GT(s.prefix_hits, 0u);
  EXPECT_GT(s.prefix_misses, 0u);
  EXPECT_LE(s.prefix.device_entries, 6);
  EXPECT_EQ(s.slots_free, 3);
}

// The prefix cache's tiers (tests/prefix_check.h): host memory; disk across a restart; prompts cut
// where their messages begin (resuming in a partly filled block); the next turn prefilled ahead.
TEST_P(BatchExactness, PrefixesMovedToHostMemoryComeBackExactly) {
  test::check_host_tier([&] { return load(); }, [&](int64_t n) { return options(n); }, base());
}

TEST_P(BatchExactness, PromotionsShareTheBlocksOfAShorterPrefixInDeviceMemory) {
  test::check_shared_promotion([&] { return load(); }, [&](int64_t n) { return options(n); }, base());
}

TEST_P(BatchExactness, PrefixesOnDiskSurviveARestartExactly) {
  test::check_disk_restart([&] { return load(); }, [&](int64_t n) { return options(n); }, base());
}

TEST_P(BatchExactness, CompressedPrefixesOnDiskSurviveARestartExactly) {
  test::check_disk_restart(
      [&] { return load(); },
      [&](int64_t n) {
        EngineOptions o = options(n);
        o.prefix_cache_compress = true;
        return o;
      },
      base());
}

TEST_P(BatchExactness, PrefixesCachedAtMessageStartsGiveTheColdTokens) {
  test::check_message_starts([&] { return load(); }, [&](int64_t n) { return options(n); }, base(),
                             GetParam().run_ahead == EngineOptions::RunAhead::kOff ? 1 : 2);
}

TEST_P(BatchExactness, BackgroundPrefillsLeaveTheNextTurnAndGiveWay) {
  test::check_background_prefill([&] { return load(); }, [&](int64_t n) { return options(n); }, base());
}

// The prefix cache and preemption together: 12 requests in 9 slots with KV blocks for little more
// than one context, most sharing two chunks: cached prefixes give their blocks up, requests are
// swapped out and back in (shared blocks among theirs), and every request gets its cold tokens.
TEST_P(BatchExactness, CachedPrefixesUnderPreemptionGiveTheColdTokens) {
  Engine cold(load(), options(1));
  EngineOptions o = options(9);
  o.kv_block_tokens = 8;
  o.kv_blocks = 14;
  o.prefix_cache = 4;
  Engine warm(load(), o);
  const int64_t V = cold.model().config().vocab_size;
  std::vector<GenerationRequest> requests;
  std::vector<Outcome> alone;
  for (int i = 0; i < 12; ++i) {
    GenerationRequest r = test::nth_request(base(), V, i);
    const int shared = i % 4 == 3 ? 0 : 16;
    r.prompt.clear();
    for (int k = 0; k < shared; ++k) r.prompt.push_back(static_cast<int32_t>((base()[k % base().size()] + k) % V));
    for (int k = 0; k < 3 + i % 7; ++k) r.prompt.push_back(static_cast<int32_t>((i * 29 + k * 11 + 1) % V));
    alone.push_back(run_alone(cold, r));
    requests.push_back(std::move(r));
  }
  std::vector<std::shared_ptr<test::Recorder>> works;
  for (const GenerationRequest& r : requests) works.push_back(recorder_for(r));
  warm.add(works[0]);
  while (!warm.idle()) warm.step();  // its prefix is cached before the rest arrive
  for (size_t i = 1; i < works.size(); ++i) warm.add(works[i]);
  while (!warm.idle()) warm.step();
  for (size_t i = 0; i < works.size(); ++i) {
    ASSERT_TRUE(works[i]->result) << i << ": " << works[i]->error;
    EXPECT_EQ(works[i]->result->tokens, alone[i].tokens) << "request " << i;
  }
  const runtime::EngineStats s = warm.stats();
  EXPECT_GT(s.prefix_hits, 0u);
  EXPECT_GT(s.preemptions, 0u);
  EXPECT_EQ(s.swapped, 0);
}

// A preempted request waiting for blocks that cached prefixes hold: they give way, and it resumes.
// Two requests prefill side by side in blocks for one context; the newer is swapped out when the
// older needs a block, and the older goes on to cache prefixes up to 72 tokens (9 of the 12
// blocks), more than the newer can do without when it comes back.
TEST_P(BatchExactness, CachedPrefixesGiveWayToAPreemptedRequest) {
  Engine cold(load(), options(1));
  EngineOptions o = options(2);
  o.step_tokens = 16;  // both prompts' chunks in a step
  o.kv_block_tokens = 8;
  o.kv_blocks = 12;  // one context of 96 tokens
  o.prefix_cache = 8;
  Engine warm(load(), o);
  const int64_t V = cold.model().config().vocab_size;
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 2; ++i) {
    GenerationRequest r = test::nth_request(base(), V, 3 * i);
    r.prompt.clear();
    for (int k = 0; k < (i == 0 ? 80 : 40); ++k) r.prompt.push_back(static_cast<int32_t>((i * 17 + k * 5 + 1) % V));
    r.max_tokens = i == 0 ? 10 : 12;
    requests.push_back(r);
  }
  std::vector<std::shared_ptr<test::Recorder>> works;
  for (const GenerationRequest& r : requests) {
    works.push_back(recorder_for(r));
    warm.add(works.back());
  }
  for (int steps = 0; !warm.idle(); ++steps) {
    warm.step();
    ASSERT_LT(steps, 2000) << "the engine does not finish";
  }
  for (size_t i = 0; i < works.size(); ++i) {
    ASSERT_TRUE(works[i]->result) << i << ": " << works[i]->error;
    EXPECT_EQ(works[i]->result->tokens, run_alone(cold, requests[i]).tokens) << "request " << i;
  }
  EXPECT_GT(warm.stats().preemptions, 0u);
}

// Prefixes pushed out of memory (one device entry, no host memory) move to disk, and a prompt that
// begins with one is served from its file, exactly.
TEST_P(BatchExactness, PrefixesMovedToDiskComeBackExactly) {
  Engine cold(load(), options(1));
  const std::vector<GenerationRequest> requests = system_prompt_requests(base(), cold.model().config().vocab_size);
  StateDir dir;
  Engine warm(load(), disk_options(options(2), dir.path(), 1));
  for (size_t i = 0; i < std::size(requests); ++i) {
    const auto w = run_to_end(warm, requests[i]);
    ASSERT_TRUE(w->result) << i << ": " << w->error;
    EXPECT_EQ(w->result->tokens, run_alone(cold, requests[i]).tokens) << "request " << i;
    if (i >= 2) {
      EXPECT_EQ(w->result->cached_tokens, 24) << i;
      EXPECT_NE(w->result->cached_tier, runtime::CacheTier::kDevice) << i;  // the other prompt took the one slot
    }
  }
  const runtime::PrefixCacheStats s = warm.stats().prefix;
  EXPECT_EQ(s.host_entries, 0);
  EXPECT_LE(s.device_entries, 1);
  EXPECT_EQ(s.hits[static_cast<size_t>(runtime::CacheTier::kDevice)] +
                s.hits[static_cast<size_t>(runtime::CacheTier::kDisk)],
            3u);
  EXPECT_GT(s.evictions[static_cast<size_t>(runtime::CacheTier::kDevice)], 0u);
}

// A file corrupted on disk (a flipped byte) is found when it is read: it is removed, and the prompt
// runs cold, with the cold tokens; the engine goes on serving.
TEST_P(BatchExactness, ACorruptPrefixFileIsRemovedAndThePromptRunsCold) {
  Engine cold(load(), options(1));
  const std::vector<GenerationRequest> requests = system_prompt_requests(base(), cold.model().config().vocab_size);
  StateDir dir;
  const EngineOptions o = disk_options(options(2), dir.path(), 4);
  {
    Engine first(load(), o);
    (void)run_alone(first, requests[0]);
  }
  ASSERT_EQ(dir.files().size(), 1u);
  {
    std::fstream f(dir.files()[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(std::filesystem::file_size(dir.files()[0]) / 2));
    const int c = f.get();
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(dir.files()[0]) / 2));
    f.put(static_cast<char>(c ^ 0x01));
  }
  auto second = std::make_unique<Engine>(load(), o);
  for (size_t i : {2, 4}) {
    const auto w = run_to_end(*second, requests[i]);
    ASSERT_TRUE(w->result) << i << ": " << w->error;
    EXPECT_EQ(w->result->tokens, run_alone(cold, requests[i]).tokens) << "request " << i;
    // The first runs cold (and caches its prefix anew); the second starts from that.
    EXPECT_EQ(w->result->cached_tokens, i == 2 ? 0 : 24) << i;
  }
  EXPECT_EQ(second->stats().prefix.disk_read_failures, 1u);
  second.reset();  // a restart: the file written anew is found
  second = std::make_unique<Engine>(load(), o);
  EXPECT_EQ(second->stats().prefix.disk_entries, 1);
}

// Requests sharing a prefix arrive together while it is being written to disk: every one gets its
// cold tokens, and the file it leaves serves the next process.
TEST_P(BatchExactness, RequestsSharingAPrefixWhileItIsWrittenAreExact) {
  Engine cold(load(), options(1));
  const int64_t V = cold.model().config().vocab_size;
  std::vector<GenerationRequest> requests = system_prompt_requests(base(), V);
  StateDir dir;
  const EngineOptions o = disk_options(options(5), dir.path(), 4);
  {
    Engine warm(load(), o);
    std::vector<std::shared_ptr<test::Recorder>> works;
    for (const GenerationRequest& r : requests) {
      works.push_back(recorder_for(r));
      warm.add(works.back());
      warm.step();  // arrivals while the first prefixes are recorded and written
    }
    while (!warm.idle()) warm.step();
    for (size_t i = 0; i < works.size(); ++i) {
      ASSERT_TRUE(works[i]->result) << i << ": " << works[i]->error;
      EXPECT_EQ(works[i]->result->tokens, run_alone(cold, requests[i]).tokens) << "request " << i;
    }
  }
  Engine next(load(), o);
  const runtime::GenerationResult r = next.generate(requests[4]);
  EXPECT_EQ(r.tokens, run_alone(cold, requests[4]).tokens);
  EXPECT_EQ(r.cached_tokens, 24);
  EXPECT_EQ(r.cached_tier, runtime::CacheTier::kDisk);
}

// A full disk (a file-size limit, in a child process so that the limit stays there: this test run
// again, by exec, as the child): every write fails cleanly, the prefixes stay in memory, and every
// request gets its cold tokens.
TEST_P(BatchExactness, AFullDiskFailsWritesAndServingGoesOn) {
  StateDir dir;
  if (std::getenv("STRATA_TEST_FULL_DISK") == nullptr) {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string filter = fmt::format("--gtest_filter={}.{}", t->test_suite_name(), t->name());
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // only async-signal-safe calls until exec
      ::setenv("STRATA_TEST_FULL_DISK", "1", 1);
      ::signal(SIGXFSZ, SIG_IGN);
      rlimit limit{};
      ::getrlimit(RLIMIT_FSIZE, &limit);
      limit.rlim_cur = 512;
      ::setrlimit(RLIMIT_FSIZE, &limit);
      ::execl("/proc/self/exe", "test_runtime", filter.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's checks failed (its output is above)";
    return;
  }
  Engine cold(load(), options(1));
  const std::vector<GenerationRequest> requests = system_prompt_requests(base(), cold.model().config().vocab_size);
  Engine warm(load(), disk_options(options(2), dir.path(), 8));
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto w = run_to_end(warm, requests[i]);
    ASSERT_TRUE(w->result) << i << ": " << w->error;
    EXPECT_EQ(w->result->tokens, run_alone(cold, requests[i]).tokens) << "request " << i;
  }
  const runtime::EngineStats s = warm.stats();
  EXPECT_GT(s.prefix.disk_write_failures, 0u);
  EXPECT_EQ(s.prefix.disk_writes, 0u);
  EXPECT_EQ(s.prefix.disk_entries, 0);
  EXPECT_EQ(s.prefix_hits, 3u);  // from device memory
  EXPECT_TRUE(dir.files().empty());  // no temporary left behind
}

// A prefix in device memory within one chunk of a longer one in host memory is taken instead:
// running that chunk costs less than copying the whole longer prefix in (and the blocks it takes).
TEST_P(BatchExactness, ADevicePrefixWithinAChunkOfALongerHostOneIsTaken) {
  Engine cold(load(), options(1));
  const int64_t V = cold.model().config().vocab_size;
  EngineOptions o = options(1);
  o.kv_block_tokens = 8;
  o.prefix_cache = 3;
  o.prefix_cache_host_bytes = size_t{64} << 20;
  Engine warm(load(), o);
  auto prompt = [&](int seed, int n) {
    GenerationRequest r = test::nth_request(base(), V, 2);
    r.prompt.clear();
    for (int k = 0; k < n; ++k) r.prompt.push_back(static_cast<int32_t>((seed * 53 + k * 11 + 7) % V));
    return r;
  };
  (void)run_alone(warm, prompt(1, 40));  // cached at 8, 16, 24, 32: 16, 24, 32 in device memory
  GenerationRequest shorter = prompt(1, 30);
  shorter.prompt.back() = static_cast<int32_t>((shorter.prompt.back() + 1) % V);
  EXPECT_EQ(warm.generate(shorter).cached_tokens, 24);  // 24 used last
  (void)run_alone(warm, prompt(2, 20));  // two prefixes of its own push 16, then 32, to host memory
  GenerationRequest longer = prompt(1, 40);
  for (int k = 0; k < 4; ++k) longer.prompt.push_back(static_cast<int32_t>((k * 3 + 1) % V));
  const GenerationResult r = warm.generate(longer);
  EXPECT_EQ(r.tokens, run_alone(cold, longer).tokens);
  EXPECT_EQ(r.cached_tokens, 24);
  EXPECT_EQ(r.cached_tier, runtime::CacheTier::kDevice);
  EXPECT_GT(warm.stats().prefix.host_entries, 0);
}

// Cached prefixes that share all their blocks (two cuts in one block, 33 and 37) give them up to a
// prompt that needs every block of the pool: demoting either alone frees none, both free the block.
TEST_P(BatchExactness, PrefixesSharingAllTheirBlocksGiveThemUp) {
  Engine cold(load(), options(1));
  const int64_t V = cold.model().config().vocab_size;
  EngineOptions o = options(1);
  o.kv_block_tokens = 8;
  o.kv_blocks = 12;  // one context of 96 tokens
  o.prefix_cache = 16;
  Engine warm(load(), o);
  GenerationRequest first = test::nth_request(base(), V, 3);
  first.prompt.resize(40);
  for (int k = 0; k < 40; ++k) first.prompt[static_cast<size_t>(k)] = static_cast<int32_t>((k * 11 + 7) % V);
  first.boundaries = {33, 37};
  first.max_tokens = 4;
  EXPECT_EQ(run_alone(warm, first).tokens, run_alone(cold, first).tokens);
  GenerationRequest long_one = test::nth_request(base(), V, 5);
  long_one.prompt.clear();
  for (int k = 0; k < 90; ++k) long_one.prompt.push_back(static_cast<int32_t>((k * 13 + 1) % V));
  long_one.max_tokens = 5;
  auto w = recorder_for(long_one);
  warm.add(w);
  for (int steps = 0; !warm.idle(); ++steps) {
    warm.step();
    ASSERT_LT(steps, 500) << "the long prompt waits for blocks forever";
  }
  ASSERT_TRUE(w->result) << w->error;
  EXPECT_EQ(w->result->tokens, run_alone(cold, long_one).tokens);
}

TEST_P(BatchExactness, CancellationsLeaveTheOthersExact) {
  Engine solo(load(), options(1));
  Engine batch(load(), options(3));
  test::check_cancellations(solo, batch, base());
}

INSTANTIATE_TEST_SUITE_P(Models, BatchExactness,
                         ::testing::Values(Case{"llama", EngineOptions::RunAhead::kOff},
                                           Case{"llama", EngineOptions::RunAhead::kOn},
                                           Case{"qwen35", EngineOptions::RunAhead::kOff},
                                           Case{"qwen35", EngineOptions::RunAhead::kOn},
                                           Case{"qwen35_moe", EngineOptions::RunAhead::kOff},
                                           Case{"qwen35_moe", EngineOptions::RunAhead::kOn},
                                           Case{"q4_dense", EngineOptions::RunAhead::kOff},
                                           Case{"q4_hybrid", EngineOptions::RunAhead::kOff},
                                           Case{"q4_moe", EngineOptions::RunAhead::kOff}),
                         [](const auto& info) {
                           return std::string(info.param.model) +
                                  (info.param.run_ahead == EngineOptions::RunAhead::kOn ? "_ahead"
                                                                                        : "_plain");
                         });

// An invalid request fails alone: the others in its step are untouched.
TEST(BatchEngine, AnInvalidRequestFailsAloneAndFreesNothingItDidNotTake) {
  EngineOptions o;
  o.context_size = 64;
  o.parallel = 2;
  Engine engine(model::load_model(test::test_fixture("models/llama")), o);
  GenerationRequest good;
  good.prompt = {1, 2, 3};
  good.max_tokens = 4;
  good.sampling.temperature = 0.0f;
  GenerationRequest bad = good;
  bad.prompt.assign(80, 1);  // longer than the context
  auto a = recorder_for(good), b = recorder_for(bad), c = recorder_for(good);
  for (auto& w : {a, b, c}) engine.add(w);
  while (!engine.idle()) engine.step();
  ASSERT_TRUE(a->result && c->result);
  EXPECT_EQ(a->result->tokens, c->result->tokens);
  EXPECT_FALSE(b->result);
  EXPECT_NE(b->error.find("context size"), std::string::npos) << b->error;
  EXPECT_EQ(engine.stats().failed, 1u);
  EXPECT_EQ(engine.stats().slots_free, 2);
}

// The queue's thread runs submitted requests together and close() cancels what is left.
TEST(RequestQueue, RunsSubmittedRequestsAndClosesCleanly) {
  EngineOptions o;
  o.context_size = 64;
  o.parallel = 3;
  Engine solo(model::load_model(test::test_fixture("models/qwen35")),
              EngineOptions{.context_size = 64});
  Engine engine(model::load_model(test::test_fixture("models/qwen35")), o);
  const std::vector<int32_t> base = test::load_golden("llama").prompt;
  std::vector<std::shared_ptr<test::Recorder>> works;
  {
    runtime::RequestQueue queue(engine);
    for (int i = 0; i < 5; ++i) {
      works.push_back(recorder_for(nth_request(base, engine.model().config().vocab_size, i)));
      ASSERT_TRUE(queue.submit(works.back()));
    }
    queue.close(std::chrono::seconds(60));
    EXPECT_FALSE(queue.submit(recorder_for(nth_request(base, 10, 0))));
    EXPECT_EQ(queue.stats().finished, 5u);
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(works[i]->result) << i;
    EXPECT_EQ(works[i]->result->tokens,
              run_alone(solo, nth_request(base, engine.model().config().vocab_size, i)).tokens)
        << i;
  }
}

}  // namespace
}  // namespace strata
