// MLX affine quantization: bit-exact conformance with MLX's own quantize/dequantize (the shared
// affine_vectors.safetensors, made by MLX @846d176 on CPU), packing, and the config.json reader.
#include "formats/mlx_quant.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/safetensors.h"
#include "test_util.h"

namespace strata::formats {
namespace {

constexpr int kBits[] = {2, 3, 4, 5, 6, 8};
constexpr int kGroups[] = {32, 64, 128};
constexpr const char* kDtypes[] = {"bf16", "f32"};

const SafetensorsFile& vectors() {
  static const SafetensorsFile file(test::shared_fixture("mlx-quant/affine_vectors.safetensors"));
  return file;
}

const Tensor& vector(const std::string& prefix, const char* field) {
  const auto& tensors = vectors().tensors();
  const auto it = tensors.find(prefix + "." + field);
  if (it == tensors.end()) throw std::runtime_error("fixture lacks " + prefix + "." + field);
  return it->second;
}

// Compares raw bytes and reports the first differing element (as raw bits).
void expect_same_bits(const Tensor& expected, const Tensor& actual, const std::string& what) {
  ASSERT_EQ(expected.dtype, actual.dtype) << what;
  ASSERT_EQ(expected.shape, actual.shape)
      << what << ": " << expected.shape.str() << " vs " << actual.shape.str();
  const size_t elem = dtype_size(expected.dtype);
  const auto* e = static_cast<const uint8_t*>(expected.data);
  const auto* a = static_cast<const uint8_t*>(actual.data);
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    if (std::memcmp(e + i * elem, a + i * elem, elem) != 0) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  if (mismatches > 0) {
    uint64_t ev = 0, av = 0;
    std::memcpy(&ev, e + first * elem, elem);
    std::memcpy(&av, a + first * elem, elem);
    ADD_FAILURE() << what << ": " << mismatches << " of " << expected.numel()
                  << " elements differ; first at " << first << " (row "
                  << first / expected.shape[-1] << "): expected bits 0x" << std::hex << ev
                  << ", got 0x" << av;
  }
}

// Element i of a tensor that may be unaligned (the fixture's data buffer starts at an odd offset).
template <typename T>
T at(const Tensor& t, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(t.data) + i * sizeof(T), sizeof(T));
  return v;
}

struct Case {
  int bits;
  int group_size;
  std::string dtype;
  std::string prefix() const { return fmt::format("b{}.g{}.{}", bits, group_size, dtype); }
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int b : kBits)
    for (int g : kGroups)
      for (const char* d : kDtypes) cases.push_back({b, g, d});
  return cases;
}

class MlxAffineVectors : public ::testing::TestWithParam<Case> {};

TEST_P(MlxAffineVectors, QuantizeMatchesMlxBitForBit) {
  const Case& c = GetParam();
  const QuantizedMatrix q = quantize_affine(vector(c.prefix(), "input"), {c.bits, c.group_size});
  expect_same_bits(vector(c.prefix(), "weight"), q.weight, c.prefix() + ".weight");
  expect_same_bits(vector(c.prefix(), "scales"), q.scales, c.prefix() + ".scales");
  expect_same_bits(vector(c.prefix(), "biases"), q.biases, c.prefix() + ".biases");
}

TEST_P(MlxAffineVectors, DequantizeMatchesMlxBitForBit) {
  const Case& c = GetParam();
  const Tensor& scales = vector(c.prefix(), "scales");
  const HostTensor out =
      dequantize_affine(vector(c.prefix(), "weight"), scales, vector(c.prefix(), "biases"),
                        {c.bits, c.group_size}, scales.dtype);
  expect_same_bits(vector(c.prefix(), "dequantized"), out, c.prefix() + ".dequantized");
}

INSTANTIATE_TEST_SUITE_P(AllBitsGroupsDtypes, MlxAffineVectors, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return fmt::format("b{}_g{}_{}", info.param.bits, info.param.group_size,
                                              info.param.dtype);
                         });

TEST(MlxQuant, FixtureHoldsEveryVector) {
  EXPECT_EQ(vectors().tensors().size(), 36u * 5u);
  for (const Case& c : all_cases()) {
    const Tensor& input = vector(c.prefix(), "input");
    EXPECT_EQ(input.shape, Shape({50, 256})) << c.prefix();
    EXPECT_EQ(vector(c.prefix(), "weight").shape, Shape({50, 256 * c.bits / 32})) << c.prefix();
    EXPECT_EQ(vector(c.prefix(), "scales").shape, Shape({50, 256 / c.group_size})) << c.prefix();
  }
}

