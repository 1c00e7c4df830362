// safetensors: round trips through the writer, the real MLX fixture, every header validation rule
// (with hand-made corrupt files, truncations and random corruption), and WeightStore over
// directories and sharded indexes.
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "core/mmap.h"
#include "test_util.h"

namespace strata::formats {
namespace {

namespace fs = std::filesystem;

std::string with_length_prefix(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string write_raw(const std::string& dir, const std::string& name, const std::string& bytes) {
  return test::write_bytes(dir + "/" + name, bytes);
}

using test::expect_error;

template <typename T>
Tensor view_of(std::vector<T>& v, DType dtype, Shape shape) {
  return Tensor{v.data(), dtype, shape, Device::kCpu};
}

TEST(Safetensors, RoundTripsEveryDtype) {
  const std::string dir = test::scratch_dir("st_roundtrip");
  const DType all[] = {DType::kF32,    DType::kF16, DType::kBF16, DType::kF64, DType::kF8E4M3,
                       DType::kF8E5M2, DType::kI8,  DType::kU8,   DType::kI16, DType::kU16,
                       DType::kI32,    DType::kU32, DType::kI64,  DType::kU64, DType::kBool};
  std::vector<std::vector<uint8_t>> storage;
  std::map<std::string, Tensor> tensors;
  for (DType d : all) {
    const Shape shape{3, 5};
    std::vector<uint8_t> bytes(15 * dtype_size(d));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
    if (d == DType::kBool) std::fill(bytes.begin(), bytes.end(), 1);
    storage.push_back(std::move(bytes));
    tensors[std::string("t.") + std::string(dtype_name(d))] =
        Tensor{storage.back().data(), d, shape, Device::kCpu};
  }
  const std::string path = dir + "/all.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "x"}});

  const SafetensorsFile file(path);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "x"}}));
  for (const auto& [name, expected] : tensors) {
    const auto it = file.tensors().find(name);
    ASSERT_NE(it, file.tensors().end()) << name;
    EXPECT_EQ(it->second.dtype, expected.dtype) << name;
    EXPECT_EQ(it->second.shape, expected.shape) << name;
    EXPECT_EQ(it->second.device, Device::kCpu);
    ASSERT_EQ(it->second.nbytes(), expected.nbytes());
    EXPECT_EQ(std::memcmp(it->second.data, expected.data, expected.nbytes()), 0) << name;
  }
}

