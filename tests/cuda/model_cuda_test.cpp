// Whole models on the GPU: every model golden of the earlier issues (transformers float references)
// passes on CUDA with the CPU's tolerances; CUDA and CPU agree on quantized weights; a replayed
// decode graph computes exactly what eager steps compute; sequence state snapshots, restores and
// moves between devices. Runs on the GPU machine; skips where no CUDA device is present.
#include <gtest/gtest.h>

#include "backend/memory.h"
#include "formats/safetensors.h"
#include "model/checkpoint_convert.h"
#include "model/golden.h"
#include "model/synthetic.h"
#include "model/tiny_configs.h"
#include "runtime/engine.h"
#include "runtime/sequence.h"

namespace strata {
namespace {

// The CPU golden tests' tolerances: the reference itself is fp32 (1e-3 on logits of up to ~10).
constexpr float kFloatTolerance = 1e-3f;
// Quantized models, GPU decode path (fused dequant GEMV) vs the CPU's: rounding order only.
constexpr float kQuantizedDecodeTolerance = 1e-3f;
// Quantized prefill on tensor cores rounds activations and dequantized weights to bf16 (8-bit
// mantissa): mean |Δlogit| over the prompt stays within 1% of the largest logit. MoE routing flips
// under any such perturbation (as it does between q8 and float on the CPU): 4% there, the CPU
// golden tests' q8 tolerance.
constexpr float kQuantizedPrefillMeanRelTolerance = 0.01f;
constexpr float kQuantizedMoePrefillMeanRelTolerance = 0.04f;

model::LoadOptions on(Device device, std::optional<formats::QuantParams> q = {}) {
  model::LoadOptions o;
  o.device = device;
  o.quantize = q;
  return o;
}

class CudaModels : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!backend::device_available(Device::kCuda)) GTEST_SKIP() << "no CUDA device";
  }
  std::string path() const { return test::test_fixture("models/" + GetParam()); }
};

TEST_P(CudaModels, FloatLogitsAndGreedyTokensMatchTransformers) {
  auto m = model::load_model(path(), on(Device::kCuda));
  ASSERT_EQ(m->device(), Device::kCuda);
  const test::Golden g = test::load_golden(GetParam());
  const test::GoldenRun r = test::run_golden(*m, g);
  EXPECT_LT(r.prompt_max_diff, kFloatTolerance);
  EXPECT_LT(r.decode_max_diff, kFloatTolerance);
  EXPECT_EQ(r.greedy, g.greedy);
  std::printf("[ %s cuda float ] prompt max|dlogit| %.2e, decode %.2e (max |logit| %.1f)\n",
              GetParam().c_str(), r.prompt_max_diff, r.decode_max_diff, r.max_ref_logit);
}

TEST_P(CudaModels, ChunkedPrefillGivesTheSameGreedyTokens) {
  auto m = model::load_model(path(), on(Device::kCuda));
  const test::Golden g = test::load_golden(GetParam());
  const test::GoldenRun r = test::run_golden(*m, g, 37);
  EXPECT_LT(r.decode_max_diff, kFloatTolerance);
  EXPECT_EQ(r.greedy, g.greedy);
}

// Logits of `steps` single-token forwards after the prompt (also one token at a time, so every
// matmul takes the decode path).
std::vector<float> decode_logits(model::Model& m, const std::vector<int32_t>& prompt, int steps) {
  const int64_t V = m.config().vocab_size;
  model::ModelState s = m.new_state(static_cast<int64_t>(prompt.size()) + steps + 1);
  HostTensor logits(DType::kF32, {V});
  std::vector<float> out;
  for (int32_t t : prompt) {
    const int32_t one[1] = {t};
    m.forward(one, s, logits, false);
  }
  for (int i = 0; i < steps; ++i) {
    out.insert(out.end(), logits.as<float>(), logits.as<float>() + V);
    const int32_t next[1] = {test::argmax(logits.as<float>(), V)};
    m.forward(next, s, logits, false);
  }
  return out;
}

