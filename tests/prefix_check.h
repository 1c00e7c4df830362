// The prefix cache's tiers checked the same way on the CPU (tests/runtime) and the GPU (tests/cuda):
// each tier (device, host, disk after a restart), prompts cut where their messages begin, and the
// next turn prefilled in the background, each against cold runs of the same requests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "batch_check.h"
#include "runtime/engine.h"

namespace strata::test {

// A fresh model to run (the same weights each call), and engine options for n slots.
using ModelLoader = std::function<std::unique_ptr<model::Model>()>;
using OptionsFor = std::function<EngineOptions(int64_t)>;

// The disk tier (runtime/state_store.h): a directory of its own per test, removed after.
class StateDir {
 public:
  StateDir() {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(t->test_suite_name()) + "_" + t->name();
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = std::filesystem::path(::testing::TempDir()) / ("strata_state_" + name);
    std::filesystem::remove_all(path_);
  }
  ~StateDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  // The state files under it.
  std::vector<std::filesystem::path> files() const {
    std::vector<std::filesystem::path> out;
    if (!std::filesystem::exists(path_)) return out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(path_))
      if (e.is_regular_file()) out.push_back(e.path());
    return out;
  }

 private:
  std::filesystem::path path_;
};

// `o` with KV blocks of 8 tokens, `entries` prefixes in device memory and a disk tier of 64 MiB in
// `dir`.
inline EngineOptions disk_options(EngineOptions o, const std::filesystem::path& dir,
                                  int64_t entries) {
  o.kv_block_tokens = 8;
  o.prefix_cache = entries;
  o.state_dir = dir;
  o.prefix_cache_disk_bytes = uint64_t{64} << 20;
  return o;
}

// Five prompts, two system prompts of 24 tokens each with a user turn of its own.
inline std::vector<GenerationRequest> system_prompt_requests(const std::vector<int32_t>& base, int64_t V) {
  auto request = [&](int i, int system, int tail) {
    GenerationRequest r = nth_request(base, V, i);
    r.prompt.clear();
    for (int k = 0; k < 24; ++k) r.prompt.push_back(static_cast<int32_t>((system * 37 + k * 13 + 2) % V));
    for (int k = 0; k < tail; ++k) r.prompt.push_back(static_cast<int32_t>((i * 31 + k * 7 + 5) % V));
    return r;
  };
  return {request(0, 1, 5), request(1, 2, 6), request(2, 1, 9), request(4, 2, 3), request(5, 1, 4)};
}

// A conversation's prompts: a system message and turns, each message opening at a boundary that
// is not a whole number of KV blocks (8 tokens) nor of prefill chunks (8).
struct Conversation {
  std::vector<int32_t> tokens;
  std::vector<int64_t> starts;  // where each message begins
  GenerationRequest request(const GenerationRequest& like, size_t messages) const {
    GenerationRequest r = like;
    const int64_t end = messages < starts.size() ? starts[messages] : static_cast<int64_t>(tokens.size());
    r.prompt.assign(tokens.begin(), tokens.begin() + end);
    r.boundaries.assign(starts.begin() + 1, starts.begin() + static_cast<std::ptrdiff_t>(std::min(messages, starts.size())));
    return r;
  }
};

inline Conversation conversation(int64_t V, int seed) {
  Conversation c;
  for (const int length : {19, 6, 13, 5, 11}) {
    c.starts.push_back(static_cast<int64_t>(c.tokens.size()));
    for (int k = 0; k < length; ++k) c.tokens.push_back(static_cast<int32_t>((seed * 41 + c.tokens.size() * 17 + 3) % V));
  }
  return c;
}

// The prefix cache's host tier: with one device entry, prefixes move to host memory as others are
// cached; a prompt that begins with one takes fresh blocks, gets the bytes back and gives its cold
// tokens. With no host memory they are dropped instead, and prompts run cold, with the same tokens.
inline void check_host_tier(const ModelLoader& load, const OptionsFor& options, const std::vector<int32_t>& base) {
  Engine cold(load(), options(1));
  const std::vector<GenerationRequest> requests = system_prompt_requests(base, cold.model().config().vocab_size);
  std::vector<Outcome> alone;
  for (const GenerationRequest& r : requests) alone.push_back(run_alone(cold, r));
  for (size_t host_bytes : {size_t{64} << 20, size_t{0}}) {
    EngineOptions o = options(2);
    o.kv_block_tokens = 8;
    o.prefix_cache = 1;
    o.prefix_cache_host_bytes = host_bytes;
    Engine warm(load(), o);
    for (size_t i = 0; i < std::size(requests); ++i) {
      const auto w = run_to_end(warm, requests[i]);
      ASSERT_TRUE(w->result) << i << ": " << w->error;
      EXPECT_EQ(w->result->tokens, alone[i].tokens) << "host bytes " << host_bytes << ", request " << i;
      if (host_bytes > 0 && i >= 2) {
        EXPECT_EQ(w->result->cached_tokens, 24) << i;
        EXPECT_EQ(w->result->cached_tier, runtime::CacheTier::kHost) << i;
      }
    }
    const runtime::EngineStats s = warm.stats();
    if (host_bytes > 0) {
      EXPECT_EQ(s.prefix.hits[static_cast<size_t>(runtime::CacheTier::kHost)], 3u);
      EXPECT_GT(s.prefix.host_entries, 0);
      EXPECT_GT(s.prefix.host_bytes, 0u);
    } else {
      EXPECT_EQ(s.prefix.hits[static_cast<size_t>(runtime::CacheTier::kHost)], 0u);
      EXPECT_EQ(s.prefix.host_entries, 0);
    }
    EXPECT_LE(s.prefix.device_entries, 1);
  }
}

