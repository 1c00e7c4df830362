// The checked byte format of a sequence's state, shared by Sequence::serialize (bytes in memory)
// and the prefix cache's files on disk (runtime/state_store.h), written and read as a stream.
//
// Layout (all integers little-endian), version 1:
//   "STRATAST"                      8-byte magic
//   u32 version                     1
//   u32 len, bytes                  model fingerprint (32 hex digits)
//   i64 n_tokens, i32[n_tokens]     the token ids consumed
//   u32 sections                    one per state buffer, in the model's order:
//     u32 len, bytes                  name ("layers.3.k", "layers.0.ssm", ...)
//     u8 dtype, u8 token_indexed, u8 rank, u8 0
//     i64[rank] shape                 the buffer's shape (token-indexed: dim 0 is the capacity)
//     u64 nbytes, bytes               data; token-indexed buffers store their first n_tokens rows
//   32 bytes                        XXH3-128 (hex) of everything before it
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/hash.h"
#include "core/tensor.h"
#include "model/model.h"

namespace strata::runtime {

// One buffer as a state of n tokens stores it.
struct StateSection {
  std::string name;
  DType dtype = DType::kF32;
  bool token_indexed = false;
  Shape shape;         // a paged buffer's as if the state owned it (dim 0: the capacity)
  uint64_t bytes = 0;  // its data: a token-indexed buffer's first n rows, else all of it
};

// The sections of `state` holding n tokens, in the model's order.
std::vector<StateSection> state_sections(const model::ModelState& state, int64_t n_tokens);

// The bytes a state of these sections and n tokens takes in the format.
uint64_t state_format_bytes(const std::string& fingerprint, std::span<const StateSection> sections,
                            int64_t n_tokens);

// Checks the checksum of a whole state in memory (before parsing it: a flipped byte anywhere is
// corruption, whatever field it lands in).
void check_state_checksum(std::span<const uint8_t> bytes);

// What precedes the sections.
struct StateHeader {
  uint32_t version = 0;
  std::string fingerprint;
  std::vector<int32_t> tokens;
};

// Writes the format to a sink, hashing as it goes: begin, then for each section its header and
// exactly its bytes of data (in any number of pieces), then finish.
class StateWriter {
 public:
  using Sink = std::function<void(const uint8_t* data, size_t n)>;
  explicit StateWriter(Sink sink);
  void begin(const std::string& fingerprint, std::span<const int32_t> tokens, size_t sections);
  void section(const StateSection& s);
  void data(const void* p, size_t n);
  void data(const Tensor& t);  // the bytes of t, wherever it lives
  void finish();               // the checksum

 private:
  void put(const void* p, size_t n);
  template <typename T>
  void put_value(T v) {
    put(&v, sizeof(T));
  }
  Sink sink_;
  Hasher hash_;
  std::vector<uint8_t> staging_;  // a device tensor's bytes on their way
};

// Reads the format from a source that fills exactly n bytes or throws, checking it as it goes:
// header (magic, version, fingerprint plausibility), then the sections against those expected,
// each section's data straight to where `dest` says, then the checksum. Any mismatch is an Error
// of kind kInvalidInput (kUnsupported for another version); what was written to the destinations
// is then garbage, and must not be used.
class StateReader {
 public:
  using Source = std::function<void(uint8_t* dst, size_t n)>;
  explicit StateReader(Source source);
  ~StateReader();
  // The checksum runs on a thread of its own behind the reads (a large file's read and its hashing
  // overlap). Data destinations must then stay until finish() returns or the reader goes.
  void hash_behind();
  // A source that fills several pieces in one call (a file's readv), used for section data.
  using GatherSource = std::function<void(std::span<const std::span<uint8_t>> pieces)>;
  void gather_with(GatherSource gather) { gather_ = std::move(gather); }
  StateHeader header(int64_t max_tokens);
  // expected: state_sections of the reading state for the header's token count. dest(i): where
  // section i's data goes, in pieces of expected[i].bytes in all.
  using Destination = std::function<std::vector<std::span<uint8_t>>(size_t)>;
  void sections(std::span<const StateSection> expected, const Destination& dest);
  void finish();  // reads and checks the checksum

 private:
  void take(void* dst, size_t n, const char* what);
  template <typename T>
  T get(const char* what) {
    T v;
    take(&v, sizeof(T), what);
    return v;
  }
  std::string get_string(const char* what);
  class Behind;  // the thread hash_behind() starts
  void hashed(const void* p, size_t n);
  Source source_;
  GatherSource gather_;
  Hasher hash_;
  std::unique_ptr<Behind> behind_;
  int64_t n_tokens_ = -1;
};

}  // namespace strata::runtime
