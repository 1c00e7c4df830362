// On the GPU, requests run together give exactly the tokens each gives alone (greedy and seeded
// sampling, dense, hybrid and MoE fixtures), with run-ahead on as it is by default there: batches
// of 3 and 17 with prompts cut into several chunks, arrivals while others run, slot reuse, and
// cancellations.
#include <gtest/gtest.h>

#include "backend/memory.h"
#include "batch_check.h"
#include "model/golden.h"
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
  std::unique_ptr<model::Model> load() const {
    model::LoadOptions o;
    o.device = Device::kCuda;
    return model::load_model(test::test_fixture(std::string("models/") + GetParam()), o);
  }
};

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

TEST_P(CudaBatchExactness, CancellationsLeaveTheOthersExact) {
  runtime::Engine solo(load(), options(1));
  runtime::Engine batch(load(), options(3));
  test::check_cancellations(solo, batch, test::load_golden("llama").prompt);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaBatchExactness,
                         ::testing::Values("llama", "qwen35", "qwen35_moe"));

}  // namespace
}  // namespace strata
