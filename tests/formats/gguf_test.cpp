// GGUF: the real stories260K file (metadata, layout, weights checked against the llama2.c copy of
// the same model), F16/BF16/Q8_0/Q4_0 conversion, block sizes, and crafted corrupt files
// (truncations, bad magic, huge counts and lengths, bad offsets) that must raise Error, never
// crash.
#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mmap.h"
#include "test_util.h"

namespace strata::formats {
namespace {

const std::string& stories_path() {
  static const std::string path = test::shared_fixture("models/stories260K/stories260K.gguf");
  return path;
}

// --- a small GGUF writer for crafted files ---

enum : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

struct CraftedTensor {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  std::string data;
  int64_t offset = -1;  // -1: placed after the previous tensor, aligned
};

struct Crafted {
  uint32_t version = 3;
  uint32_t alignment = 32;       // used for layout; add a general.alignment kv to declare it
  std::vector<std::string> kvs;  // encoded key/type/value
  std::vector<CraftedTensor> tensors;

  void kv(const std::string& key, uint32_t type, const std::string& value_bytes) {
    std::string e;
    put_str(e, key);
    put<uint32_t>(e, type);
    kvs.push_back(e + value_bytes);
  }
  void kv_u32(const std::string& key, uint32_t v) {
    std::string b;
    put(b, v);
    kv(key, kU32, b);
  }
  void kv_str(const std::string& key, const std::string& v) {
    std::string b;
    put_str(b, v);
    kv(key, kString, b);
  }

  std::string build() const {
    std::string out = "GGUF";
    put<uint32_t>(out, version);
    put<uint64_t>(out, tensors.size());
    put<uint64_t>(out, kvs.size());
    for (const auto& e : kvs) out += e;
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const auto& t : tensors) {
      const uint64_t off = t.offset >= 0 ? static_cast<uint64_t>(t.offset) : next;
      offsets.push_back(off);
      next = (off + t.data.size() + alignment - 1) / alignment * alignment;
      put_str(out, t.name);
      put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) put<uint64_t>(out, d);
      put<uint32_t>(out, t.type);
      put<uint64_t>(out, off);
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (offsets[i] > (1u << 20)) continue;  // a deliberately wild offset: nothing to place
      const size_t end = data_start + offsets[i] + tensors[i].data.size();
      if (out.size() < end) out.resize(end, '\0');
      std::memcpy(out.data() + data_start + offsets[i], tensors[i].data.data(),
                  tensors[i].data.size());
    }
    return out;
  }
};

std::string write_plain(const std::string& path, std::string_view bytes) { return test::write_bytes(path, bytes); }

using test::expect_error;

std::string f32_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) put(out, v);
  return out;
}

// A small valid file with metadata of several types and two tensors.
Crafted small_file() {
  Crafted c;
  c.kv_str("general.architecture", "llama");
  c.kv_u32("llama.block_count", 2);
  std::string arr;
  put<uint32_t>(arr, kString);
  put<uint64_t>(arr, 2);
  put_str(arr, "<s>");
  put_str(arr, "hi");
  c.kv("tokenizer.ggml.tokens", kArray, arr);
  c.tensors.push_back({"a", {2, 2}, 0, f32_bytes({1, 2, 3, 4})});
  c.tensors.push_back({"b", {3}, 0, f32_bytes({5, 6, 7})});
  return c;
}

// --- the real file ---