// The prefix cache's disk tier keeps each prompt's longest prefix across a restart: a new engine on
// the same directory serves the other prompts that begin with it from their files, exactly as
// cold runs; the hits after the first of each come from device memory again (promoted).
inline void check_disk_restart(const ModelLoader& load, const OptionsFor& options, const std::vector<int32_t>& base) {
  Engine cold(load(), options(1));
  const std::vector<GenerationRequest> requests = system_prompt_requests(base, cold.model().config().vocab_size);
  std::vector<Outcome> alone;
  for (const GenerationRequest& r : requests) alone.push_back(run_alone(cold, r));
  StateDir dir;
  // Eight device entries: nothing moves down, only the longest prefixes are written.
  const EngineOptions o = disk_options(options(2), dir.path(), 8);
  {
    Engine first(load(), o);
    for (size_t i : {0, 1}) EXPECT_EQ(run_alone(first, requests[i]).tokens, alone[i].tokens) << i;
  }  // (its writes land before it goes)
  EXPECT_EQ(dir.files().size(), 2u);  // each prompt's longest prefix: its 24-token system prompt
  Engine second(load(), o);
  EXPECT_EQ(second.stats().prefix.disk_entries, 2);
  for (size_t i = 2; i < std::size(requests); ++i) {
    const auto w = run_to_end(second, requests[i]);
    ASSERT_TRUE(w->result) << i << ": " << w->error;
    EXPECT_EQ(w->result->tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(w->result->cached_tokens, 24) << i;
    EXPECT_EQ(w->result->cached_tier, i < 4 ? runtime::CacheTier::kDisk : runtime::CacheTier::kDevice) << i;
  }
  const runtime::PrefixCacheStats s = second.stats().prefix;
  EXPECT_EQ(s.hits[static_cast<size_t>(runtime::CacheTier::kDisk)], 2u);
  EXPECT_EQ(s.disk_reads, 2u);
  EXPECT_EQ(s.disk_read_failures, 0u);
}

// Prompts cut at their messages' starts: a later prompt that shares the first messages resumes at
// the last shared start (a partly filled KV block: it takes a copy of it) and gets exactly its
// cold tokens; two such prompts at once share the cached blocks and each copies the partial one.
inline void check_message_starts(const ModelLoader& load, const OptionsFor& options, const std::vector<int32_t>& base, int like_index) {
  Engine cold(load(), options(1));
  const int64_t V = cold.model().config().vocab_size;
  const Conversation c = conversation(V, 1);
  const GenerationRequest like = nth_request(base, V, like_index);
  std::vector<GenerationRequest> requests = {c.request(like, 3), c.request(like, 4), c.request(like, 5)};
  requests.push_back(requests[2]);
  requests[3].prompt.back() = static_cast<int32_t>((requests[3].prompt.back() + 1) % V);  // another last token
  EngineOptions o = options(3);
  o.kv_block_tokens = 8;
  o.prefix_cache = 16;
  Engine warm(load(), o);
  auto first = run_to_end(warm, requests[0]);
  std::vector<std::shared_ptr<Recorder>> works = {first};
  for (size_t i = 1; i < requests.size(); ++i) {
    works.push_back(recorder_for(requests[i]));
    warm.add(works.back());
  }
  while (!warm.idle()) warm.step();
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(works[i]->result) << i << ": " << works[i]->error;
    EXPECT_EQ(works[i]->result->tokens, run_alone(cold, requests[i]).tokens) << "request " << i;
  }
  // The first prompt (38 tokens, messages starting at 19 and 25) is cut at 8, 16, 19, 25 and 33;
  // the second (43 tokens, a message at 38 too) the same way, so it resumes at 33, a partly filled
  // block; the others at 33 or later (38, once the second left it).
  EXPECT_EQ(works[1]->result->cached_tokens, 33);
  for (size_t i : {2, 3}) EXPECT_GE(works[i]->result->cached_tokens, 33) << i;
  EXPECT_GT(warm.stats().prefix_hits, 2u);
}

