// Compressed state files: chunks shuffled and compressed a few at a time on threads; read back by
// a thread that streams the chunks in while others decompress them.
#include "runtime/state_compression.h"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "core/error.h"

namespace strata::runtime {

namespace {

constexpr uint32_t kVersion = 1;
constexpr uint64_t kChunkBytes = uint64_t{4} << 20;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;
constexpr size_t kParallel = 8;  // chunks compressed at once
constexpr int kLevel = 1;        // zstd's fastest but negative ones: the disk, not the ratio, is what waits

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Fills exactly n bytes at `offset` of fd; a file that ends first is truncated.
void pread_all(int fd, uint8_t* p, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIo, fmt::format("cannot read: {}", std::strerror(errno)));
    }
    check(r > 0, ErrorKind::kInvalidInput, "the file is truncated");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

std::vector<uint8_t> compress_chunk(const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> shuffled(raw.size());
  shuffle_bytes(raw, shuffled.data());
  std::vector<uint8_t> out(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), shuffled.data(), shuffled.size(), kLevel);
  check(!ZSTD_isError(n), ErrorKind::kInternal, "zstd: {}", ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

}  // namespace

void shuffle_bytes(std::span<const uint8_t> in, uint8_t* out) {
  const size_t half = (in.size() + 1) / 2;
  for (size_t i = 0; i < half; ++i) out[i] = in[2 * i];
  for (size_t i = 0; i < in.size() / 2; ++i) out[half + i] = in[2 * i + 1];
}

void unshuffle_bytes(const uint8_t* shuffled, size_t length, size_t from, size_t n, uint8_t* out) {
  const size_t half = (length + 1) / 2;
  const uint8_t* even = shuffled;
  const uint8_t* odd = shuffled + half;
  size_t j = from;
  const size_t end = from + n;
  if (j < end && j % 2 == 1) *out++ = odd[j++ / 2];
  const size_t pairs = (end - j) / 2;
  const size_t k0 = j / 2;
  for (size_t k = 0; k < pairs; ++k) {
    out[2 * k] = even[k0 + k];
    out[2 * k + 1] = odd[k0 + k];
  }
  out += 2 * pairs;
  j += 2 * pairs;
  if (j < end) *out = even[j / 2];
}

// ---- Writing ----

CompressedStateWriter::CompressedStateWriter(uint64_t raw_bytes, Sink sink, Patch patch)
    : raw_bytes_(raw_bytes), sink_(std::move(sink)), patch_(std::move(patch)) {
  std::vector<uint8_t> header(kCompressedStateMagic, kCompressedStateMagic + 8);
  put<uint32_t>(header, kVersion);
  put<uint32_t>(header, 0);
  put<uint64_t>(header, raw_bytes_);
  put<uint64_t>(header, kChunkBytes);
  const uint64_t chunks = (raw_bytes_ + kChunkBytes - 1) / kChunkBytes;
  header.resize(header.size() + chunks * sizeof(uint64_t), 0);  // the sizes, once known
  sink_(header.data(), header.size());
}

void CompressedStateWriter::push(const uint8_t* data, size_t n) {
  check(pushed_ + n <= raw_bytes_, ErrorKind::kInternal, "compressed state: {} bytes past its {}", pushed_ + n,
        raw_bytes_);
  pushed_ += n;
  while (n > 0) {
    if (pending_.empty() || pending_.back().size() == kChunkBytes) {
      if (pending_.size() == kParallel) flush_chunks();
      pending_.emplace_back().reserve(kChunkBytes);
    }
    std::vector<uint8_t>& chunk = pending_.back();
    const size_t k = std::min<size_t>(n, kChunkBytes - chunk.size());
    chunk.insert(chunk.end(), data, data + k);
    data += k;
    n -= k;
  }
}

void CompressedStateWriter::flush_chunks() {
  std::vector<std::future<std::vector<uint8_t>>> packed;
  for (const std::vector<uint8_t>& raw : pending_)
    packed.push_back(std::async(std::launch::async, [&raw] { return compress_chunk(raw); }));
  for (auto& f : packed) {
    const std::vector<uint8_t> bytes = f.get();
    sink_(bytes.data(), bytes.size());
    sizes_.push_back(bytes.size());
  }
  pending_.clear();
}

void CompressedStateWriter::finish() {
  check(pushed_ == raw_bytes_, ErrorKind::kInternal, "compressed state: {} bytes of {}", pushed_, raw_bytes_);
  flush_chunks();
  std::vector<uint8_t> table;
  for (const uint64_t s : sizes_) put<uint64_t>(table, s);
  patch_(kHeaderBytes, table.data(), table.size());
}

// ---- Reading ----

struct CompressedStateReader::Chunk {
  std::vector<uint8_t> packed;
  std::unique_ptr<uint8_t[]> shuffled;
  size_t length = 0;  // raw bytes
  // Ahead: set when decompressed (or failed).
  std::promise<void> done;
  std::shared_future<void> ready = done.get_future().share();
};

struct CompressedStateReader::Ahead {
  std::thread thread;
  std::mutex mutex;
  bool stop = false;
  std::vector<std::future<void>> work;  // the decompressions under way (joined before the chunks go)
};

namespace {

void decompress(std::vector<uint8_t>& packed, size_t length, std::unique_ptr<uint8_t[]>& out) {
  out.reset(new uint8_t[std::max<size_t>(length, 1)]);
  const size_t n = ZSTD_decompress(out.get(), length, packed.data(), packed.size());
  check(!ZSTD_isError(n) && n == length, ErrorKind::kInvalidInput, "a compressed chunk is corrupt ({})",
        ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong length");
  packed = {};
}

}  // namespace

CompressedStateReader::CompressedStateReader(int fd, uint64_t file_bytes, bool ahead) : fd_(fd), ahead_(ahead) {
  check(file_bytes >= kHeaderBytes, ErrorKind::kInvalidInput, "the file is truncated");
  uint8_t header[kHeaderBytes];
  pread_all(fd_, header, sizeof(header), 0);
  check(std::memcmp(header, kCompressedStateMagic, 8) == 0, ErrorKind::kInvalidInput,
        "not a compressed strata state (bad magic)");
  check(get<uint32_t>(header + 8) == kVersion, ErrorKind::kUnsupported, "compressed state version {} is not supported",
        get<uint32_t>(header + 8));
  check(get<uint32_t>(header + 12) == 0, ErrorKind::kInvalidInput, "a compressed state's header is corrupt");
  raw_bytes_ = get<uint64_t>(header + 16);
  chunk_bytes_ = get<uint64_t>(header + 24);
  check(chunk_bytes_ > 0 && chunk_bytes_ <= (uint64_t{64} << 20) && raw_bytes_ / chunk_bytes_ < file_bytes,
        ErrorKind::kInvalidInput, "a compressed state of {} bytes in chunks of {} is implausible", raw_bytes_,
        chunk_bytes_);
  const uint64_t chunks = (raw_bytes_ + chunk_bytes_ - 1) / chunk_bytes_;
  check(kHeaderBytes + chunks * 8 <= file_bytes, ErrorKind::kInvalidInput, "the file is truncated");
  std::vector<uint8_t> table(chunks * 8);
  pread_all(fd_, table.data(), table.size(), kHeaderBytes);
  uint64_t at = kHeaderBytes + table.size();
  for (uint64_t i = 0; i < chunks; ++i) {
    const uint64_t size = get<uint64_t>(table.data() + i * 8);
    check(size <= ZSTD_compressBound(chunk_bytes_) && at + size <= file_bytes, ErrorKind::kInvalidInput,
          "the file is truncated or its chunk sizes are corrupt");
    sizes_.push_back(size);
    offsets_.push_back(at);
    at += size;
  }
  check(at == file_bytes, ErrorKind::kInvalidInput, "it has {} bytes; its header says {}", file_bytes, at);
  for (uint64_t i = 0; i < chunks; ++i) {
    auto& c = chunks_.emplace_back(std::make_unique<Chunk>());
    c->length = static_cast<size_t>(std::min(chunk_bytes_, raw_bytes_ - i * chunk_bytes_));
  }
  if (ahead_ && !chunks_.empty()) {
    thread_ = std::make_unique<Ahead>();
    thread_->thread = std::thread([this] { read_ahead(); });
  }
}

CompressedStateReader::~CompressedStateReader() {
  if (thread_ == nullptr) return;
  {
    std::lock_guard lock(thread_->mutex);
    thread_->stop = true;
  }
  thread_->thread.join();
  for (std::future<void>& f : thread_->work) f.wait();
}

void CompressedStateReader::read_ahead() {
  for (size_t i = 0; i < chunks_.size(); ++i) {
    {
      std::lock_guard lock(thread_->mutex);
      if (thread_->stop) break;
    }
    Chunk* c = chunks_[i].get();
    try {
      c->packed.resize(sizes_[i]);
      pread_all(fd_, c->packed.data(), c->packed.size(), offsets_[i]);
    } catch (...) {  // this chunk and every later one fail
      for (size_t j = i; j < chunks_.size(); ++j) chunks_[j]->done.set_exception(std::current_exception());
      return;
    }
    std::lock_guard lock(thread_->mutex);
    thread_->work.push_back(std::async(std::launch::async, [c] {
      try {
        decompress(c->packed, c->length, c->shuffled);
        c->done.set_value();
      } catch (...) {
        c->done.set_exception(std::current_exception());
      }
    }));
  }
}

CompressedStateReader::Chunk& CompressedStateReader::chunk(size_t i) {
  Chunk& c = *chunks_[i];
  if (ahead_) {
    c.ready.get();  // (throws what its reading or decompression threw)
  } else if (c.shuffled == nullptr) {
    c.packed.resize(sizes_[i]);
    pread_all(fd_, c.packed.data(), c.packed.size(), offsets_[i]);
    decompress(c.packed, c.length, c.shuffled);
  }
  return c;
}

void CompressedStateReader::read(uint8_t* dst, size_t n) {
  check(n <= raw_bytes_ - at_, ErrorKind::kInvalidInput, "the state ends before its checksum");
  while (n > 0) {
    const auto i = static_cast<size_t>(at_ / chunk_bytes_);
    const size_t within = static_cast<size_t>(at_ - i * chunk_bytes_);
    Chunk& c = chunk(i);
    const size_t k = std::min(n, c.length - within);
    unshuffle_bytes(c.shuffled.get(), c.length, within, k, dst);
    if (within + k == c.length) c.shuffled.reset();  // done with it
    dst += k;
    n -= k;
    at_ += k;
  }
}

}  // namespace strata::runtime
