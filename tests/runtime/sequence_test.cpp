// The sequence-state API on the hybrid (qwen35: KV caches + GDN conv windows + recurrent states)
// and dense (llama: KV caches only) goldens' checkpoints: snapshot/restore is exact and allocates
// nothing, serialize → deserialize → continue reproduces the tokens, foreign or corrupted states
// are rejected, truncate works where it can; and, at model level, a chunked prefill equals
// token-by-token decoding (outputs and final states) for lengths around the 64-token chunk.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>

#include "core/error.h"
#include "runtime/sequence.h"
#include "model_util.h"
#include "test_util.h"

int64_t heap_allocations();  // alloc_counter.cpp

namespace strata {
namespace {

using runtime::Sequence;
using runtime::Snapshot;
using test::argmax;
using test::load_fixture_model;
using test::random_tokens;

bool same(const HostTensor& a, const HostTensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.as<void>(), b.as<void>(), a.view().nbytes()) == 0;
}

// Greedy continuation of `seq` for n steps; returns the tokens.
std::vector<int32_t> greedy(model::Model& m, Sequence& seq, HostTensor& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t t[1] = {argmax(logits)};
    out.push_back(t[0]);
    seq.forward(m, t, logits, false);
  }
  return out;
}

class SequenceState : public ::testing::TestWithParam<std::string> {};

TEST_P(SequenceState, RestoreAfterExtraStepsGivesTheLogitsOfNeverTakingThem) {
  auto m = load_fixture_model(GetParam());
  const int64_t V = m->config().vocab_size;
  const std::vector<int32_t> prompt = random_tokens(40, V, 1);
  Sequence seq(*m, 128);
  HostTensor logits(DType::kF32, {V}), first(DType::kF32, {V}), again(DType::kF32, {V});
  seq.forward(*m, prompt, logits, false);
  Snapshot snap(seq);
  snap.take(seq);
  const int32_t next[1] = {7};
  seq.forward(*m, next, first, false);
  greedy(*m, seq, first, 6);  // extra steps that must leave no trace
  EXPECT_EQ(seq.n_tokens(), 47);
  snap.restore(seq);
  EXPECT_EQ(seq.n_tokens(), 40);
  EXPECT_EQ(seq.tokens(), prompt);
  HostTensor reference(DType::kF32, {V});
  Sequence fresh(*m, 128);
  fresh.forward(*m, prompt, reference, false);
  fresh.forward(*m, next, reference, false);
  seq.forward(*m, next, again, false);
  EXPECT_TRUE(same(again, reference));
  // The same snapshot can be restored again after moving forward.
  greedy(*m, seq, again, 3);
  snap.restore(seq);
  seq.forward(*m, next, again, false);
  EXPECT_TRUE(same(again, reference));
}

TEST_P(SequenceState, SnapshotAndRestoreDoNotAllocate) {
  auto m = load_fixture_model(GetParam());
  Sequence seq(*m, 64);
  HostTensor logits(DType::kF32, {m->config().vocab_size});
  seq.forward(*m, random_tokens(10, m->config().vocab_size, 2), logits, false);
  Snapshot snap(seq);
  const int64_t before = heap_allocations();
  for (int i = 0; i < 100; ++i) {
    snap.take(seq);
    snap.restore(seq);
  }
  EXPECT_EQ(heap_allocations() - before, 0);
}

TEST_P(SequenceState, DecodeStepsAllocateNothingAfterWarmUp) {
  // One compute thread: scratch is per thread, and with several a thread that happened to get no
  // work during the warm-up would size its buffers later (once), which the count would catch.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  auto m = load_fixture_model(GetParam());
  Sequence seq(*m, 64);
  HostTensor logits(DType::kF32, {m->config().vocab_size});
  seq.forward(*m, random_tokens(10, m->config().vocab_size, 17), logits, false);
  greedy(*m, seq, logits, 2);  // warm-up: scratch buffers reach their decode sizes
  const int64_t before = heap_allocations();
  for (int i = 0; i < 8; ++i) {
    const int32_t t[1] = {argmax(logits)};
    seq.forward(*m, t, logits, false);
  }
  EXPECT_EQ(heap_allocations() - before, 0);
  omp_set_num_threads(threads);
}

