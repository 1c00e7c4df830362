// GGUF reader (v2/v3): metadata as JSON values, tensor infos, and float/Q8_0/Q4_0 tensors as f32.
// The file is memory-mapped and fully validated on open; a corrupt file raises Error, never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/mmap.h"
#include "core/tensor.h"

namespace strata::formats {

// ggml tensor types that we name (values as in ggml.h).
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kBF16 = 30,
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] varies fastest
  GgmlType type;
  uint64_t offset;            // relative to the data section
  const uint8_t* data;        // inside the mapping
  size_t nbytes;
  // Row-major shape (dims reversed), e.g. a [out, in] matrix for ggml dims {in, out}.
  Shape shape() const;
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);

  uint32_t version() const { return version_; }
  // key -> value; GGUF arrays become JSON arrays, strings stay strings, bools booleans, ints and
  // floats numbers.
  const Json& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find(std::string_view name) const;  // nullptr when absent
  const std::string& path() const { return file_.path(); }

  // The tensor dequantized/converted to f32 with its row-major shape. Supports F32, F16, BF16,
  // Q8_0 and Q4_0; other types raise kUnsupported naming the type.
  HostTensor to_f32(const GgufTensorInfo& info) const;

 private:
  MappedFile file_;
  uint32_t version_ = 0;
  Json metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

std::string_view ggml_type_name(GgmlType type);

}  // namespace strata::formats
