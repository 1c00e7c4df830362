// The KV cache's element type (LoadOptions::kv_cache): "auto" follows the checkpoint (BF16 where
// its config.json, or failing that its tensors, say 16-bit floats; F32 for an F32 one) and an
// explicit type overrides it; a BF16 cache halves the state a token adds and keeps the golden
// models close to transformers' fp32 logits (serialization: tests/runtime/sequence_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/safetensors.h"
#include "model/golden.h"
#include "model/model.h"
#include "test_util.h"

namespace strata {
namespace {

std::string fixture(const std::string& name) { return test::test_fixture("models/" + name); }

// A golden fixture's F32 checkpoint rewritten in memory as BF16, with config.json's dtype set to
// `dtype` ("bfloat16", as a transformers checkpoint saved in bfloat16 says) or removed (""). The
// converted tensors live as long as the object.
struct Bf16Checkpoint {
  Bf16Checkpoint(const std::string& name, const std::string& dtype)
      : config(read_json_file(fixture(name) + "/config.json")) {
    config.erase("torch_dtype");
    config.erase("dtype");
    if (!dtype.empty()) config["dtype"] = dtype;
    const formats::WeightStore f32 = formats::WeightStore::open(fixture(name));
    for (const std::string& n : f32.names()) {
      const Tensor& t = f32.get(n);
      HostTensor& b = storage[n];
      b = HostTensor(DType::kBF16, t.shape);
      for (int64_t i = 0; i < t.numel(); ++i)
        b.as<uint16_t>()[i] = f32_to_bf16(t.as<const float>()[i]);
      views[n] = b.view();
    }
  }
  std::unique_ptr<model::Model> load(model::KvCacheType kv = model::KvCacheType::kAuto) const {
    model::LoadOptions o;
    o.kv_cache = kv;
    return model::load_model(config, formats::WeightStore::from_tensors(views), o);
  }

  Json config;
  std::map<std::string, HostTensor> storage;
  std::map<std::string, Tensor> views;
};

std::unique_ptr<model::Model> load(const std::string& name, model::KvCacheType kv) {
  model::LoadOptions o;
  o.kv_cache = kv;
  return model::load_model(fixture(name), o);
}

// The element type of every KV buffer of a fresh state (and that there is at least one).
DType kv_dtype_of(const model::Model& m) {
  const model::ModelState s = m.new_state(8);
  DType seen = DType::kU8;
  for (const model::StateBuffer& b : s.buffers) {
    if (!b.token_indexed) {
      EXPECT_EQ(b.tensor.dtype(), DType::kF32) << b.name << ": recurrent state stays fp32";
      continue;
    }
    if (seen != DType::kU8) {
      EXPECT_EQ(b.tensor.dtype(), seen) << b.name;
    }
    seen = b.tensor.dtype();
  }
  EXPECT_NE(seen, DType::kU8) << "no KV buffer";
  EXPECT_EQ(m.config().kv_cache_dtype, seen);
  EXPECT_EQ(m.info().kv_cache_dtype, seen);
  return seen;
}

TEST(KvCacheType, AutoFollowsTheCheckpointAndAnExplicitTypeOverridesIt) {
  using model::KvCacheType;
  for (const char* name : {"qwen35", "llama"}) {
    SCOPED_TRACE(name);
    const Bf16Checkpoint bf16(name, "bfloat16"), unlabelled(name, "");
    auto f32_auto = load(name, KvCacheType::kAuto);
    auto bf16_auto = bf16.load();
    EXPECT_EQ(kv_dtype_of(*f32_auto), DType::kF32);
    EXPECT_EQ(kv_dtype_of(*bf16_auto), DType::kBF16);
    EXPECT_EQ(kv_dtype_of(*unlabelled.load()),
              DType::kBF16);  // no dtype in config.json: the tensors'
    EXPECT_EQ(kv_dtype_of(*load(name, KvCacheType::kBF16)), DType::kBF16);
    EXPECT_EQ(kv_dtype_of(*bf16.load(KvCacheType::kF32)), DType::kF32);
    EXPECT_EQ(2 * bf16_auto->info().state_bytes_per_token, f32_auto->info().state_bytes_per_token);
    EXPECT_EQ(bf16_auto->info().state_bytes_fixed, f32_auto->info().state_bytes_fixed);
  }
  // BF16 tensors under a config.json that says float32 (the mistral golden: transformers ran it in
  // fp32): the config's dtype decides.
  EXPECT_EQ(kv_dtype_of(*load("mistral", KvCacheType::kAuto)), DType::kF32);
}

TEST(KvCacheType, ParsesTheOptionsSpellings) {
  EXPECT_EQ(model::parse_kv_cache_type("auto"), model::KvCacheType::kAuto);
  EXPECT_EQ(model::parse_kv_cache_type("f32"), model::KvCacheType::kF32);
  EXPECT_EQ(model::parse_kv_cache_type("bf16"), model::KvCacheType::kBF16);
  test::expect_error([] { model::parse_kv_cache_type("fp8", "kv"); }, ErrorKind::kInvalidInput,
                     {"kv", "auto, f32 or bf16", "fp8"});
  EXPECT_EQ(model::kv_cache_type_name(DType::kBF16), "bf16");
  EXPECT_EQ(model::kv_cache_type_name(DType::kF32), "f32");
}

// The F32 weights with a BF16 cache against transformers' fp32 run: the keys and values lose their
// low mantissa bits (2^-9 relative), so the logits move by far less than the quantized models'
// tolerances, and the greedy tokens (teacher-forced) stay the reference's wherever its top-2 margin
// exceeds twice that.
// Measured: max |Δlogit| 0.13-0.27% of the largest reference logit over the seven goldens.
constexpr float kBf16KvRelTolerance = 0.01f;

class KvCacheGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(KvCacheGolden, Bf16CacheStaysCloseToTransformers) {
  auto m = load(GetParam(), model::KvCacheType::kBF16);
  const test::Golden g = test::load_golden(GetParam());
  const test::GoldenRun r = test::run_golden(*m, g);
  EXPECT_LT(r.prompt_max_diff, kBf16KvRelTolerance * r.max_ref_logit);
  EXPECT_LT(r.decode_max_diff, kBf16KvRelTolerance * r.max_ref_logit);
  EXPECT_EQ(test::clear_mismatches(r, g.greedy, 2 * kBf16KvRelTolerance * r.max_ref_logit), 0);
  std::printf("[ %s bf16 KV ] prompt max|dlogit| %.2e, decode %.2e (max |logit| %.1f)\n",
              GetParam().c_str(), r.prompt_max_diff, r.decode_max_diff, r.max_ref_logit);
}

INSTANTIATE_TEST_SUITE_P(Goldens, KvCacheGolden,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "qwen35",
                                           "qwen35_moe", "qwen3_next"));

}  // namespace
}  // namespace strata