TEST_P(SequenceState, SerializeDeserializeContinueGivesIdenticalTokens) {
  auto m = load_fixture_model(GetParam());
  const int64_t V = m->config().vocab_size;
  Sequence a(*m, 128);
  HostTensor la(DType::kF32, {V}), lb(DType::kF32, {V});
  a.forward(*m, random_tokens(50, V, 3), la, false);
  const std::vector<uint8_t> bytes = a.serialize();
  Sequence b(*m, 96);  // another capacity is fine while the tokens fit
  b.deserialize(bytes);
  EXPECT_EQ(b.tokens(), a.tokens());
  EXPECT_EQ(b.n_tokens(), 50);
  std::memcpy(lb.as<void>(), la.as<void>(), la.view().nbytes());
  EXPECT_EQ(greedy(*m, b, lb, 12), greedy(*m, a, la, 12));
  EXPECT_TRUE(same(la, lb));
}

TEST_P(SequenceState, CorruptedStateIsRejectedAndLeavesTheSequenceAlone) {
  auto m = load_fixture_model(GetParam());
  const int64_t V = m->config().vocab_size;
  Sequence a(*m, 64);
  HostTensor logits(DType::kF32, {V});
  a.forward(*m, random_tokens(20, V, 4), logits, false);
  const std::vector<uint8_t> good = a.serialize();
  Sequence b(*m, 64);
  b.forward(*m, random_tokens(5, V, 5), logits, false);
  const std::vector<int32_t> before = b.tokens();
  for (size_t pos : {size_t{3}, size_t{9}, good.size() / 3, good.size() / 2, good.size() - 40, good.size() - 1}) {
    std::vector<uint8_t> bad = good;
    bad[pos] ^= 0x10;
    test::expect_error([&] { b.deserialize(bad); }, ErrorKind::kInvalidInput, {});
  }
  std::vector<uint8_t> cut(good.begin(), good.end() - 100);
  test::expect_error([&] { b.deserialize(cut); }, ErrorKind::kInvalidInput, {});
  EXPECT_EQ(b.tokens(), before);
  EXPECT_EQ(b.n_tokens(), 5);
}

INSTANTIATE_TEST_SUITE_P(Models, SequenceState, ::testing::Values("qwen35", "qwen35_moe", "llama"));

TEST(SequenceStateErrors, StateOfAnotherModelIsRejected) {
  auto a = load_fixture_model("qwen35");
  auto b = load_fixture_model("qwen35_tied");
  Sequence sa(*a, 32), sb(*b, 32);
  HostTensor logits(DType::kF32, {a->config().vocab_size});
  sa.forward(*a, random_tokens(8, 256, 6), logits, false);
  test::expect_error([&] { sb.deserialize(sa.serialize()); }, ErrorKind::kInvalidInput, {"different model"});
  EXPECT_EQ(sb.n_tokens(), 0);
}

