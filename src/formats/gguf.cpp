// GGUF v2/v3 reader (MODEL_SPEC.md §4): a bounds-checked cursor over the mapping parses the header,
// metadata and tensor infos; every count, length and offset is checked against the file size
// before anything is allocated or read.
#include "formats/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/error.h"

namespace strata::formats {

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;      // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 16;  // arrays of arrays; bounds the recursion
constexpr char kAlignmentKey[] = "general.alignment";

struct TypeTraits {
  GgmlType type;
  std::string_view name;
  uint32_t block_elems;  // elements per block
  uint32_t block_bytes;  // bytes per block
};

// Block sizes from ggml-common.h (QK_K = 256 for the K-quants).
constexpr TypeTraits kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", 32, 18},   {GgmlType::kQ4_1, "Q4_1", 32, 20},
    {GgmlType::kQ5_0, "Q5_0", 32, 22},   {GgmlType::kQ5_1, "Q5_1", 32, 24},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},   {GgmlType::kQ8_1, "Q8_1", 32, 36},
    {GgmlType::kQ2_K, "Q2_K", 256, 84},  {GgmlType::kQ3_K, "Q3_K", 256, 110},
    {GgmlType::kQ4_K, "Q4_K", 256, 144}, {GgmlType::kQ5_K, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, "Q6_K", 256, 210}, {GgmlType::kQ8_K, "Q8_K", 256, 292},
    {GgmlType::kI8, "I8", 1, 1},         {GgmlType::kI16, "I16", 1, 2},
    {GgmlType::kI32, "I32", 1, 4},       {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},       {GgmlType::kBF16, "BF16", 1, 2},
};

const TypeTraits* find_type(uint32_t raw) {
  for (const auto& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == raw) return &t;
  }
  return nullptr;
}

// GGUF metadata value types.
enum ValueType : uint32_t {
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

// The fewest bytes one value of a type can occupy, to bound counts before allocating.
uint64_t min_value_bytes(uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool:
      return 1;
    case kU16:
    case kI16:
      return 2;
    case kU32:
    case kI32:
    case kF32:
      return 4;
    case kU64:
    case kI64:
    case kF64:
    case kString:
      return 8;  // a string is at least its length
    case kArray:
      return 12;  // element type + count
    default:
      return 1;
  }
}

// Little-endian reads that never pass the end of the buffer.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, std::string_view what) const {
    check(n <= remaining(), ErrorKind::kInvalidInput,
          "{}: truncated GGUF: {} at offset {} needs {} bytes, {} remain", path_, what, pos_, n,
          remaining());
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    const uint64_t len = read<uint64_t>(what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

Json read_value(Cursor& c, uint32_t type, const std::string& key, const std::string& path,
                int depth) {
  switch (type) {
    case kU8:
      return c.read<uint8_t>(key);
    case kI8:
      return c.read<int8_t>(key);
    case kU16:
      return c.read<uint16_t>(key);
    case kI16:
      return c.read<int16_t>(key);
    case kU32:
      return c.read<uint32_t>(key);
    case kI32:
      return c.read<int32_t>(key);
    case kU64:
      return c.read<uint64_t>(key);
    case kI64:
      return c.read<int64_t>(key);
    case kF32:
      return static_cast<double>(c.read<float>(key));
    case kF64:
      return c.read<double>(key);
    case kBool: {
      const uint8_t b = c.read<uint8_t>(key);
      check(b <= 1, ErrorKind::kInvalidInput, "{}: GGUF key '{}': bool byte {} is not 0 or 1", path,
            key, b);
      return b == 1;
    }
    case kString:
      return c.read_string(key);
    case kArray: {
      check(depth < kMaxArrayNesting, ErrorKind::kInvalidInput,
            "{}: GGUF key '{}': arrays nested more than {} deep", path, key, kMaxArrayNesting);
      const uint32_t elem_type = c.read<uint32_t>(key);
      check(elem_type <= kF64, ErrorKind::kInvalidInput,
            "{}: GGUF key '{}': unknown array element type {}", path, key, elem_type);
      const uint64_t n = c.read<uint64_t>(key);
      check(n <= c.remaining() / min_value_bytes(elem_type), ErrorKind::kInvalidInput,
            "{}: GGUF key '{}': array of {} elements cannot fit in the {} bytes left", path, key, n,
            c.remaining());
      Json arr = Json::array();
      arr.get_ref<Json::array_t&>().reserve(n);
      for (uint64_t i = 0; i < n; ++i)
        arr.push_back(read_value(c, elem_type, key, path, depth + 1));
      return arr;
    }
    default:
      fail(ErrorKind::kInvalidInput, "{}: GGUF key '{}' has unknown value type {}", path, key,
           type);
  }
}

}  // namespace