TEST(MlxQuant, DequantizeToF32IsTheCastOfTheScalesDtypeResult) {
  // mx.dequantize(..., dtype=float32) with bf16 scales computes in bf16 and then casts.
  const std::string p = "b4.g64.bf16";
  const HostTensor f32 = dequantize_affine(vector(p, "weight"), vector(p, "scales"),
                                           vector(p, "biases"), {4, 64}, DType::kF32);
  const Tensor& expected = vector(p, "dequantized");
  ASSERT_EQ(f32.shape(), expected.shape);
  for (int64_t i = 0; i < f32.numel(); ++i) {
    ASSERT_EQ(f32.as<float>()[i], bf16_to_f32(at<uint16_t>(expected, i))) << "element " << i;
  }
}

TEST(MlxQuant, ConstantRowDequantizesExactly) {
  // Row 48 of the input is constant: the anchored edge is exact, so every value comes back.
  for (const Case& c : all_cases()) {
    if (c.dtype != "f32") continue;
    const Tensor in = vector(c.prefix(), "input").rows(48, 49);
    const QuantizedMatrix q = quantize_affine(in, {c.bits, c.group_size});
    const HostTensor back = dequantize_affine(q.weight, q.scales, q.biases, q.params, DType::kF32);
    for (int64_t i = 0; i < in.numel(); ++i) {
      ASSERT_EQ(back.as<float>()[i], at<float>(in, i)) << c.prefix() << " element " << i;
    }
  }
}

TEST(MlxQuant, PacksCodesAsAnLsbFirstBitStream) {
  // 3-bit codes 0..7 repeated: element i sits at bits [3i, 3i+3). By hand, the first 32 bits hold
  // codes 0..9 and the low 2 bits of code 10 (2 = 0b010 -> bits 30,31 = 0b10).
  const int bits = 3;
  std::vector<uint32_t> row(3, 0);
  uint64_t stream = 0;
  for (int i = 0; i < 21; ++i) stream |= static_cast<uint64_t>(i % 8) << (3 * i);
  row[0] = static_cast<uint32_t>(stream);
  row[1] = static_cast<uint32_t>(stream >> 32);
  EXPECT_EQ(row[0] >> 30, 0b10u);
  for (int i = 0; i < 21; ++i) EXPECT_EQ(unpack_code(row.data(), i, bits), i % 8u) << i;

  // A quantized row whose codes are known: values 0..7 anchored at 0 with step 1 under 3 bits.
  // |max| > |min| so MLX anchors on the max (7 -> code 0) with scale -1: code = 7 - value.
  HostTensor w(DType::kF32, Shape{1, 32});
  for (int i = 0; i < 32; ++i) w.as<float>()[i] = static_cast<float>(i % 8);
  const QuantizedMatrix q = quantize_affine(w, {3, 32});
  EXPECT_EQ(q.scales.as<float>()[0], -1.0f);
  EXPECT_EQ(q.biases.as<float>()[0], 7.0f);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(unpack_code(q.weight.as<uint32_t>(), i, 3), 7u - i % 8) << i;
  }
}

