// The state pool: slots allocated once, handed out lowest first, each reset to empty (zeros) when
// taken, and refused when all are taken.
#include "runtime/state_pool.h"

#include <gtest/gtest.h>

#include "backend/memory.h"
#include "model/model.h"
#include "test_util.h"

namespace strata {
namespace {

bool all_zero(const runtime::Sequence& seq) {
  for (const model::StateBuffer& b : seq.state().buffers) {
    const HostTensor h = backend::to_host(b.tensor.view());
    const auto* p = static_cast<const unsigned char*>(h.view().data);
    for (size_t i = 0; i < h.view().nbytes(); ++i)
      if (p[i] != 0) return false;
  }
  return true;
}

TEST(StatePool, SlotsAreTakenLowestFirstAndComeBackEmpty) {
  auto model = model::load_model(test::test_fixture("models/qwen35"));
  runtime::StatePool pool(*model, 3, 32);
  EXPECT_EQ(pool.slots(), 3);
  EXPECT_EQ(pool.free_slots(), 3);
  EXPECT_EQ(pool.capacity(), 32);
  EXPECT_EQ(pool.bytes(), 3 * runtime::StatePool::slot_bytes(model->info(), 32));

  const int a = pool.acquire(), b = pool.acquire();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  // Slot 0 runs a few tokens: its KV rows and recurrent state are no longer zero.
  runtime::Sequence& seq = pool.sequence(a);
  HostTensor logits(DType::kF32, {model->config().vocab_size});
  const std::vector<int32_t> tokens = {1, 2, 3};
  seq.forward(*model, tokens, logits.view(), false);
  EXPECT_EQ(seq.n_tokens(), 3);
  EXPECT_FALSE(all_zero(seq));

  pool.release(a);
  EXPECT_EQ(pool.free_slots(), 2);
  EXPECT_EQ(pool.acquire(), 0);  // the lowest again, reset
  EXPECT_EQ(pool.sequence(0).n_tokens(), 0);
  EXPECT_TRUE(pool.sequence(0).tokens().empty());
  EXPECT_TRUE(all_zero(pool.sequence(0)));

  EXPECT_EQ(pool.acquire(), 2);
  EXPECT_EQ(pool.acquire(), -1);  // all taken
  EXPECT_THROW(pool.release(7), Error);
  pool.release(1);
  EXPECT_THROW(pool.release(1), Error);  // twice
}

TEST(StatePool, RefusesNoSlotsOrNoContext) {
  auto model = model::load_model(test::test_fixture("models/llama"));
  EXPECT_THROW(runtime::StatePool(*model, 0, 32), Error);
  EXPECT_THROW(runtime::StatePool(*model, 2, 0), Error);
}

}  // namespace
}  // namespace strata