// A promotion shares the whole blocks of a shorter prefix on the same cuts that is still in device
// memory, and copies in only the rest: with one device entry, a conversation's prompt of three
// messages leaves its longest prefix (33 tokens), and another prompt that resumes at the end of the
// system message (19) brings that one back and pushes the 33 out to host memory. The conversation's
// next prompt then resumes at 33 from host memory, sharing the 19's two whole blocks of 8: every
// request gets its cold tokens.
inline void check_shared_promotion(const ModelLoader& load, const OptionsFor& options, const std::vector<int32_t>& base) {
  Engine cold(load(), options(1));
  const int64_t V = cold.model().config().vocab_size;
  const Conversation c = conversation(V, 3);
  const GenerationRequest like = nth_request(base, V, 1);
  GenerationRequest other = c.request(like, 1);  // the system message and a user message of its own
  for (int k = 0; k < 3; ++k) other.prompt.push_back(static_cast<int32_t>((k * 29 + 11) % V));
  other.boundaries = {c.starts[1]};
  const std::vector<GenerationRequest> requests = {c.request(like, 3), other, c.request(like, 4)};
  EngineOptions o = options(1);
  o.kv_block_tokens = 8;
  o.prefix_cache = 1;
  o.prefix_cache_host_bytes = size_t{64} << 20;
  Engine warm(load(), o);
  std::vector<std::shared_ptr<Recorder>> works;
  for (const GenerationRequest& r : requests) {
    works.push_back(run_to_end(warm, r));
    ASSERT_TRUE(works.back()->result) << works.size() - 1 << ": " << works.back()->error;
    EXPECT_EQ(works.back()->result->tokens, run_alone(cold, r).tokens) << "request " << works.size() - 1;
  }
  EXPECT_EQ(works[1]->result->cached_tokens, 19);
  EXPECT_EQ(works[1]->result->cached_tier, runtime::CacheTier::kHost);
  EXPECT_EQ(works[2]->result->cached_tokens, 33);
  EXPECT_EQ(works[2]->result->cached_tier, runtime::CacheTier::kHost);
  EXPECT_EQ(warm.stats().prefix.shared_on_promotion, 16u);  // the 19's first two blocks
}

// The next turn prefilled ahead (a background request: the conversation so far and the next
// message's first token, no tokens generated): the next turn resumes at its start and gets its cold
// tokens. A background request gives way to any request that arrives: it is cancelled at once.
inline void check_background_prefill(const ModelLoader& load, const OptionsFor& options, const std::vector<int32_t>& base) {
  Engine cold(load(), options(1));
  const int64_t V = cold.model().config().vocab_size;
  const Conversation c = conversation(V, 2);
  const GenerationRequest like = nth_request(base, V, 4);
  EngineOptions o = options(2);
  o.kv_block_tokens = 8;
  o.prefix_cache = 16;
  Engine warm(load(), o);
  GenerationRequest ahead = c.request(like, 4);
  ahead.prompt.push_back(c.tokens[static_cast<size_t>(c.starts[4])]);
  ahead.boundaries.push_back(c.starts[4]);
  ahead.max_tokens = 0;
  ahead.background = true;
  const GenerationResult done = warm.generate(ahead);
  EXPECT_TRUE(done.tokens.empty());
  const GenerationRequest next = c.request(like, 5);
  const GenerationResult r = warm.generate(next);
  EXPECT_EQ(r.tokens, run_alone(cold, next).tokens);
  EXPECT_EQ(r.cached_tokens, c.starts[4]);
  // Giving way: a long background prompt runs a step, then a request arrives.
  GenerationRequest slow = c.request(like, 5);
  for (int k = 0; k < 40; ++k) slow.prompt.push_back(static_cast<int32_t>((k * 5 + 1) % V));
  slow.max_tokens = 0;
  slow.background = true;
  auto background = recorder_for(slow);
  warm.add(background);
  warm.step();
  GenerationRequest other = nth_request(base, V, 7);
  auto foreground = recorder_for(other);
  warm.add(foreground);
  warm.step();
  ASSERT_TRUE(background->result);
  EXPECT_EQ(background->result->finish_reason, FinishReason::kCancelled);
  while (!warm.idle()) warm.step();
  ASSERT_TRUE(foreground->result) << foreground->error;
  EXPECT_EQ(foreground->result->tokens, run_alone(cold, other).tokens);
}

}  // namespace strata::test
