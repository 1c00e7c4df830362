// The state pool: slots allocated once, handed out lowest first, each reset to empty when taken,
// and refused when all are taken; KV blocks shared by the slots, handed out on demand, refused
// when too few are free, and swapped out to host memory and back. A paged sequence (its rows
// scattered over blocks that other sequences' blocks sit between) computes, serializes and
// resumes exactly as a sequence with its own contiguous cache.
#include "runtime/state_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "backend/memory.h"
#include "model/model.h"
#include "test_util.h"

namespace strata {
namespace {

bool recurrent_zero(const runtime::Sequence& seq) {
  for (const model::StateBuffer& b : seq.state().buffers) {
    if (b.token_indexed) continue;
    const HostTensor h = backend::to_host(b.tensor.view());
    const auto* p = static_cast<const unsigned char*>(h.view().data);
    for (size_t i = 0; i < h.view().nbytes(); ++i)
      if (p[i] != 0) return false;
  }
  return true;
}

std::vector<int32_t> prompt(int n, int salt, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 31 + salt * 7 + 3) % vocab);
  return t;
}

std::vector<float> logits_of(const HostTensor& t) {
  return {t.as<float>(), t.as<float>() + t.view().numel()};
}

TEST(StatePool, SlotsAreTakenLowestFirstAndComeBackEmpty) {
  auto model = model::load_model(test::test_fixture("models/qwen35"));
  runtime::StatePool pool(*model, 3, 32);
  EXPECT_EQ(pool.slots(), 3);
  EXPECT_EQ(pool.free_slots(), 3);
  EXPECT_EQ(pool.capacity(), 32);
  EXPECT_EQ(pool.kv_blocks(), 3);  // a whole context of 32 tokens a slot: one 64-token block
  EXPECT_EQ(pool.bytes(), 3 * model->info().state_bytes_fixed +
                              3 * runtime::StatePool::block_bytes(model->info()));

  const int a = pool.acquire(), b = pool.acquire();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  // Slot 0 runs a few tokens: its recurrent state is no longer zero.
  runtime::Sequence& seq = pool.sequence(a);
  HostTensor logits(DType::kF32, {model->config().vocab_size});
  const std::vector<int32_t> tokens = {1, 2, 3};
  EXPECT_THROW(seq.forward(*model, tokens, logits.view(), false), Error);  // no blocks yet
  ASSERT_TRUE(pool.reserve(a, 3));
  EXPECT_EQ(pool.free_kv_blocks(), 2);
  seq.forward(*model, tokens, logits.view(), false);
  EXPECT_EQ(seq.n_tokens(), 3);
  EXPECT_FALSE(recurrent_zero(seq));

  pool.release(a);
  EXPECT_EQ(pool.free_slots(), 2);
  EXPECT_EQ(pool.free_kv_blocks(), 3);
  EXPECT_EQ(pool.acquire(), 0);  // the lowest again, reset
  EXPECT_EQ(pool.sequence(0).n_tokens(), 0);
  EXPECT_TRUE(pool.sequence(0).tokens().empty());
  EXPECT_TRUE(pool.sequence(0).state().blocks.empty());
  EXPECT_TRUE(recurrent_zero(pool.sequence(0)));

  EXPECT_EQ(pool.acquire(), 2);
  EXPECT_EQ(pool.acquire(), -1);  // all taken
  EXPECT_THROW(pool.release(7), Error);
  pool.release(1);
  EXPECT_THROW(pool.release(1), Error);  // twice
}

TEST(StatePool, RefusesNoSlotsNoContextOrTooFewBlocks) {
  auto model = model::load_model(test::test_fixture("models/llama"));
  EXPECT_THROW(runtime::StatePool(*model, 0, 32), Error);
  EXPECT_THROW(runtime::StatePool(*model, 2, 0), Error);
  EXPECT_THROW(runtime::StatePool(*model, 2, 64, 3, 16), Error);  // one context needs 4 blocks
  EXPECT_THROW(runtime::StatePool(*model, 2, 64, 8, 24), Error);  // not a power of two
  EXPECT_NO_THROW(runtime::StatePool(*model, 2, 64, 4, 16));
}