// Serialize → deserialize → continue with BF16 caches gives the same tokens; a BF16-cache model
// refuses a state saved with F32 caches (and the other way round), naming the option.
TEST(SequenceStateErrors, Bf16KvStatesRoundTripAndTheOtherTypeIsRefused) {
  auto load_with = [](model::KvCacheType kv) {
    model::LoadOptions o;
    o.kv_cache = kv;
    return model::load_model(test::test_fixture("models/qwen35"), o);
  };
  auto bf16 = load_with(model::KvCacheType::kBF16);
  auto f32 = load_with(model::KvCacheType::kF32);
  const int64_t V = bf16->config().vocab_size;
  const std::vector<int32_t> prompt = {3, 17, 99, 4, 250, 8, 61, 7, 7, 120, 33, 2};
  runtime::Sequence a(*bf16, 64), b(*bf16, 64);
  HostTensor la(DType::kF32, {V}), lb(DType::kF32, {V});
  a.forward(*bf16, prompt, la, false);
  b.deserialize(a.serialize());
  std::memcpy(lb.as<void>(), la.as<void>(), la.view().nbytes());
  for (int i = 0; i < 8; ++i) {
    const int32_t ta[1] = {argmax(la)}, tb[1] = {argmax(lb)};
    ASSERT_EQ(ta[0], tb[0]) << "step " << i;
    a.forward(*bf16, ta, la, false);
    b.forward(*bf16, tb, lb, false);
  }
  EXPECT_EQ(std::memcmp(la.as<void>(), lb.as<void>(), la.view().nbytes()), 0);

  runtime::Sequence other(*f32, 64);
  test::expect_error([&] { other.deserialize(a.serialize()); }, ErrorKind::kInvalidInput,
                     {"layers.3.k", "F32", "--kv-cache-type"});
  runtime::Sequence back(*bf16, 64);
  other.forward(*f32, prompt, la, false);
  test::expect_error([&] { back.deserialize(other.serialize()); }, ErrorKind::kInvalidInput,
                     {"BF16"});
}

TEST(SequenceStateErrors, StateLongerThanTheCapacityIsRejected) {
  auto m = load_fixture_model("qwen35");
  Sequence big(*m, 64), small(*m, 16);
  HostTensor logits(DType::kF32, {m->config().vocab_size});
  big.forward(*m, random_tokens(20, 256, 7), logits, false);
  test::expect_error([&] { small.deserialize(big.serialize()); }, ErrorKind::kInvalidInput, {"capacity"});
}

TEST(SequenceStateErrors, StaleSnapshotIsRejected) {
  auto m = load_fixture_model("qwen35");
  Sequence seq(*m, 64);
  HostTensor logits(DType::kF32, {m->config().vocab_size});
  seq.forward(*m, random_tokens(10, 256, 8), logits, false);
  Snapshot early(seq), late(seq);
  early.take(seq);
  seq.forward(*m, random_tokens(5, 256, 9), logits, false);
  late.take(seq);
  early.restore(seq);
  seq.forward(*m, random_tokens(5, 256, 10), logits, false);  // rewrites the rows `late` relied on
  test::expect_error([&] { late.restore(seq); }, ErrorKind::kInvalidInput, {"moved back"});
}

TEST(SequenceTruncate, AttentionOnlyModelsTruncateExactly) {
  auto m = load_fixture_model("llama");
  const int64_t V = m->config().vocab_size;
  const std::vector<int32_t> prompt = random_tokens(30, V, 11);
  const std::span<const int32_t> head = std::span<const int32_t>(prompt).first(12);
  const std::span<const int32_t> tail = std::span<const int32_t>(prompt).subspan(12);
  Sequence seq(*m, 64), reference(*m, 64);
  HostTensor logits(DType::kF32, {V}), expected(DType::kF32, {V});
  reference.forward(*m, head, expected, false);
  reference.forward(*m, tail, expected, false);
  seq.forward(*m, head, logits, false);
  seq.forward(*m, random_tokens(20, V, 16), logits, false);  // rows 12.. are then rewritten
  EXPECT_TRUE(seq.truncatable());
  seq.truncate(12);
  EXPECT_EQ(seq.n_tokens(), 12);
  seq.forward(*m, tail, logits, false);
  EXPECT_TRUE(same(logits, expected));
}

TEST(SequenceTruncate, HybridModelsRefuseToTruncate) {
  auto m = load_fixture_model("qwen35");
  Sequence seq(*m, 32);
  HostTensor logits(DType::kF32, {m->config().vocab_size});
  seq.forward(*m, random_tokens(10, 256, 12), logits, false);
  EXPECT_FALSE(seq.truncatable());
  test::expect_error([&] { seq.truncate(5); }, ErrorKind::kUnsupported, {"snapshot"});
}