TEST_P(CudaModels, QuantizedWeightsAgreeWithTheCpu) {
  const test::Golden g = test::load_golden(GetParam());
  const std::vector<int32_t> prompt(g.prompt.begin(), g.prompt.begin() + 24);
  for (int bits : {4, 8}) {
    const formats::QuantParams q{bits, 32};
    auto cpu = model::load_model(path(), on(Device::kCpu, q));
    auto gpu = model::load_model(path(), on(Device::kCuda, q));
    const std::vector<float> a = decode_logits(*cpu, prompt, 12),
                             b = decode_logits(*gpu, prompt, 12);
    const float decode_diff =
        test::max_abs_diff(a.data(), b.data(), static_cast<int64_t>(a.size()));
    EXPECT_LT(decode_diff, kQuantizedDecodeTolerance) << bits << "-bit";
    // Prefill of the whole prompt on tensor cores (bf16) against the CPU's fp32.
    const int64_t T = static_cast<int64_t>(g.prompt.size()), V = cpu->config().vocab_size;
    HostTensor lc(DType::kF32, {T, V}), lg(DType::kF32, {T, V});
    model::ModelState sc = cpu->new_state(T), sg = gpu->new_state(T);
    cpu->forward(g.prompt, sc, lc, true);
    gpu->forward(g.prompt, sg, lg, true);
    double sum = 0.0;
    float max_logit = 0.0f;
    for (int64_t i = 0; i < T * V; ++i) {
      sum += std::fabs(lc.as<float>()[i] - lg.as<float>()[i]);
      max_logit = std::max(max_logit, std::fabs(lc.as<float>()[i]));
    }
    const double mean = sum / static_cast<double>(T * V);
    const float rel = cpu->config().moe.num_experts > 0 ? kQuantizedMoePrefillMeanRelTolerance
                                                        : kQuantizedPrefillMeanRelTolerance;
    EXPECT_LT(mean, rel * max_logit) << bits << "-bit";
    std::printf(
        "[ %s q%d cuda vs cpu ] decode max|dlogit| %.2e; prefill mean|dlogit| %.2e (max |logit| "
        "%.1f)\n",
        GetParam().c_str(), bits, decode_diff, mean, max_logit);
  }
}

// BF16 KV caches on the GPU and on the CPU hold the same rounded keys and values (up to the rare
// rounding step that an fp32 difference in k tips), so the float tolerance holds for the prompt's
// logits (prefill: tiles widened in shared memory) and for decode steps (keys widened in
// registers).
TEST_P(CudaModels, Bf16KvCacheAgreesWithTheCpu) {
  const test::Golden g = test::load_golden(GetParam());
  model::LoadOptions c = on(Device::kCpu), d = on(Device::kCuda);
  c.kv_cache = d.kv_cache = model::KvCacheType::kBF16;
  auto cpu = model::load_model(path(), c);
  auto gpu = model::load_model(path(), d);
  ASSERT_EQ(gpu->config().kv_cache_dtype, DType::kBF16);
  const std::vector<int32_t> prompt(g.prompt.begin(), g.prompt.begin() + 24);
  const std::vector<float> a = decode_logits(*cpu, prompt, 12), b = decode_logits(*gpu, prompt, 12);
  const float decode_diff = test::max_abs_diff(a.data(), b.data(), static_cast<int64_t>(a.size()));
  EXPECT_LT(decode_diff, kFloatTolerance);
  const int64_t T = static_cast<int64_t>(g.prompt.size()), V = cpu->config().vocab_size;
  HostTensor lc(DType::kF32, {T, V}), lg(DType::kF32, {T, V});
  model::ModelState sc = cpu->new_state(T), sg = gpu->new_state(T);
  cpu->forward(g.prompt, sc, lc, true);
  gpu->forward(g.prompt, sg, lg, true);
  const float prefill_diff = test::max_abs_diff(lc.as<float>(), lg.as<float>(), T * V);
  EXPECT_LT(prefill_diff, kFloatTolerance);
  std::printf("[ %s bf16 KV cuda vs cpu ] decode max|dlogit| %.2e; prefill %.2e\n",
              GetParam().c_str(), decode_diff, prefill_diff);
}