TEST(Gguf, ReadsStories260KMetadata) {
  const GgufFile f(stories_path());
  EXPECT_EQ(f.version(), 3u);
  const Json& m = f.metadata();
  EXPECT_EQ(m.size(), 19u);
  EXPECT_EQ(m.at("general.architecture"), "llama");
  EXPECT_EQ(m.at("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(m.at("llama.embedding_length").get<uint32_t>(), 64u);
  EXPECT_EQ(m.at("llama.feed_forward_length").get<uint32_t>(), 172u);
  EXPECT_EQ(m.at("llama.attention.head_count_kv").get<uint32_t>(), 4u);
  EXPECT_EQ(m.at("tokenizer.ggml.padding_token_id").get<uint32_t>(), 4294967295u);
  EXPECT_EQ(m.at("llama.attention.layer_norm_rms_epsilon").get<float>(), 1e-5f);
  const Json& tokens = m.at("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.is_array());
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(m.at("tokenizer.ggml.scores").size(), 512u);
  EXPECT_TRUE(m.at("tokenizer.ggml.scores")[0].is_number_float());
  EXPECT_EQ(m.at("tokenizer.ggml.token_type")[0].get<int>(), 2);
  EXPECT_EQ(m.at("tokenizer.ggml.token_type")[3].get<int>(), 6);
}

TEST(Gguf, ReadsStories260KTensorLayout) {
  const GgufFile f(stories_path());
  ASSERT_EQ(f.tensors().size(), 48u);
  const GgufTensorInfo* emb = f.find("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::kF32);
  EXPECT_EQ(emb->dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb->shape(), Shape({512, 64}));
  EXPECT_EQ(emb->nbytes, 512u * 64 * 4);
  EXPECT_EQ(emb->offset, 0u);
  const GgufTensorInfo* down = f.find("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape(), Shape({64, 172}));
  EXPECT_EQ(down->offset, 355840u);
  EXPECT_EQ(f.find("output_norm.weight")->shape(), Shape({64}));
  EXPECT_EQ(f.find("blk.9.attn_q.weight"), nullptr);
  EXPECT_EQ(ggml_type_name(emb->type), "F32");
}

// stories260K.bin is llama2.c's export of the same weights: header of 7 int32, then the tables.
TEST(Gguf, Stories260KWeightsMatchTheLlama2cCheckpoint) {
  const GgufFile f(stories_path());
  const MappedFile bin(test::shared_fixture("models/stories260K/stories260K.bin"));
  int32_t header[7];
  std::memcpy(header, bin.data(), sizeof(header));
  const int64_t dim = header[0], hidden = header[1], layers = header[2], heads = header[3],
                kv_heads = header[4], vocab = header[5];
  ASSERT_EQ(dim, 64);
  ASSERT_EQ(vocab, 512);
  const int64_t kv_dim = dim * kv_heads / heads;
  const auto* floats = reinterpret_cast<const float*>(bin.data() + sizeof(header));
  int64_t pos = 0;
  auto take = [&](int64_t n) {
    const float* p = floats + pos;
    pos += n;
    return p;
  };
  const float* emb = take(vocab * dim);
  const float* rms_att = take(layers * dim);
  take(layers * dim * dim);     // wq (GGUF permutes q/k rows for RoPE)
  take(layers * dim * kv_dim);  // wk
  const float* wv = take(layers * dim * kv_dim);
  const float* wo = take(layers * dim * dim);
  const float* rms_ffn = take(layers * dim);
  const float* w1 = take(layers * hidden * dim);
  const float* w2 = take(layers * dim * hidden);
  const float* w3 = take(layers * hidden * dim);
  const float* rms_final = take(dim);

  auto expect_tensor = [&](const std::string& name, const float* expected, int64_t n) {
    const GgufTensorInfo* info = f.find(name);
    ASSERT_NE(info, nullptr) << name;
    const HostTensor t = f.to_f32(*info);
    ASSERT_EQ(t.numel(), n) << name;
    EXPECT_EQ(std::memcmp(t.as<float>(), expected, n * 4), 0) << name;
  };
  expect_tensor("token_embd.weight", emb, vocab * dim);
  expect_tensor("output.weight", emb, vocab * dim);  // shared classifier
  expect_tensor("output_norm.weight", rms_final, dim);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    expect_tensor(p + "attn_norm.weight", rms_att + l * dim, dim);
    expect_tensor(p + "ffn_norm.weight", rms_ffn + l * dim, dim);
    expect_tensor(p + "attn_v.weight", wv + l * dim * kv_dim, dim * kv_dim);
    expect_tensor(p + "attn_output.weight", wo + l * dim * dim, dim * dim);
    expect_tensor(p + "ffn_gate.weight", w1 + l * hidden * dim, hidden * dim);
    expect_tensor(p + "ffn_down.weight", w2 + l * dim * hidden, dim * hidden);
    expect_tensor(p + "ffn_up.weight", w3 + l * hidden * dim, hidden * dim);
  }
}

TEST(Gguf, RejectsEveryTruncationOfTheRealFile) {
  const std::string dir = test::scratch_dir("gguf_trunc_real");
  const MappedFile full(stories_path());
  const std::string_view bytes(reinterpret_cast<const char*>(full.data()), full.size());
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 14200; n += (n < 600 ? 1 : 13)) cuts.push_back(n);  // header and infos
  for (size_t n = 14200; n < bytes.size(); n += 4093) cuts.push_back(n);     // data section
  cuts.push_back(bytes.size() - 1);
  for (size_t n : cuts) {
    const std::string path = write_plain(dir + "/cut.gguf", bytes.substr(0, n));
    EXPECT_THROW(GgufFile g(path), Error) << "truncated to " << n << " bytes";
  }
}

TEST(Gguf, SurvivesRandomCorruptionOfTheRealHeader) {
  const std::string dir = test::scratch_dir("gguf_fuzz_real");
  const MappedFile full(stories_path());
  const std::string original(reinterpret_cast<const char*>(full.data()), full.size());
  std::mt19937 rng(99);
  for (int iter = 0; iter < 150; ++iter) {
    std::string bytes = original;
    for (int k = 0; k < 3; ++k) bytes[rng() % 14176] = static_cast<char>(rng() & 0xff);
    const std::string path = write_plain(dir + "/fuzz.gguf", bytes);
    try {
      const GgufFile g(path);
      for (const auto& t : g.tensors()) ASSERT_LE(t.nbytes, bytes.size()) << t.name;
    } catch (const Error&) {
    }
  }
}

// --- conversion and block sizes ---

TEST(Gguf, ConvertsF16AndBf16ToF32) {
  const std::string dir = test::scratch_dir("gguf_f16");
  Crafted c;
  std::string f16, bf16;
  for (uint16_t h : {0x3c00, 0xc000, 0x3555, 0x0001}) put(f16, h);   // 1, -2, ~1/3, 2^-24
  for (uint16_t h : {0x3f80, 0x4049, 0xbf00, 0x0000}) put(bf16, h);  // 1, 3.140625, -0.5, 0
  c.tensors.push_back({"h", {2, 2}, 1, f16});
  c.tensors.push_back({"b", {4}, 30, bf16});
  const GgufFile f(write_plain(dir + "/f16.gguf", c.build()));
  const HostTensor h = f.to_f32(*f.find("h"));
  EXPECT_EQ(h.shape(), Shape({2, 2}));
  EXPECT_EQ(h.as<float>()[0], 1.0f);
  EXPECT_EQ(h.as<float>()[1], -2.0f);
  EXPECT_EQ(h.as<float>()[2], 0.333251953125f);
  EXPECT_EQ(h.as<float>()[3], 5.9604644775390625e-08f);
  const HostTensor b = f.to_f32(*f.find("b"));
  EXPECT_EQ(b.as<float>()[0], 1.0f);
  EXPECT_EQ(b.as<float>()[1], 3.140625f);
  EXPECT_EQ(b.as<float>()[2], -0.5f);
  EXPECT_EQ(b.as<float>()[3], 0.0f);
}

TEST(Gguf, DequantizesQ8_0Blocks) {
  // Block: f16 d, then 32 int8; value = q * d. Two blocks: d = 0.5 and d = -2.
  const std::string dir = test::scratch_dir("gguf_q8");
  std::string data;
  put<uint16_t>(data, 0x3800);  // 0.5
  for (int j = 0; j < 32; ++j) put<int8_t>(data, static_cast<int8_t>(j * 8 - 128));
  put<uint16_t>(data, 0xc000);  // -2
  for (int j = 0; j < 32; ++j) put<int8_t>(data, static_cast<int8_t>(j - 16));
  Crafted c;
  c.tensors.push_back({"q", {32, 2}, 8, data});
  const GgufFile f(write_plain(dir + "/q8.gguf", c.build()));
  ASSERT_EQ(f.find("q")->nbytes, 68u);
  const HostTensor t = f.to_f32(*f.find("q"));
  ASSERT_EQ(t.shape(), Shape({2, 32}));
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(t.as<float>()[j], (j * 8 - 128) * 0.5f) << j;
    EXPECT_EQ(t.as<float>()[32 + j], (j - 16) * -2.0f) << j;
  }
}

TEST(Gguf, DequantizesQ4_0WithLowNibblesFirst) {
  // Block: f16 d, then 16 bytes; byte j holds element j (low nibble) and j + 16 (high nibble);
  // value = (nibble - 8) * d.
  const std::string dir = test::scratch_dir("gguf_q4");
  std::string data;
  put<uint16_t>(data, 0x4000);  // 2
  for (int j = 0; j < 16; ++j) put<uint8_t>(data, static_cast<uint8_t>(j | ((15 - j) << 4)));
  Crafted c;
  c.tensors.push_back({"q", {32}, 2, data});
  const GgufFile f(write_plain(dir + "/q4.gguf", c.build()));
  ASSERT_EQ(f.find("q")->nbytes, 18u);
  const HostTensor t = f.to_f32(*f.find("q"));
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(t.as<float>()[j], (j - 8) * 2.0f) << j;
    EXPECT_EQ(t.as<float>()[16 + j], (7 - j) * 2.0f) << j;
  }
}

TEST(Gguf, SizesQuantizedTensorsByTheirBlocks) {
  // ggml-common.h: elements per block / bytes per block.
  const struct {
    uint32_t type;
    const char* name;
    uint64_t bytes_for_512;
  } kTypes[] = {
      {2, "Q4_0", 16 * 18},  {3, "Q4_1", 16 * 20},  {6, "Q5_0", 16 * 22},  {7, "Q5_1", 16 * 24},
      {8, "Q8_0", 16 * 34},  {9, "Q8_1", 16 * 36},  {10, "Q2_K", 2 * 84},  {11, "Q3_K", 2 * 110},
      {12, "Q4_K", 2 * 144}, {13, "Q5_K", 2 * 176}, {14, "Q6_K", 2 * 210}, {15, "Q8_K", 2 * 292},
      {24, "I8", 512},       {25, "I16", 1024},     {26, "I32", 2048},     {27, "I64", 4096},
      {28, "F64", 4096},     {30, "BF16", 1024},    {1, "F16", 1024},      {0, "F32", 2048},
  };
  const std::string dir = test::scratch_dir("gguf_blocks");
  Crafted c;
  for (const auto& t : kTypes) {
    c.tensors.push_back({t.name, {256, 2}, t.type, std::string(t.bytes_for_512, '\x11')});
  }
  const GgufFile f(write_plain(dir + "/blocks.gguf", c.build()));
  for (const auto& t : kTypes) {
    const GgufTensorInfo* info = f.find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->nbytes, t.bytes_for_512) << t.name;
    EXPECT_EQ(ggml_type_name(info->type), t.name);
  }
  expect_error([&] { f.to_f32(*f.find("Q4_K")); }, ErrorKind::kUnsupported, {"Q4_K", "'Q4_K'"});
}

