// Core: dtype conversions, tensors, mmap and atomic writes, hashing.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/mmap.h"
#include "core/tensor.h"
#include "test_util.h"

namespace strata {
namespace {

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly half-way between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3*2^-8 is half-way; the even neighbour is 1 + 2^-6 (0x3f82).
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  EXPECT_FLOAT_EQ(bf16_to_f32(0xc040), -3.0f);
}

TEST(DType, F16RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    const float f = f16_to_f32(v);
    if (f != f) continue;  // NaN payloads need not survive
    EXPECT_EQ(f32_to_f16(f), v) << "half 0x" << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_FLOAT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_FLOAT_EQ(f16_to_f32(0x0001), 5.9604645e-08f);
}

TEST(DType, F8E4M3DecodesKnownValues) {
  EXPECT_FLOAT_EQ(f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_FLOAT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_FLOAT_EQ(f8e4m3_to_f32(0x01), 0.001953125f);
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7f)));
}

TEST(DType, ParsesSafetensorsNames) {
  DType d;
  ASSERT_TRUE(parse_dtype("F8_E4M3", &d));
  EXPECT_EQ(d, DType::kF8E4M3);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_FALSE(parse_dtype("F17", &d));
}

TEST(Tensor, RowsAndReshapeAreViews) {
  HostTensor t(DType::kF32, {4, 3});
  for (int i = 0; i < 12; ++i) t.as<float>()[i] = static_cast<float>(i);
  Tensor r = t.view().rows(1, 3);
  EXPECT_EQ(r.shape, Shape({2, 3}));
  EXPECT_EQ(r.as<float>()[0], 3.0f);
  EXPECT_EQ(t.view().reshaped({12}).numel(), 12);
  EXPECT_THROW(t.view().reshaped({5}), Error);
  EXPECT_THROW(t.view().rows(2, 5), Error);
}

TEST(File, AtomicWriteThenMapReadsSameBytes) {
  const std::string dir = test::scratch_dir("core_file");
  const std::string path = dir + "/x.bin";
  write_file_atomic(path, "hello strata");
  MappedFile m(path);
  ASSERT_EQ(m.size(), 12u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data()), m.size()), "hello strata");
  EXPECT_EQ(read_file(path), "hello strata");
}

TEST(File, MissingFileIsNotFound) {
  try {
    MappedFile m("/nonexistent/strata.bin");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/strata.bin"), std::string::npos);
  }
}

TEST(Hash, StableAndSensitive) {
  EXPECT_EQ(hash64("abc"), hash64("abc"));
  EXPECT_NE(hash64("abc"), hash64("abd"));
  Hasher a, b;
  a.update("hello ");
  a.update("world");
  b.update("hello world");
  EXPECT_EQ(a.hex_digest(), b.hex_digest());
  EXPECT_EQ(a.hex_digest().size(), 32u);
}

}  // namespace
}  // namespace strata