TEST(Safetensors, WriterPadsHeaderWithSpacesToAMultipleOf8) {
  const std::string dir = test::scratch_dir("st_pad");
  std::vector<float> v = {1.5f, -2.0f};
  for (const std::string name :
       {"a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "xyzxyzxy"}) {
    const std::string path = dir + "/" + name + ".safetensors";
    write_safetensors(path, {{name, view_of(v, DType::kF32, Shape{2})}});
    const std::string bytes = read_file(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ(n % 8, 0u) << name;
    ASSERT_EQ(bytes.size(), 8 + n + 8) << name;
    const std::string header = bytes.substr(8, n);
    const size_t last = header.find_last_not_of(' ');
    EXPECT_EQ(header[last], '}') << name;
    EXPECT_LT(n - (last + 1), 8u) << "padding longer than needed";
    EXPECT_EQ(Json::parse(header)[name]["data_offsets"], Json::parse("[0, 8]"));
    float back[2];
    std::memcpy(back, bytes.data() + 8 + n, 8);
    EXPECT_EQ(back[0], 1.5f);
    EXPECT_EQ(back[1], -2.0f);
  }
}

TEST(Safetensors, AcceptsEmptyAndScalarTensors) {
  const std::string dir = test::scratch_dir("st_empty");
  const std::string path =
      write_raw(dir, "e.safetensors",
                with_length_prefix(R"({"empty":{"dtype":"F32","shape":[0,4],"data_offsets":[4,4]},)"
                                   R"("scalar":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})",
                                   std::string("\x2a\0\0\0", 4)));
  const SafetensorsFile file(path);
  EXPECT_EQ(file.tensors().at("empty").numel(), 0);
  EXPECT_EQ(file.tensors().at("empty").shape, Shape({0, 4}));
  EXPECT_EQ(file.tensors().at("scalar").rank(), 0);
  int32_t scalar;  // the hand-made header is not padded, so the data may be unaligned
  std::memcpy(&scalar, file.tensors().at("scalar").data, 4);
  EXPECT_EQ(scalar, 42);
  EXPECT_TRUE(file.metadata().empty());
}

TEST(Safetensors, ReadsTheSharedMlxFixture) {
  // Header facts read with Python's json module from the file itself.
  const SafetensorsFile file(test::shared_fixture("mlx-quant/affine_vectors.safetensors"));
  EXPECT_EQ(file.tensors().size(), 180u);
  EXPECT_EQ(file.metadata().at("format"), "mlx");
  const Tensor& w = file.tensors().at("b2.g128.bf16.weight");
  EXPECT_EQ(w.dtype, DType::kU32);
  EXPECT_EQ(w.shape, Shape({50, 16}));
  const Tensor& in = file.tensors().at("b4.g64.f32.input");
  EXPECT_EQ(in.dtype, DType::kF32);
  // The header is 15625 bytes, so this file's data buffer starts at an odd offset: read with
  // memcpy. Row 48 is the constant row (0.25).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(in.data) % 2, 1u);
  float first, last;
  std::memcpy(&first, static_cast<const float*>(in.data) + 48 * 256, 4);
  std::memcpy(&last, static_cast<const float*>(in.data) + 48 * 256 + 255, 4);
  EXPECT_EQ(first, 0.25f);
  EXPECT_EQ(last, 0.25f);
}

struct BadHeader {
  const char* name;
  std::string header;
  size_t data_bytes;
  ErrorKind kind;
  const char* says;
};

TEST(Safetensors, RejectsInvalidHeadersNamingTheFile) {
  const auto k = ErrorKind::kInvalidInput;
  const BadHeader cases[] = {
      {"not_json", "{\"a\": ", 0, k, "not valid JSON"},
      {"not_object", "[1, 2]", 0, k, "must be a JSON object"},
      {"entry_not_object", R"({"a": 5})", 0, k, "'a'"},
      {"missing_dtype", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, k, "'dtype'"},
      {"missing_shape", R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4, k, "'shape'"},
      {"missing_offsets", R"({"a":{"dtype":"F32","shape":[1]}})", 4, k, "'data_offsets'"},
      {"dtype_not_string", R"({"a":{"dtype":1,"shape":[1],"data_offsets":[0,4]}})", 4, k,
       "dtype must be a string"},
      {"shape_not_list", R"({"a":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4, k,
       "shape must be a list"},
      {"dim_not_integer", R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, k,
       "integers"},
      {"negative_dim", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, k,
       "negative"},
      {"offsets_three", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 8, k,
       "data_offsets"},
      {"offsets_negative", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4, k,
       "data_offsets"},
      {"offsets_not_list", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":4}})", 4, k,
       "data_offsets"},
      {"unknown_dtype", R"({"a":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}})", 4, k,
       "unknown dtype 'F17'"},
      {"newer_dtype", R"({"a":{"dtype":"F8_E8M0","shape":[1],"data_offsets":[0,1]}})", 1,
       ErrorKind::kUnsupported, "F8_E8M0"},
      {"outside_buffer", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, k,
       "outside"},
      {"end_before_begin", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8, k,
       "before begin"},
      {"size_mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, k, "needs"},
      {"bf16_size_mismatch", R"({"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]}})", 16, k,
       "needs"},
      {"shape_overflow",
       R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0, k,
       "overflows"},
      {"numel_times_size_overflow",
       R"({"a":{"dtype":"F64","shape":[2305843009213693952,2],"data_offsets":[0,0]}})", 0, k,
       "needs"},
      {"product_wraps_to_size",  // 2^62 * 4 wraps to 0 in 64 bits: must not look like 0 bytes
       R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0, k, "a"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, k, "overlap"},
      {"duplicate_name",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, k, "duplicate key 'a'"},
      {"duplicate_field", R"({"a":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
       4, k, "duplicate key 'dtype'"},
      {"metadata_not_object", R"({"__metadata__":["x"]})", 0, k, "__metadata__"},
      {"metadata_not_strings", R"({"__metadata__":{"format":1}})", 0, k, "'format'"},
      {"rank_too_high", R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1,
       ErrorKind::kUnsupported, "rank 7"},
      {"invalid_utf8", "{\"a\xff\": {}}", 0, k, "not valid JSON"},
  };
  const std::string dir = test::scratch_dir("st_bad");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = write_raw(dir, std::string(c.name) + ".safetensors",
                                       with_length_prefix(c.header, std::string(c.data_bytes, 0)));
    expect_error([&] { SafetensorsFile f(path); }, c.kind, {path, c.says});
  }
}