TEST(Gguf, RejectsRowsThatAreNotWholeBlocks) {
  const std::string dir = test::scratch_dir("gguf_partial");
  Crafted c;
  c.tensors.push_back({"q", {48}, 8, std::string(68, '\0')});
  const std::string path = write_plain(dir + "/p.gguf", c.build());
  expect_error([&] { GgufFile g(path); }, ErrorKind::kInvalidInput, {path, "'q'", "blocks"});
}

// --- metadata values ---

TEST(Gguf, ReadsEveryValueTypeAndNestedArrays) {
  const std::string dir = test::scratch_dir("gguf_values");
  Crafted c;
  std::string b;
  auto kv = [&](const char* key, uint32_t type, auto value) {
    b.clear();
    put(b, value);
    c.kv(key, type, b);
  };
  kv("u8", kU8, uint8_t{200});
  kv("i8", kI8, int8_t{-100});
  kv("u16", kU16, uint16_t{60000});
  kv("i16", kI16, int16_t{-30000});
  kv("u32", kU32, uint32_t{4000000000u});
  kv("i32", kI32, int32_t{-2000000000});
  kv("f32", kF32, 0.1f);
  kv("bool", kBool, uint8_t{1});
  kv("u64", kU64, uint64_t{18000000000000000000ull});
  kv("i64", kI64, int64_t{-9000000000000000000ll});
  kv("f64", kF64, 0.1);
  c.kv_str("str", "héllo");
  std::string nested;  // [[1, 2], [3]] as arrays of i32
  put<uint32_t>(nested, kArray);
  put<uint64_t>(nested, 2);
  put<uint32_t>(nested, kI32);
  put<uint64_t>(nested, 2);
  put<int32_t>(nested, 1);
  put<int32_t>(nested, 2);
  put<uint32_t>(nested, kI32);
  put<uint64_t>(nested, 1);
  put<int32_t>(nested, 3);
  c.kv("nested", kArray, nested);
  std::string empty;
  put<uint32_t>(empty, kString);
  put<uint64_t>(empty, 0);
  c.kv("empty", kArray, empty);

  const GgufFile f(write_plain(dir + "/v.gguf", c.build()));
  const Json& m = f.metadata();
  EXPECT_EQ(m.at("u8").get<int>(), 200);
  EXPECT_EQ(m.at("i8").get<int>(), -100);
  EXPECT_EQ(m.at("u16").get<int>(), 60000);
  EXPECT_EQ(m.at("i16").get<int>(), -30000);
  EXPECT_EQ(m.at("u32").get<uint32_t>(), 4000000000u);
  EXPECT_EQ(m.at("i32").get<int32_t>(), -2000000000);
  EXPECT_EQ(m.at("f32").get<float>(), 0.1f);
  EXPECT_EQ(m.at("bool"), true);
  EXPECT_EQ(m.at("u64").get<uint64_t>(), 18000000000000000000ull);
  EXPECT_EQ(m.at("i64").get<int64_t>(), -9000000000000000000ll);
  EXPECT_EQ(m.at("f64").get<double>(), 0.1);
  EXPECT_EQ(m.at("str"), "héllo");
  EXPECT_EQ(m.at("nested"), Json::parse("[[1, 2], [3]]"));
  EXPECT_EQ(m.at("empty"), Json::array());
  EXPECT_TRUE(f.tensors().empty());
}