// A token whose id lies in memory: the same logits and state as the id given on the host; the id is
// recorded once resolved, and a pending sequence refuses what needs its ids.
TEST(SequencePending, DeviceTokenStepsEqualHostTokenSteps) {
  for (const char* name : {"llama", "qwen35"}) {
    auto m = load_fixture_model(name);
    const int64_t V = m->config().vocab_size;
    const std::vector<int32_t> prompt = random_tokens(9, V, 21);
    Sequence seq(*m, 32), reference(*m, 32);
    HostTensor logits(DType::kF32, {V}), expected(DType::kF32, {V});
    seq.forward(*m, prompt, logits, false);
    reference.forward(*m, prompt, expected, false);
    const int32_t next[1] = {argmax(expected)};
    reference.forward(*m, next, expected, false);
    const backend::Buffer id(Device::kCpu, DType::kI32, {1});
    *id.as<int32_t>() = next[0];
    seq.forward_pending(*m, id.view(), logits);
    EXPECT_TRUE(same(logits, expected)) << name;
    test::expect_error([&] { (void)seq.serialize(); }, ErrorKind::kInternal, {"pending"});
    test::expect_error([&] { seq.forward(*m, next, logits, false); }, ErrorKind::kInternal, {"pending"});
    seq.resolve_pending(next[0]);
    EXPECT_EQ(seq.tokens().back(), next[0]) << name;
    EXPECT_EQ(seq.serialize(), reference.serialize()) << name;
  }
}

// Model level: one forward over T tokens (chunked delta rule when T > 8) against T one-token
// forwards (recurrent), from an empty state and continuing from one. Tolerances: logits 1e-4,
// recurrent states 2e-5 (fp32 summation order only).
class ChunkedVsRecurrent : public ::testing::TestWithParam<int64_t> {};

float max_state_diff(const Sequence& a, const Sequence& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.state().buffers.size(); ++i) {
    const auto& x = a.state().buffers[i];
    if (x.token_indexed) continue;
    const float* p = x.tensor.as<float>();
    const float* q = b.state().buffers[i].tensor.as<float>();
    for (int64_t j = 0; j < x.tensor.numel(); ++j) m = std::max(m, std::fabs(p[j] - q[j]));
  }
  return m;
}

void compare_forms(model::Model& m, const std::vector<int32_t>& prefix, const std::vector<int32_t>& tokens) {
  const int64_t V = m.config().vocab_size, T = static_cast<int64_t>(tokens.size());
  Sequence chunked(m, 512), recurrent(m, 512);
  HostTensor scratch(DType::kF32, {V});
  if (!prefix.empty()) {
    chunked.forward(m, prefix, scratch, false);
    recurrent.forward(m, prefix, scratch, false);
  }
  HostTensor all(DType::kF32, {T, V}), one(DType::kF32, {V});
  chunked.forward(m, tokens, all, true);
  float logit_diff = 0.0f;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t tok[1] = {tokens[t]};
    recurrent.forward(m, tok, one, false);
    for (int64_t j = 0; j < V; ++j)
      logit_diff = std::max(logit_diff, std::fabs(one.as<float>()[j] - all.as<float>()[t * V + j]));
  }
  EXPECT_LT(logit_diff, 1e-4f) << "T " << T;
  EXPECT_LT(max_state_diff(chunked, recurrent), 2e-5f) << "T " << T;
}

TEST_P(ChunkedVsRecurrent, SameOutputsAndFinalStates) {
  auto m = load_fixture_model("qwen35");
  compare_forms(*m, {}, random_tokens(GetParam(), 256, 13));
}

TEST_P(ChunkedVsRecurrent, SameWhenContinuingFromAState) {
  auto m = load_fixture_model("qwen35_moe");
  compare_forms(*m, random_tokens(37, 256, 14), random_tokens(GetParam(), 256, 15));
}

INSTANTIATE_TEST_SUITE_P(PromptLengths, ChunkedVsRecurrent, ::testing::Values(1, 2, 63, 64, 65, 127, 200));

}  // namespace
}  // namespace strata