TEST(Safetensors, RejectsFilesTooShortForTheirHeader) {
  const std::string dir = test::scratch_dir("st_short");
  const std::string tiny = write_raw(dir, "tiny.safetensors", "abc");
  expect_error([&] { SafetensorsFile f(tiny); }, ErrorKind::kInvalidInput, {tiny, "shorter"});

  const std::string empty = write_raw(dir, "empty.safetensors", "");
  expect_error([&] { SafetensorsFile f(empty); }, ErrorKind::kInvalidInput, {empty});

  std::string longer = with_length_prefix("{}");
  longer[0] = 100;  // claims 100 header bytes, has 2
  const std::string past = write_raw(dir, "past.safetensors", longer);
  expect_error([&] { SafetensorsFile f(past); }, ErrorKind::kInvalidInput, {past, "past the end"});

  std::string huge = with_length_prefix("{}");
  const uint64_t n = 200'000'000;
  std::memcpy(huge.data(), &n, 8);
  const std::string big = write_raw(dir, "big.safetensors", huge);
  expect_error([&] { SafetensorsFile f(big); }, ErrorKind::kInvalidInput, {big, "limit"});

  std::string max = with_length_prefix("{}");
  std::memset(max.data(), 0xff, 8);
  const std::string ff = write_raw(dir, "ff.safetensors", max);
  expect_error([&] { SafetensorsFile f(ff); }, ErrorKind::kInvalidInput, {ff});
}

std::string valid_two_tensor_file() {
  std::string data(24, '\0');
  for (int i = 0; i < 24; ++i) data[i] = static_cast<char>(i);
  return with_length_prefix(
      R"({"__metadata__":{"format":"mlx"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]}})",
      data);
}

TEST(Safetensors, RejectsEveryTruncation) {
  const std::string dir = test::scratch_dir("st_trunc");
  const std::string full = valid_two_tensor_file();
  {
    const SafetensorsFile ok(write_raw(dir, "full.safetensors", full));
    ASSERT_EQ(ok.tensors().size(), 2u);
    EXPECT_EQ(static_cast<const uint8_t*>(ok.tensors().at("b").data)[0], 16);
  }
  for (size_t len = 0; len < full.size(); ++len) {
    const std::string path = write_raw(dir, "cut.safetensors", full.substr(0, len));
    EXPECT_THROW(SafetensorsFile f(path), Error) << "truncated to " << len << " bytes";
  }
}