Shape GgufTensorInfo::shape() const {
  std::vector<int64_t> reversed(dims.rbegin(), dims.rend());
  return Shape(std::span<const int64_t>(reversed));
}

std::string_view ggml_type_name(GgmlType type) {
  const TypeTraits* t = find_type(static_cast<uint32_t>(type));
  return t != nullptr ? t->name : "unknown";
}

GgufFile::GgufFile(const std::string& path) : file_(path) {
  Cursor c(file_.data(), file_.size(), path);

  const uint32_t magic = c.read<uint32_t>("magic");
  check(magic == 0x46554747u, ErrorKind::kInvalidInput,  // "GGUF" read as a little-endian u32
        "{}: not a GGUF file (magic 0x{:08x})", path, magic);
  version_ = c.read<uint32_t>("version");
  check(version_ == 2 || version_ == 3, ErrorKind::kUnsupported,
        "{}: GGUF version {} is not supported (only 2 and 3; big-endian files are not either)",
        path, version_);
  const uint64_t tensor_count = c.read<uint64_t>("tensor count");
  const uint64_t kv_count = c.read<uint64_t>("metadata count");
  // Smallest possible entries: key (8-byte length) + type + 1-byte value; tensor info with an empty
  // name and no dims: 8 + 4 + 4 + 8.
  check(kv_count <= c.remaining() / 13, ErrorKind::kInvalidInput,
        "{}: GGUF metadata count {} cannot fit in a {}-byte file", path, kv_count, file_.size());
  check(tensor_count <= c.remaining() / 24, ErrorKind::kInvalidInput,
        "{}: GGUF tensor count {} cannot fit in a {}-byte file", path, tensor_count, file_.size());

  metadata_ = Json::object();
  uint32_t alignment = kDefaultAlignment;
  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string key = c.read_string("metadata key");
    const uint32_t type = c.read<uint32_t>(key);
    check(!metadata_.contains(key), ErrorKind::kInvalidInput, "{}: GGUF key '{}' appears twice",
          path, key);
    Json value = read_value(c, type, key, path, 0);
    if (key == kAlignmentKey) {
      check(type == kU32, ErrorKind::kInvalidInput, "{}: {} must be a u32 (type {}), got type {}",
            path, kAlignmentKey, static_cast<uint32_t>(kU32), type);
      alignment = value.get<uint32_t>();
      check(alignment != 0 && (alignment & (alignment - 1)) == 0, ErrorKind::kInvalidInput,
            "{}: {} = {} is not a power of two", path, kAlignmentKey, alignment);
    }
    metadata_[key] = std::move(value);
  }

  tensors_.reserve(tensor_count);
  std::unordered_set<std::string> names;
  constexpr auto kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    info.name = c.read_string("tensor name");
    check(names.insert(info.name).second, ErrorKind::kInvalidInput,
          "{}: GGUF tensor '{}' appears twice", path, info.name);
    const uint32_t n_dims = c.read<uint32_t>(info.name);
    check(n_dims <= kMaxDims, ErrorKind::kInvalidInput, "{}: GGUF tensor '{}' has {} dims (max {})",
          path, info.name, n_dims, kMaxDims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c.read<uint64_t>(info.name);
      check(dim <= kMaxI64 && !__builtin_mul_overflow(numel, dim, &numel) && numel <= kMaxI64,
            ErrorKind::kInvalidInput, "{}: GGUF tensor '{}': dims overflow", path, info.name);
      info.dims.push_back(static_cast<int64_t>(dim));
    }
    const uint32_t raw_type = c.read<uint32_t>(info.name);
    const TypeTraits* traits = find_type(raw_type);
    check(traits != nullptr, ErrorKind::kUnsupported,
          "{}: GGUF tensor '{}' has ggml type {}, which strata does not support", path, info.name,
          raw_type);
    info.type = traits->type;
    info.offset = c.read<uint64_t>(info.name);
    const uint64_t row = n_dims == 0 ? 1 : info.dims[0];
    check(row % traits->block_elems == 0, ErrorKind::kInvalidInput,
          "{}: GGUF tensor '{}': row of {} elements is not a whole number of {} blocks of {}", path,
          info.name, row, traits->name, traits->block_elems);
    uint64_t nbytes = 0;
    check(!__builtin_mul_overflow(numel / traits->block_elems, traits->block_bytes, &nbytes),
          ErrorKind::kInvalidInput, "{}: GGUF tensor '{}': size overflows", path, info.name);
    info.nbytes = nbytes;
    tensors_.push_back(std::move(info));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t end_of_infos = c.pos();
  const uint64_t data_start = (end_of_infos + alignment - 1) / alignment * alignment;
  const uint64_t data_size = data_start <= file_.size() ? file_.size() - data_start : 0;
  check(tensors_.empty() || data_start <= file_.size(), ErrorKind::kInvalidInput,
        "{}: truncated GGUF: data section would start at {}, past the end ({} bytes)", path,
        data_start, file_.size());
  for (auto& info : tensors_) {
    check(info.offset % alignment == 0, ErrorKind::kInvalidInput,
          "{}: GGUF tensor '{}': offset {} is not a multiple of the alignment {}", path, info.name,
          info.offset, alignment);
    check(info.offset <= data_size && info.nbytes <= data_size - info.offset,
          ErrorKind::kInvalidInput,
          "{}: GGUF tensor '{}': bytes [{}, {}) lie outside the {}-byte data section", path,
          info.name, info.offset, info.offset + info.nbytes, data_size);
    info.data = file_.data() + data_start + info.offset;
  }

  std::vector<const GgufTensorInfo*> sorted;
  for (const auto& info : tensors_) {
    if (info.nbytes > 0) sorted.push_back(&info);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    check(sorted[i]->offset >= sorted[i - 1]->offset + sorted[i - 1]->nbytes,
          ErrorKind::kInvalidInput, "{}: GGUF tensors '{}' and '{}' overlap", path,
          sorted[i - 1]->name, sorted[i]->name);
  }
}