TEST(StatePool, BlocksAreGivenOnDemandAndRefusedWhenTooFewAreFree) {
  auto model = model::load_model(test::test_fixture("models/llama"));
  runtime::StatePool pool(*model, 2, 64, 5, 16);
  const int a = pool.acquire(), b = pool.acquire();
  EXPECT_TRUE(pool.reserve(a, 17));  // two blocks
  EXPECT_EQ(pool.sequence(a).state().blocks, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(pool.reserve(b, 16));
  EXPECT_TRUE(pool.reserve(a, 20));  // still two
  EXPECT_EQ(pool.free_kv_blocks(), 2);
  EXPECT_FALSE(pool.reserve(b, 60));  // three more: refused, nothing taken
  EXPECT_EQ(pool.free_kv_blocks(), 2);
  EXPECT_EQ(pool.sequence(b).state().blocks, (std::vector<int32_t>{2}));
  EXPECT_TRUE(pool.reserve(b, 48));
  EXPECT_EQ(pool.sequence(b).state().blocks, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(pool.sequence(b).state().rows_held(), 48);
  pool.release(a);
  EXPECT_EQ(pool.free_kv_blocks(), 2);
  EXPECT_TRUE(pool.reserve(b, 500));  // capped at the capacity: one more block
  EXPECT_EQ(pool.sequence(b).state().blocks.size(), 4u);
}

class PagedSequence : public ::testing::TestWithParam<const char*> {};

// Two slots take blocks turn about, so each sequence's rows lie in every other block; each runs a
// prompt in chunks and decodes past several block boundaries. Its logits equal a plain sequence's
// bit for bit, and it serializes to the same bytes.
TEST_P(PagedSequence, ComputesAndSerializesAsAPlainOne) {
  auto model = model::load_model(test::test_fixture(std::string("models/") + GetParam()));
  const int64_t V = model->config().vocab_size;
  runtime::StatePool pool(*model, 2, 96, 12, 8);
  const int slots[2] = {pool.acquire(), pool.acquire()};
  runtime::Sequence plain[2] = {runtime::Sequence(*model, 96), runtime::Sequence(*model, 96)};
  HostTensor got(DType::kF32, {V}), want(DType::kF32, {V});
  auto run = [&](int i, std::span<const int32_t> tokens) {
    runtime::Sequence& seq = pool.sequence(slots[i]);
    ASSERT_TRUE(pool.reserve(slots[i], seq.n_tokens() + static_cast<int64_t>(tokens.size())));
    seq.forward(*model, tokens, got.view(), false);
    plain[i].forward(*model, tokens, want.view(), false);
    ASSERT_EQ(logits_of(got), logits_of(want)) << "sequence " << i << " at " << seq.n_tokens();
  };
  for (int chunk = 0; chunk < 3; ++chunk)
    for (int i = 0; i < 2; ++i) run(i, prompt(7, i * 10 + chunk, V));
  for (int step = 0; step < 20; ++step)
    for (int i = 0; i < 2; ++i) {
      const int32_t t = static_cast<int32_t>((step * 17 + i * 5) % V);
      run(i, std::span<const int32_t>(&t, 1));
    }
  EXPECT_EQ(pool.sequence(slots[0]).state().blocks, (std::vector<int32_t>{0, 2, 4, 6, 8, 10}));
  for (int i = 0; i < 2; ++i) {
    const std::vector<uint8_t> bytes = pool.sequence(slots[i]).serialize();
    EXPECT_EQ(bytes, plain[i].serialize());
    // And back into a paged sequence whose blocks lie elsewhere: it goes on as the plain one.
    runtime::StatePool other(*model, 1, 96, 12, 8);
    const int s = other.acquire();
    ASSERT_TRUE(other.reserve(s, 30));
    EXPECT_THROW(other.sequence(s).deserialize(bytes), Error);  // blocks for 32 tokens, not 41
    ASSERT_TRUE(other.reserve(s, 41));
    other.sequence(s).deserialize(bytes);
    ASSERT_TRUE(other.reserve(s, 42));
    const int32_t t = 5;
    other.sequence(s).forward(*model, std::span<const int32_t>(&t, 1), got.view(), false);
    plain[i].forward(*model, std::span<const int32_t>(&t, 1), want.view(), false);
    EXPECT_EQ(logits_of(got), logits_of(want));
  }
}

// save_blocks lays a prefix's rows out as Sequence::save_kv does, whichever blocks hold them (runs
// of consecutive blocks and single ones, split over host pages), and load_blocks puts them back
// into other blocks the same way.
TEST_P(PagedSequence, BlocksGoToHostPagesAndBackInSaveKvsLayout) {
  auto model = model::load_model(test::test_fixture(std::string("models/") + GetParam()));
  const int64_t V = model->config().vocab_size;
  runtime::StatePool pool(*model, 3, 64, 11, 8);
  const int a = pool.acquire(), b = pool.acquire(), c = pool.acquire();
  HostTensor logits(DType::kF32, {V});
  // a: blocks 0-2; b: 3-5; a gives 0-2 back; c takes 6-10, then 0-2 (free at the back).
  ASSERT_TRUE(pool.reserve(a, 24));
  ASSERT_TRUE(pool.reserve(b, 24));
  pool.release(a);
  ASSERT_TRUE(pool.reserve(c, 64));
  const std::vector<int32_t> tokens = prompt(61, 4, V);
  pool.sequence(c).forward(*model, tokens, logits.view(), false);
  const runtime::Sequence& seq = pool.sequence(c);
  ASSERT_EQ(seq.state().blocks, (std::vector<int32_t>{6, 7, 8, 9, 10, 0, 1, 2}));
  for (const int64_t n : {int64_t{61}, int64_t{8}, int64_t{5}, int64_t{47}}) {
    SCOPED_TRACE(n);
    std::vector<uint8_t> want(seq.kv_bytes(n));
    seq.save_kv(n, want.data());
    runtime::PagedBytes got = pool.host_pages()->take(pool.kv_bytes(n));
    pool.save_blocks(seq.state().blocks, n, got);
    EXPECT_EQ(got.to_vector(), want);
    // Back into b's blocks (3 consecutive ones): b's rows then read as c's.
    const int64_t m = std::min<int64_t>(n, 24);
    std::vector<uint8_t> rows(seq.kv_bytes(m)), back(rows.size());
    seq.save_kv(m, rows.data());
    pool.load_blocks(pool.sequence(b).state().blocks, m, pool.host_pages()->take_copy(rows));
    runtime::Sequence::save_kv(pool.sequence(b).state(), m, back.data());
    EXPECT_EQ(back, rows);
  }
  EXPECT_GT(pool.host_pages()->allocated_bytes(), 0u);
}

// A sequence swapped out while another takes and overwrites its blocks comes back exactly.
TEST_P(PagedSequence, SwapsOutAndBackExactly) {
  auto model = model::load_model(test::test_fixture(std::string("models/") + GetParam()));
  const int64_t V = model->config().vocab_size;
  runtime::StatePool pool(*model, 2, 64, 8, 8);
  const int a = pool.acquire(), b = pool.acquire();
  runtime::Sequence plain(*model, 64);
  HostTensor got(DType::kF32, {V}), want(DType::kF32, {V});
  const std::vector<int32_t> first = prompt(30, 1, V), other = prompt(50, 2, V), next = prompt(9, 3, V);
  ASSERT_TRUE(pool.reserve(a, 30));
  pool.sequence(a).forward(*model, first, got.view(), false);
  plain.forward(*model, first, want.view(), false);

  pool.swap_out(a);
  EXPECT_TRUE(pool.swapped(a));
  EXPECT_EQ(pool.free_kv_blocks(), 8);
  ASSERT_TRUE(pool.reserve(b, 50));  // b takes a's blocks (and three more) and writes over them
  pool.sequence(b).forward(*model, other, got.view(), false);
  EXPECT_FALSE(pool.swap_in(a));  // one block free; a needs four
  EXPECT_TRUE(pool.swapped(a));
  pool.release(b);
  ASSERT_TRUE(pool.swap_in(a));
  EXPECT_FALSE(pool.swapped(a));

  ASSERT_TRUE(pool.reserve(a, 39));
  pool.sequence(a).forward(*model, next, got.view(), false);
  plain.forward(*model, next, want.view(), false);
  EXPECT_EQ(logits_of(got), logits_of(want));
}

INSTANTIATE_TEST_SUITE_P(Models, PagedSequence, ::testing::Values("llama", "qwen35"));

}  // namespace
}  // namespace strata