TEST(Gguf, ReadsVersion2AndHonoursGeneralAlignment) {
  const std::string dir = test::scratch_dir("gguf_align");
  Crafted c = small_file();
  c.version = 2;
  c.alignment = 64;
  c.kv_u32("general.alignment", 64);
  const std::string bytes = c.build();
  const GgufFile f(write_plain(dir + "/a.gguf", bytes));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.find("b")->offset, 64u);
  EXPECT_EQ(f.to_f32(*f.find("b")).as<float>()[2], 7.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.find("a")->data) % 64,
            0u);  // the mapping is page aligned
  EXPECT_EQ(f.metadata().at("tokenizer.ggml.tokens"), Json::parse(R"(["<s>", "hi"])"));
}

// --- corrupt files ---

struct Corrupt {
  const char* name;
  std::string bytes;
  ErrorKind kind;
  const char* says;
};

std::string header_only(uint32_t version, uint64_t tensors, uint64_t kvs) {
  std::string out = "GGUF";
  put(out, version);
  put(out, tensors);
  put(out, kvs);
  return out;
}

std::vector<Corrupt> corrupt_files() {
  const auto k = ErrorKind::kInvalidInput;
  std::vector<Corrupt> out;
  std::string s = small_file().build();
  s[0] = 'X';
  out.push_back({"bad_magic", s, k, "not a GGUF file"});
  out.push_back({"version_1", header_only(1, 0, 0), ErrorKind::kUnsupported, "version 1"});
  out.push_back({"version_4", header_only(4, 0, 0), ErrorKind::kUnsupported, "version 4"});
  out.push_back({"big_endian", header_only(0x03000000, 0, 0), ErrorKind::kUnsupported, "version"});
  out.push_back({"huge_tensor_count", header_only(3, 1ull << 62, 0), k, "tensor count"});
  out.push_back({"huge_kv_count", header_only(3, 0, 1ull << 40), k, "metadata count"});

  std::string key_len = header_only(3, 0, 1);
  put<uint64_t>(key_len, 1ull << 63);
  out.push_back({"huge_key_length", key_len + std::string(32, 'k'), k, "truncated"});

  Crafted c;
  std::string value;
  put<uint64_t>(value, 1000);  // string length past the end
  value += "short";
  c.kv("general.name", kString, value);
  out.push_back({"bad_string_length", c.build(), k, "general.name"});

  c = Crafted();
  std::string arr;
  put<uint32_t>(arr, kU8);
  put<uint64_t>(arr, 1ull << 62);
  c.kv("big.array", kArray, arr + "xyz");
  out.push_back({"huge_array", c.build(), k, "cannot fit"});

  c = Crafted();
  arr.clear();
  put<uint32_t>(arr, kString);
  put<uint64_t>(arr, 3);
  put_str(arr, "ok");
  put<uint64_t>(arr, 1ull << 40);
  c.kv("tokens", kArray, arr + std::string(64, 'x'));
  out.push_back({"bad_string_in_array", c.build(), k, "tokens"});

  c = Crafted();
  std::string deep;
  for (int i = 0; i < 40; ++i) {
    put<uint32_t>(deep, kArray);
    put<uint64_t>(deep, 1);
  }
  put<uint32_t>(deep, kU8);
  put<uint64_t>(deep, 0);
  c.kv("deep", kArray, deep);
  out.push_back({"nested_too_deep", c.build(), k, "nested"});

  c = Crafted();
  c.kv("weird", 13, "abcd");
  out.push_back({"unknown_value_type", c.build(), k, "unknown value type 13"});

  c = Crafted();
  arr.clear();
  put<uint32_t>(arr, 77);
  put<uint64_t>(arr, 1);
  c.kv("weird", kArray, arr + "abcdefgh");
  out.push_back({"unknown_array_type", c.build(), k, "element type 77"});

  c = Crafted();
  c.kv("flag", kBool, "\x02");
  out.push_back({"bool_not_0_or_1", c.build(), k, "'flag'"});

  c = small_file();
  c.kv_str("general.architecture", "qwen3");
  out.push_back({"duplicate_key", c.build(), k, "'general.architecture' appears twice"});

  c = small_file();
  c.tensors.push_back({"a", {1}, 0, f32_bytes({9})});
  out.push_back({"duplicate_tensor", c.build(), k, "'a' appears twice"});

  c = small_file();
  c.kv_u32("general.alignment", 48);
  out.push_back({"alignment_not_power_of_2", c.build(), k, "power of two"});
  c = small_file();
  c.kv_u32("general.alignment", 0);
  out.push_back({"alignment_zero", c.build(), k, "power of two"});
  c = small_file();
  std::string u64_align;
  put<uint64_t>(u64_align, 32);
  c.kv("general.alignment", kU64, u64_align);
  out.push_back({"alignment_wrong_type", c.build(), k, "general.alignment"});

  c = small_file();
  c.tensors[1].offset = 8;  // inside "a", and not a multiple of 32
  out.push_back({"misaligned_offset", c.build(), k, "multiple of the alignment"});

  c = small_file();
  c.tensors[1].offset = 0;  // aligned but the same bytes as "a"
  out.push_back({"overlapping_tensors", c.build(), k, "overlap"});

  c = small_file();
  c.tensors[1].offset = 4096;
  std::string cut = c.build();
  cut.resize(cut.size() - 4);
  out.push_back({"tensor_past_end", cut, k, "outside"});

  c = small_file();
  c.tensors[1].offset = static_cast<int64_t>(0x7fffffffffffffe0ll);  // offset + size overflows
  out.push_back({"tensor_offset_huge", c.build(), k, "'b'"});

  c = small_file();
  c.tensors[0].dims = {1, 1, 1, 1, 4};
  out.push_back({"too_many_dims", c.build(), k, "5 dims"});

  c = small_file();
  c.tensors[0].dims = {1ull << 32, 1ull << 32};
  out.push_back({"dims_overflow", c.build(), k, "overflow"});

  c = small_file();
  c.tensors[0].dims = {1ull << 63};
  out.push_back({"dim_above_int64", c.build(), k, "overflow"});

  c = small_file();
  c.tensors[0].dims = {1ull << 62};  // 2^62 F32 elements: 2^64 bytes
  out.push_back({"size_overflow", c.build(), k, "'a'"});

  c = small_file();
  c.tensors[0].type = 16;  // IQ2_XXS
  out.push_back({"unsupported_tensor_type", c.build(), ErrorKind::kUnsupported, "ggml type 16"});

  c = small_file();
  std::string bytes = c.build();
  std::string name_len;
  put<uint64_t>(name_len, 1ull << 50);
  const size_t infos = bytes.find(std::string("\x01\0\0\0\0\0\0\0a", 9));
  bytes.replace(infos, 8, name_len);
  out.push_back({"huge_tensor_name_length", bytes, k, "tensor name"});
  return out;
}