TEST(Safetensors, SurvivesRandomCorruptionWithErrorsOnly) {
  const std::string dir = test::scratch_dir("st_fuzz");
  const std::string full = valid_two_tensor_file();
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string bytes = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xff);
    }
    const std::string path = write_raw(dir, "fuzz.safetensors", bytes);
    try {
      const SafetensorsFile file(path);
      // Whatever is accepted must fit in the file; touch every byte of it.
      uint64_t total = 0, checksum = 0;
      for (const auto& [name, t] : file.tensors()) {
        total += t.nbytes();
        for (size_t i = 0; i < t.nbytes(); ++i) checksum += static_cast<const uint8_t*>(t.data)[i];
      }
      EXPECT_LE(total, bytes.size()) << "iteration " << iter << " checksum " << checksum;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

// --- WeightStore ---

struct Checkpoint {
  std::vector<float> a = {1, 2, 3, 4};
  std::vector<float> b = {5, 6};
  std::vector<uint16_t> c = {0x3f80, 0x4000, 0x4040};
};

TEST(WeightStore, OpensASingleFileByPath) {
  const std::string dir = test::scratch_dir("ws_file");
  Checkpoint ck;
  write_safetensors(dir + "/x.safetensors", {{"a", view_of(ck.a, DType::kF32, Shape{2, 2})}},
                    {{"format", "mlx"}});
  const WeightStore store = WeightStore::open(dir + "/x.safetensors");
  EXPECT_TRUE(store.contains("a"));
  EXPECT_EQ(store.get("a").as<float>()[3], 4.0f);
  EXPECT_EQ(store.metadata().at("format"), "mlx");
}

TEST(WeightStore, PrefersModelSafetensorsInADirectory) {
  const std::string dir = test::scratch_dir("ws_dir");
  Checkpoint ck;
  write_safetensors(dir + "/model.safetensors", {{"a", view_of(ck.a, DType::kF32, Shape{4})}});
  write_safetensors(dir + "/other.safetensors", {{"zzz", view_of(ck.b, DType::kF32, Shape{2})}});
  const WeightStore store = WeightStore::open(dir);
  EXPECT_EQ(store.names(), std::vector<std::string>{"a"});
}

void write_sharded(const std::string& dir, Checkpoint& ck) {
  write_safetensors(dir + "/model-00001-of-00002.safetensors",
                    {{"model.a", view_of(ck.a, DType::kF32, Shape{4})},
                     {"model.b", view_of(ck.b, DType::kF32, Shape{2})}},
                    {{"format", "mlx"}});
  write_safetensors(dir + "/model-00002-of-00002.safetensors",
                    {{"lm_head.c", view_of(ck.c, DType::kBF16, Shape{3})}});
  write_file_atomic(dir + "/model.safetensors.index.json", R"({
    "metadata": {"total_size": 30},
    "weight_map": {"lm_head.c": "model-00002-of-00002.safetensors",
                   "model.a": "model-00001-of-00002.safetensors",
                   "model.b": "model-00001-of-00002.safetensors"}})");
}

TEST(WeightStore, OpensAShardedCheckpointThroughItsIndex) {
  const std::string dir = test::scratch_dir("ws_sharded");
  Checkpoint ck;
  write_sharded(dir, ck);
  const WeightStore store = WeightStore::open(dir);
  EXPECT_EQ(store.names(), (std::vector<std::string>{"lm_head.c", "model.a", "model.b"}));
  EXPECT_EQ(store.get("model.b").as<float>()[1], 6.0f);
  EXPECT_EQ(store.get("lm_head.c").dtype, DType::kBF16);
  EXPECT_EQ(store.get("lm_head.c").as<uint16_t>()[2], 0x4040);
  ASSERT_NE(store.find("model.a"), nullptr);
  EXPECT_EQ(store.find("model.zzz"), nullptr);
  // The index file itself may be passed too.
  const WeightStore by_index = WeightStore::open(dir + "/model.safetensors.index.json");
  EXPECT_EQ(by_index.names().size(), 3u);
}

TEST(WeightStore, ReportsAMissingShardByName) {
  const std::string dir = test::scratch_dir("ws_missing");
  Checkpoint ck;
  write_sharded(dir, ck);
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  expect_error([&] { WeightStore::open(dir); }, ErrorKind::kNotFound,
               {"model-00002-of-00002.safetensors", "missing", "model.safetensors.index.json"});
}

TEST(WeightStore, RejectsAnIndexThatPointsAtTheWrongShard) {
  const std::string dir = test::scratch_dir("ws_wrong");
  Checkpoint ck;
  write_sharded(dir, ck);
  write_file_atomic(dir + "/model.safetensors.index.json",
                    R"({"weight_map": {"model.a": "model-00002-of-00002.safetensors"}})");
  expect_error([&] { WeightStore::open(dir); }, ErrorKind::kInvalidInput,
               {"model.a", "does not contain"});
}