const GgufTensorInfo* GgufFile::find(std::string_view name) const {
  for (const auto& info : tensors_) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Q8_0 block: f16 scale d, then 32 int8 quants; value = q · d.
void dequantize_q8_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 34, dst += 32) {
    const float d = f16_to_f32(load_u16(src));
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(static_cast<int8_t>(src[2 + j])) * d;
  }
}

// Q4_0 block: f16 scale d, then 16 bytes; the low nibbles are elements 0..15 and the high nibbles
// 16..31; value = (nibble − 8) · d.
void dequantize_q4_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 18, dst += 32) {
    const float d = f16_to_f32(load_u16(src));
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = src[2 + j];
      dst[j] = static_cast<float>((q & 0x0f) - 8) * d;
      dst[j + 16] = static_cast<float>((q >> 4) - 8) * d;
    }
  }
}

}  // namespace

HostTensor GgufFile::to_f32(const GgufTensorInfo& info) const {
  HostTensor out(DType::kF32, info.shape());
  const int64_t n = out.numel();
  float* dst = out.as<float>();
  switch (info.type) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(dst, info.data, static_cast<size_t>(n) * 4);
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(info.data + 2 * i));
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(info.data + 2 * i));
      break;
    case GgmlType::kQ8_0:
      dequantize_q8_0(info.data, dst, n);
      break;
    case GgmlType::kQ4_0:
      dequantize_q4_0(info.data, dst, n);
      break;
    default:
      fail(ErrorKind::kUnsupported, "{}: cannot convert GGUF tensor '{}' of type {} to F32", path(),
           info.name, ggml_type_name(info.type));
  }
  return out;
}

}  // namespace strata::formats