TEST(Gguf, RejectsCorruptFilesNamingTheFile) {
  const std::string dir = test::scratch_dir("gguf_corrupt");
  for (const auto& c : corrupt_files()) {
    SCOPED_TRACE(c.name);
    const std::string path = write_plain(dir + "/" + c.name + ".gguf", c.bytes);
    expect_error([&] { GgufFile g(path); }, c.kind, {path, c.says});
  }
}

TEST(Gguf, RejectsEveryTruncationOfACraftedFile) {
  const std::string dir = test::scratch_dir("gguf_trunc");
  const std::string full = small_file().build();
  ASSERT_NO_THROW(GgufFile g(write_plain(dir + "/full.gguf", full)));
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string path = write_plain(dir + "/cut.gguf", full.substr(0, n));
    EXPECT_THROW(GgufFile g(path), Error) << "truncated to " << n << " bytes";
  }
}

TEST(Gguf, SurvivesRandomCorruptionWithErrorsOnly) {
  const std::string dir = test::scratch_dir("gguf_fuzz");
  const std::string full = small_file().build();
  std::mt19937 rng(7);
  int rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xff);
    const std::string path = write_plain(dir + "/fuzz.gguf", bytes);
    try {
      const GgufFile g(path);
      for (const auto& t : g.tensors()) {
        uint64_t sum = 0;  // touch every byte: ASan/UBSan builds catch any overrun
        for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
        EXPECT_LE(t.nbytes, bytes.size()) << sum;
      }
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
}

}  // namespace
}  // namespace strata::formats
