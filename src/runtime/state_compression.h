// Compressed state files (the prefix cache's disk tier with prefix_cache_compress): the state
// format's byte stream (runtime/state_format.h, checksum and all) cut into chunks of 4 MiB, each
// chunk's bytes shuffled by position (the even bytes, then the odd ones: a BF16 value's sign and
// exponent byte apart from its mantissa byte, which compresses a KV cache to about two thirds
// where zstd alone gets four fifths) and compressed with zstd on its own, so that a read
// decompresses chunks on several threads while the disk streams the next ones.
//
// Layout (little-endian):
//   "STRATAZS"          8-byte magic
//   u32 version          1
//   u32 0
//   u64 raw bytes        the state stream's length
//   u64 chunk bytes      4 MiB (the last chunk may be shorter)
//   u64[chunks] sizes    each chunk's compressed length
//   the chunks
// A file is whole when its length is the header's sum; a chunk that does not decompress to its
// length is corruption (kInvalidInput), and so is anything the stream's own checksum catches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata::runtime {

inline constexpr char kCompressedStateMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'Z', 'S'};

// Writes a compressed file of a stream of `raw_bytes` bytes to `sink` (which writes at the file's
// current end) as the stream comes (push), compressing a few chunks at a time on several threads.
class CompressedStateWriter {
 public:
  using Sink = std::function<void(const uint8_t* data, size_t n)>;
  // at(offset, data, n): writes over bytes already written (the sizes, once known).
  using Patch = std::function<void(uint64_t offset, const uint8_t* data, size_t n)>;
  CompressedStateWriter(uint64_t raw_bytes, Sink sink, Patch patch);
  void push(const uint8_t* data, size_t n);
  void finish();  // the last chunks and the sizes

 private:
  void flush_chunks();
  uint64_t raw_bytes_ = 0, pushed_ = 0;
  Sink sink_;
  Patch patch_;
  std::vector<std::vector<uint8_t>> pending_;  // raw chunks waiting to be compressed
  std::vector<uint64_t> sizes_;
};

// The stream of a compressed file, read from fd (at offsets: the file position is not used).
// ahead: a thread reads the chunks in order and each is decompressed on a thread of its own while
// read() takes the stream (a whole read); otherwise chunks are read and decompressed as read()
// reaches them (an index reading headers only).
class CompressedStateReader {
 public:
  // Reads and checks the header (kInvalidInput: not one, or its length is not the file's).
  CompressedStateReader(int fd, uint64_t file_bytes, bool ahead);
  ~CompressedStateReader();
  CompressedStateReader(const CompressedStateReader&) = delete;
  CompressedStateReader& operator=(const CompressedStateReader&) = delete;

  uint64_t raw_bytes() const { return raw_bytes_; }
  // The next n bytes of the stream (kInvalidInput past its end or in a corrupt chunk).
  void read(uint8_t* dst, size_t n);

 private:
  struct Chunk;
  Chunk& chunk(size_t i);  // decompressed (waiting for it)
  void read_ahead();

  int fd_;
  bool ahead_;
  uint64_t raw_bytes_ = 0, chunk_bytes_ = 0, at_ = 0;
  std::vector<uint64_t> sizes_, offsets_;  // per chunk, in the file
  std::vector<std::unique_ptr<Chunk>> chunks_;
  struct Ahead;
  std::unique_ptr<Ahead> thread_;
};

// Shuffles and back (exposed for tests): out = even bytes of `in`, then the odd ones.
void shuffle_bytes(std::span<const uint8_t> in, uint8_t* out);
// Bytes [from, from + n) of the stream whose shuffled form is `shuffled` (of length `length`).
void unshuffle_bytes(const uint8_t* shuffled, size_t length, size_t from, size_t n, uint8_t* out);

}  // namespace strata::runtime