TEST(MlxQuant, RejectsUnsupportedParamsAndShapes) {
  HostTensor w(DType::kF32, Shape{2, 64});
  EXPECT_FALSE(is_supported_quant({7, 64}));
  EXPECT_FALSE(is_supported_quant({4, 16}));
  EXPECT_TRUE(is_supported_quant({3, 128}));
  try {
    quantize_affine(w, {7, 64});
    FAIL() << "7 bits accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  }
  try {
    quantize_affine(w, {4, 128});  // 64 columns is not a multiple of 128
    FAIL() << "ragged group accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
  HostTensor ints(DType::kI32, Shape{2, 64});
  EXPECT_THROW(quantize_affine(ints, {4, 64}), Error);

  const QuantizedMatrix q = quantize_affine(w, {4, 64});
  EXPECT_THROW(dequantize_affine(q.weight, q.scales, q.biases, {8, 64}, DType::kF32), Error);
  EXPECT_THROW(dequantize_affine(q.scales, q.scales, q.biases, {4, 64}, DType::kF32), Error);
  HostTensor other_biases(DType::kBF16, q.biases.shape());
  EXPECT_THROW(dequantize_affine(q.weight, q.scales, other_biases, {4, 64}, DType::kF32), Error);
}

TEST(MlxQuant, QuantizesStackedExpertsLikeRows) {
  // [E, out, in] quantizes as E*out rows (MLX's SwitchLinear layout).
  const Tensor& in = vector("b4.g64.f32", "input");
  const Tensor stacked = in.reshaped(Shape{5, 10, 256});
  const QuantizedMatrix q = quantize_affine(stacked, {4, 64});
  EXPECT_EQ(q.weight.shape(), Shape({5, 10, 32}));
  EXPECT_EQ(q.scales.shape(), Shape({5, 10, 4}));
  expect_same_bits(vector("b4.g64.f32", "weight").reshaped(Shape{5, 10, 32}), q.weight, "weight");
  const HostTensor back = dequantize_affine(q.weight, q.scales, q.biases, q.params, DType::kF32);
  expect_same_bits(vector("b4.g64.f32", "dequantized").reshaped(Shape{5, 10, 256}), back, "deq");
}

// --- QuantConfig ---

TEST(QuantConfig, AbsentSectionMeansNotQuantized) {
  const QuantConfig qc = QuantConfig::from_config(Json::parse(R"({"hidden_size": 64})"));
  EXPECT_FALSE(qc.present());
}

TEST(QuantConfig, ReadsDefaultsAndPerModuleOverrides) {
  const QuantConfig qc = QuantConfig::from_config(Json::parse(R"({
    "quantization": {
      "group_size": 32, "bits": 3, "mode": "affine",
      "language_model.model.layers.0.mlp.gate": {"group_size": 64, "bits": 8},
      "model.layers.1.self_attn.v_proj": {"group_size": 128, "bits": 6, "mode": "affine"},
      "model.layers.2.mlp.down_proj": false
    }})"));
  ASSERT_TRUE(qc.present());
  EXPECT_EQ(qc.defaults(), (QuantParams{3, 32}));
  EXPECT_EQ(qc.for_module("language_model.model.layers.0.mlp.gate"), (QuantParams{8, 64}));
  EXPECT_EQ(qc.for_module("model.layers.1.self_attn.v_proj"), (QuantParams{6, 128}));
  EXPECT_EQ(qc.for_module("model.layers.2.mlp.down_proj"), std::nullopt);
  EXPECT_EQ(qc.for_module("model.layers.0.mlp.up_proj"), (QuantParams{3, 32}));
}

TEST(QuantConfig, MissingFieldsDefaultToAffine64x4) {
  const QuantConfig qc = QuantConfig::from_config(Json::parse(R"({
    "quantization": {"bits": 8, "lm_head": {"group_size": 32}}})"));
  EXPECT_EQ(qc.defaults(), (QuantParams{8, 64}));
  // mlx.nn.quantize passes a per-module dict as the whole argument list: bits falls back to 4.
  EXPECT_EQ(qc.for_module("lm_head"), (QuantParams{4, 32}));
}

TEST(QuantConfig, FallsBackToQuantizationConfig) {
  const QuantConfig qc = QuantConfig::from_config(
      Json::parse(R"({"quantization_config": {"group_size": 128, "bits": 2}})"));
  ASSERT_TRUE(qc.present());
  EXPECT_EQ(qc.defaults(), (QuantParams{2, 128}));
}

TEST(QuantConfig, PrefersQuantizationOverQuantizationConfig) {
  const QuantConfig qc = QuantConfig::from_config(Json::parse(
      R"({"quantization": {"group_size": 64, "bits": 4},
          "quantization_config": {"group_size": 32, "bits": 8}})"));
  EXPECT_EQ(qc.defaults(), (QuantParams{4, 64}));
}

TEST(QuantConfig, RejectsModesOtherThanAffine) {
  for (const char* text : {R"({"quantization": {"group_size": 32, "bits": 4, "mode": "mxfp4"}})",
                           R"({"quantization": {"bits": 4, "a.b": {"bits": 8, "mode": "nvfp4"}}})",
                           R"({"quantization_config": {"quant_method": "gptq", "bits": 4}})"}) {
    try {
      QuantConfig::from_config(Json::parse(text));
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << text;
    }
  }
}

TEST(QuantConfig, RejectsUnsupportedOrMistypedParams) {
  const std::pair<const char*, ErrorKind> cases[] = {
      {R"({"quantization": {"group_size": 16, "bits": 4}})", ErrorKind::kUnsupported},
      {R"({"quantization": {"group_size": 64, "bits": 7}})", ErrorKind::kUnsupported},
      {R"({"quantization": {"group_size": "64", "bits": 4}})", ErrorKind::kInvalidInput},
      {R"({"quantization": [64, 4]})", ErrorKind::kInvalidInput},
      {R"({"quantization": {"bits": 4, "x": {"bits": "8"}}})", ErrorKind::kInvalidInput},
  };
  for (const auto& [text, kind] : cases) {
    try {
      QuantConfig::from_config(Json::parse(text));
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << text << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace strata::formats
