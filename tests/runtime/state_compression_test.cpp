// Compressed state files (runtime/state_compression.h): the byte shuffle and its inverse over any
// range, and the chunked file read back exactly, whole or in pieces, ahead or on demand.
#include "runtime/state_compression.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <vector>

#include "core/error.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using runtime::CompressedStateReader;
using runtime::CompressedStateWriter;

// BF16-like bytes: a few exponents, random mantissas (what a KV cache looks like to a compressor).
std::vector<uint8_t> kv_like(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i % 2 == 1 ? static_cast<uint8_t>(0x3c + rng() % 4) : static_cast<uint8_t>(rng());
  return v;
}

TEST(StateCompression, ShuffleAndUnshuffleAnyRange) {
  for (const size_t length : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{64}, size_t{1001}}) {
    const std::vector<uint8_t> raw = kv_like(length, static_cast<uint32_t>(length));
    std::vector<uint8_t> shuffled(length);
    runtime::shuffle_bytes(raw, shuffled.data());
    const size_t half = (length + 1) / 2;  // even bytes first, then odd ones
    for (size_t i = 0; i < half; ++i) EXPECT_EQ(shuffled[i], raw[2 * i]);
    for (size_t i = 0; i < length / 2; ++i) EXPECT_EQ(shuffled[half + i], raw[2 * i + 1]);
    for (size_t from = 0; from <= length; from += std::max<size_t>(1, length / 7))
      for (size_t n = 0; from + n <= length; n += std::max<size_t>(1, length / 5)) {
        std::vector<uint8_t> out(n);
        runtime::unshuffle_bytes(shuffled.data(), length, from, n, out.data());
        EXPECT_EQ(out, std::vector<uint8_t>(raw.begin() + static_cast<std::ptrdiff_t>(from),
                                            raw.begin() + static_cast<std::ptrdiff_t>(from + n)))
            << length << " " << from << " " << n;
      }
  }
}

class CompressedFile : public ::testing::Test {
 protected:
  void SetUp() override { path_ = fs::path(::testing::TempDir()) / ("strata-compressed-" + std::to_string(::getpid())); }
  void TearDown() override { fs::remove(path_); }
  // Writes `raw` compressed, pushed in pieces of `piece` bytes.
  void write(const std::vector<uint8_t>& raw, size_t piece) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    CompressedStateWriter w(
        raw.size(), [&](const uint8_t* p, size_t n) { ASSERT_EQ(::write(fd, p, n), static_cast<ssize_t>(n)); },
        [&](uint64_t at, const uint8_t* p, size_t n) {
          ASSERT_EQ(::pwrite(fd, p, n, static_cast<off_t>(at)), static_cast<ssize_t>(n));
        });
    for (size_t at = 0; at < raw.size(); at += piece) w.push(raw.data() + at, std::min(piece, raw.size() - at));
    w.finish();
    ::close(fd);
  }
  std::vector<uint8_t> read(bool ahead, size_t piece, size_t n) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    std::vector<uint8_t> out(n);
    {
      CompressedStateReader r(fd, fs::file_size(path_), ahead);
      EXPECT_EQ(r.raw_bytes(), n);
      for (size_t at = 0; at < n; at += piece) r.read(out.data() + at, std::min(piece, n - at));
      test_past_end(r);
    }
    ::close(fd);
    return out;
  }
  static void test_past_end(CompressedStateReader& r) {
    uint8_t byte = 0;
    EXPECT_THROW(r.read(&byte, 1), Error);
  }
  fs::path path_;
};

TEST_F(CompressedFile, ReadsBackExactlyWholeOrInPiecesAheadOrOnDemand) {
  constexpr size_t kChunk = size_t{4} << 20;
  for (const size_t n : {size_t{0}, size_t{1}, size_t{5}, kChunk - 1, kChunk, kChunk + 3, 2 * kChunk + 1}) {
    SCOPED_TRACE(n);
    const std::vector<uint8_t> raw = kv_like(n, static_cast<uint32_t>(n + 1));
    write(raw, 1 << 16);
    EXPECT_LT(fs::file_size(path_), n + 200);
    if (n >= kChunk) EXPECT_LT(fs::file_size(path_), n * 8 / 10);  // the shuffle lets the exponents compress
    for (const bool ahead : {true, false})
      for (const size_t piece : {size_t{1} << 20, size_t{4097}, n + 1}) {
        if (piece == 4097 && n > kChunk) continue;  // (slow byte counts on big files add nothing)
        EXPECT_EQ(read(ahead, std::max<size_t>(piece, 1), n), raw) << ahead << " " << piece;
      }
  }
}

// A reader stopped before the end (an error in the state stream, say) stops its threads cleanly.
TEST_F(CompressedFile, AReaderLeftEarlyStopsItsThreads) {
  const std::vector<uint8_t> raw = kv_like(size_t{12} << 20, 3);
  write(raw, size_t{1} << 20);
  for (int i = 0; i < 5; ++i) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    {
      CompressedStateReader r(fd, fs::file_size(path_), /*ahead=*/true);
      std::vector<uint8_t> head(100);
      r.read(head.data(), head.size());
      EXPECT_EQ(head, std::vector<uint8_t>(raw.begin(), raw.begin() + 100));
    }
    ::close(fd);
  }
}

}  // namespace
}  // namespace strata