// Graph replay launches the same kernels on the same memory: bit-identical to eager steps.
TEST_P(CudaModels, GraphReplayIsBitIdenticalToEagerSteps) {
  const test::Golden g = test::load_golden(GetParam());
  model::LoadOptions no_graphs = on(Device::kCuda);
  no_graphs.cuda_graphs = false;
  auto eager = model::load_model(path(), no_graphs);
  auto graphed = model::load_model(path(), on(Device::kCuda));
  const std::vector<int32_t> prompt(g.prompt.begin(), g.prompt.begin() + 40);
  const std::vector<float> a = decode_logits(*eager, prompt, 20),
                           b = decode_logits(*graphed, prompt, 20);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST_P(CudaModels, EngineGreedyTokensEqualTheCpuEngine) {
  const test::Golden g = test::load_golden(GetParam());
  runtime::GenerationRequest req;
  req.prompt = g.prompt;
  req.max_tokens = 24;
  req.sampling.temperature = 0.0f;
  runtime::Engine cpu(model::load_model(path(), on(Device::kCpu)), {});
  runtime::Engine gpu(model::load_model(path(), on(Device::kCuda)), {});
  const runtime::GenerationResult a = cpu.generate(req, {}), b = gpu.generate(req, {});
  EXPECT_EQ(a.tokens, b.tokens);
  // With logprobs the logits come back to the host and the host sampler picks: the same tokens.
  std::vector<float> logprobs;
  req.top_logprobs = 2;
  req.on_logprob = [&](const runtime::TokenLogprob& lp) { logprobs.push_back(lp.logprob); };
  EXPECT_EQ(gpu.generate(req, {}).tokens, a.tokens);
  EXPECT_EQ(logprobs.size(), a.tokens.size());
}

// Sampling on the GPU (backend::edit_logits, then backend::sample_row or argmax) reads back only the
// token; with logprobs asked for, the whole row comes back and the host sampler edits and draws:
// the same seeded tokens, penalties and logit bias included.
TEST_P(CudaModels, EngineSampledTokensOnTheGpuEqualTheHostSampler) {
  const test::Golden g = test::load_golden(GetParam());
  runtime::Engine gpu(model::load_model(path(), on(Device::kCuda)), {});
  runtime::GenerationRequest req;
  req.prompt = g.prompt;
  req.max_tokens = 24;
  auto params = [](float temperature, int top_k, float top_p, float min_p) {
    runtime::SamplingParams p;
    p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p;
    return p;
  };
  auto penalized = [&](float temperature, float repetition, float presence, float frequency) {
    runtime::SamplingParams p = params(temperature, 0, 0.95f, 0.0f);
    p.repetition_penalty = repetition, p.presence_penalty = presence, p.frequency_penalty = frequency;
    p.logit_bias = {{g.greedy[0], -3.0f}, {5, 4.0f}};
    return p;
  };
  for (const runtime::SamplingParams& p :
       {params(1.0f, 0, 1.0f, 0.0f), params(0.7f, 20, 0.9f, 0.0f), params(1.2f, 0, 1.0f, 0.1f),
        penalized(0.8f, 1.3f, 0.5f, 0.2f), penalized(0.0f, 1.1f, 1.5f, 0.0f)}) {
    req.sampling = p;
    req.sampling.seed = 7;
    req.top_logprobs = -1;
    req.on_logprob = nullptr;
    const std::vector<int32_t> device = gpu.generate(req, {}).tokens;
    req.top_logprobs = 0;
    req.on_logprob = [](const runtime::TokenLogprob&) {};
    EXPECT_EQ(gpu.generate(req, {}).tokens, device)
        << "temperature " << p.temperature << " repetition " << p.repetition_penalty;
  }
}

// Running ahead (the default on a GPU: each token's step is queued before the host reads the
// token) gives exactly the plain loop's tokens: greedy and seeded sampling, a stop in the middle,
// and a controller that replaces a token (the step run ahead undone, and its draw taken back, on
// the dense models; the hybrid ones do not run ahead under a controller).
TEST_P(CudaModels, EngineRunningAheadGivesThePlainLoopsTokens) {
  struct Replacer : runtime::TokenController {
    int seen = 0;
    int32_t replacement = 0;
    runtime::ControlDecision on_sampled(int32_t) override {
      runtime::ControlDecision d;
      if (++seen == 3) d.keep = false, d.inject = {replacement, replacement};
      return d;
    }
  };
  const test::Golden g = test::load_golden(GetParam());
  runtime::EngineOptions off;
  off.run_ahead = runtime::EngineOptions::RunAhead::kOff;
  runtime::Engine ahead(model::load_model(path(), on(Device::kCuda)), {});
  runtime::Engine plain(model::load_model(path(), on(Device::kCuda)), off);
  for (float temperature : {0.0f, 0.9f}) {
    runtime::GenerationRequest req;
    req.prompt = g.prompt;
    req.max_tokens = 16;
    req.sampling.temperature = temperature;
    req.sampling.top_p = 0.9f;
    req.sampling.seed = 7;
    const std::vector<int32_t> tokens = plain.generate(req, {}).tokens;
    ASSERT_EQ(tokens.size(), 16u);
    EXPECT_EQ(ahead.generate(req, {}).tokens, tokens) << "temperature " << temperature;
    req.stop_ids = {tokens[6]};
    EXPECT_EQ(ahead.generate(req, {}).tokens, plain.generate(req, {}).tokens) << "temperature " << temperature;
    req.stop_ids.clear();
    Replacer a, b;
    a.replacement = b.replacement = g.greedy[0];
    req.controller = &a;
    const std::vector<int32_t> edited = ahead.generate(req, {}).tokens;
    req.controller = &b;
    EXPECT_EQ(edited, plain.generate(req, {}).tokens) << "temperature " << temperature;
  }
}

TEST_P(CudaModels, SnapshotRestoreAndStateMovesBetweenDevices) {
  const test::Golden g = test::load_golden(GetParam());
  auto gpu = model::load_model(path(), on(Device::kCuda));
  auto cpu = model::load_model(path(), on(Device::kCpu));
  const int64_t V = gpu->config().vocab_size;
  const std::span<const int32_t> prompt(g.prompt.data(), 50);
  HostTensor la(DType::kF32, {V}), lb(DType::kF32, {V});

  runtime::Sequence seq(*gpu, 128);
  seq.forward(*gpu, prompt, la, false);
  runtime::Snapshot snap(seq);
  snap.take(seq);
  for (int i = 0; i < 7; ++i) {
    const int32_t t[1] = {g.greedy[static_cast<size_t>(i)]};
    seq.forward(*gpu, t, lb, false);
  }
  snap.restore(seq);
  const int32_t next[1] = {g.greedy[0]};
  seq.forward(*gpu, next, la, false);
  runtime::Sequence fresh(*gpu, 128);
  fresh.forward(*gpu, prompt, lb, false);
  fresh.forward(*gpu, next, lb, false);
  EXPECT_EQ(std::memcmp(la.as<float>(), lb.as<float>(), static_cast<size_t>(V) * sizeof(float)), 0);

  // The serialized state is the same bytes wherever it was made: a GPU state continues on the CPU.
  const std::vector<uint8_t> bytes = seq.serialize();
  runtime::Sequence moved(*cpu, 128);
  moved.deserialize(bytes);
  const int32_t after[1] = {g.greedy[1]};
  seq.forward(*gpu, after, la, false);
  moved.forward(*cpu, after, lb, false);
  EXPECT_LT(test::max_abs_diff(la.as<float>(), lb.as<float>(), V), kFloatTolerance);
}

// A Qwen3.5-MoE whose shared expert folds into the routed ones (synthetic weights: the goldens'
// shared experts are of another size): GPU decode steps and prompts against the CPU's, which
// computes the folded expert exactly as the separate one; and the folded GPU model against the
// GPU model that runs the shared expert on its own (LoadOptions::moe_fold_shared false), step by
// step.
TEST(CudaMoe, FoldedSharedExpertAgreesWithTheCpuAndTheSeparateExpert) {
  if (!backend::device_available(Device::kCuda)) GTEST_SKIP() << "no CUDA device";
  for (int bits : {4, 8}) {
    SCOPED_TRACE(bits);
    const model::SyntheticCheckpoint ck =
        model::make_synthetic_checkpoint(test::tiny_hybrid_config(true), {.bits = bits});
    auto load = [&](Device device, bool fold_shared = true) {
      model::LoadOptions options = on(device);
      options.moe_fold_shared = fold_shared;
      return model::load_model(ck.config, formats::WeightStore::from_tensors(ck.tensors), options);
    };
    auto cpu = load(Device::kCpu), gpu = load(Device::kCuda);
    auto separate = load(Device::kCuda, false);
    ASSERT_EQ(gpu->info().moe_shared_folded, 4);
    ASSERT_EQ(separate->info().moe_shared_folded, 0);
    const std::vector<int32_t> prompt = {1, 7, 42, 3, 99, 5, 17, 200, 64, 8, 150, 2};
    const std::vector<float> a = decode_logits(*cpu, prompt, 8), b = decode_logits(*gpu, prompt, 8),
                             c = decode_logits(*separate, prompt, 8);
    const int64_t n = static_cast<int64_t>(a.size());
    EXPECT_LT(test::max_abs_diff(a.data(), b.data(), n), kQuantizedDecodeTolerance);
    EXPECT_LT(test::max_abs_diff(c.data(), b.data(), n), kQuantizedDecodeTolerance);
    // A prompt (the grouped GEMM over the sorted pairs, the shared expert's among them).
    const int64_t T = static_cast<int64_t>(prompt.size()), V = cpu->config().vocab_size;
    HostTensor lc(DType::kF32, {T, V}), lg(DType::kF32, {T, V});
    model::ModelState sc = cpu->new_state(T), sg = gpu->new_state(T);
    cpu->forward(prompt, sc, lc, true);
    gpu->forward(prompt, sg, lg, true);
    double sum = 0.0;
    float max_logit = 0.0f;
    for (int64_t i = 0; i < T * V; ++i) {
      sum += std::fabs(lc.as<float>()[i] - lg.as<float>()[i]);
      max_logit = std::max(max_logit, std::fabs(lc.as<float>()[i]));
    }
    EXPECT_LT(sum / static_cast<double>(T * V), kQuantizedMoePrefillMeanRelTolerance * max_logit);
    std::printf("[ synthetic moe q%d, shared expert folded ] decode max|dlogit| vs cpu %.2e, vs separate %.2e\n",
                bits, test::max_abs_diff(a.data(), b.data(), n), test::max_abs_diff(c.data(), b.data(), n));
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, CudaModels,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "qwen35",
                                           "qwen35_tied", "qwen35_moe", "qwen3_next"));

}  // namespace
}  // namespace strata