TEST(WeightStore, RejectsShardNamesOutsideTheCheckpoint) {
  const std::string dir = test::scratch_dir("ws_escape");
  write_file_atomic(dir + "/model.safetensors.index.json",
                    R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  expect_error([&] { WeightStore::open(dir); }, ErrorKind::kInvalidInput, {"elsewhere"});
  write_file_atomic(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": 3}})");
  expect_error([&] { WeightStore::open(dir); }, ErrorKind::kInvalidInput, {"'a'"});
  write_file_atomic(dir + "/model.safetensors.index.json", R"({"metadata": {}})");
  expect_error([&] { WeightStore::open(dir); }, ErrorKind::kInvalidInput, {"weight_map"});
}

TEST(WeightStore, MergesLooseFilesAndRejectsATensorInTwo) {
  const std::string dir = test::scratch_dir("ws_loose");
  Checkpoint ck;
  write_safetensors(dir + "/one.safetensors", {{"a", view_of(ck.a, DType::kF32, Shape{4})}},
                    {{"from", "one"}});
  write_safetensors(dir + "/two.safetensors", {{"b", view_of(ck.b, DType::kF32, Shape{2})}});
  const WeightStore store = WeightStore::open(dir);
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(store.metadata().at("from"), "one");  // the first file in sorted order

  write_safetensors(dir + "/three.safetensors", {{"a", view_of(ck.b, DType::kF32, Shape{2})}});
  expect_error([&] { WeightStore::open(dir); }, ErrorKind::kInvalidInput,
               {"'a'", "more than one file"});
}

TEST(WeightStore, ReportsUnknownTensorsAndEmptyCheckpointsAsNotFound) {
  const std::string dir = test::scratch_dir("ws_notfound");
  expect_error([&] { WeightStore::open(dir); }, ErrorKind::kNotFound, {dir});
  expect_error([&] { WeightStore::open(dir + "/nope"); }, ErrorKind::kNotFound, {"nope"});
  Checkpoint ck;
  write_safetensors(dir + "/m.safetensors", {{"a", view_of(ck.a, DType::kF32, Shape{4})}});
  const WeightStore store = WeightStore::open(dir);
  expect_error([&] { store.get("model.embed_tokens.weight"); }, ErrorKind::kNotFound,
               {"model.embed_tokens.weight"});
}

TEST(WeightStore, FromTensorsServesTheCallersMemoryLikeAFileStore) {
  Checkpoint ck;
  const std::map<std::string, Tensor> tensors = {
      {"model.b", view_of(ck.b, DType::kF32, Shape{2})},
      {"model.a", view_of(ck.a, DType::kF32, Shape{2, 2})},
      {"lm_head.c", view_of(ck.c, DType::kBF16, Shape{3})}};
  const WeightStore store = WeightStore::from_tensors(tensors, {{"format", "mlx"}});
  EXPECT_EQ(store.names(), (std::vector<std::string>{"lm_head.c", "model.a", "model.b"}));
  // Views, not copies: a model loaded from the store reads this memory.
  EXPECT_EQ(store.get("model.a").data, ck.a.data());
  EXPECT_EQ(store.get("model.a").shape, (Shape{2, 2}));
  EXPECT_EQ(store.get("lm_head.c").dtype, DType::kBF16);
  EXPECT_TRUE(store.contains("model.b"));
  EXPECT_EQ(store.find("model.zzz"), nullptr);
  EXPECT_EQ(store.metadata().at("format"), "mlx");
  expect_error([&] { store.get("model.zzz"); }, ErrorKind::kNotFound, {"model.zzz"});
  EXPECT_TRUE(WeightStore::from_tensors({}).metadata().empty());
}

TEST(WeightStore, FromTensorsRejectsTensorsOutsideHostMemory) {
  Checkpoint ck;
  Tensor on_gpu = view_of(ck.a, DType::kF32, Shape{4});
  on_gpu.device = Device::kCuda;
  expect_error(
      [&] {
        WeightStore::from_tensors({{"a", on_gpu}});
      },
      ErrorKind::kInvalidInput, {"'a'", "host memory"});
  const Tensor no_data{nullptr, DType::kF32, Shape{4}, Device::kCpu};
  expect_error(
      [&] {
        WeightStore::from_tensors({{"b", no_data}});
      },
      ErrorKind::kInvalidInput, {"'b'", "no data"});
}

}  // namespace
}  // namespace strata::formats
