#include "runtime/host_pages.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace strata {
namespace {

using runtime::HostPages;
using runtime::PagedBytes;

std::vector<uint8_t> counting(size_t n, uint8_t from = 0) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

// Pieces tile the range in order, never cross a page, and together hold what was written.
TEST(HostPages, PiecesTileAnyRangeWithinPages) {
  const auto pool = HostPages::create(Device::kCpu, 64);
  const std::vector<uint8_t> data = counting(1000);
  const PagedBytes bytes = pool->take_copy(data);
  EXPECT_EQ(bytes.size(), 1000u);
  for (const auto& [offset, n] : std::vector<std::pair<size_t, size_t>>{{0, 1000}, {0, 64}, {63, 2}, {100, 0}, {999, 1}, {10, 500}}) {
    SCOPED_TRACE(testing::Message() << offset << " + " << n);
    std::vector<uint8_t> got;
    size_t pieces = 0;
    bytes.pieces(offset, n, [&](const uint8_t* p, size_t length) {
      EXPECT_GT(length, 0u);
      EXPECT_LE(length, 64u);
      got.insert(got.end(), p, p + length);
      ++pieces;
    });
    EXPECT_EQ(got, std::vector<uint8_t>(data.begin() + static_cast<std::ptrdiff_t>(offset),
                                        data.begin() + static_cast<std::ptrdiff_t>(offset + n)));
    EXPECT_EQ(pieces, n == 0 ? 0 : (offset + n - 1) / 64 - offset / 64 + 1);
    std::vector<uint8_t> read(n);
    bytes.read(offset, read.data(), n);
    EXPECT_EQ(read, got);
  }
  EXPECT_EQ(bytes.to_vector(), data);
}

// Pages come back when their bytes go and are taken again before the pool grows; it grows by
// slabs only when more are taken at once than are free.
TEST(HostPages, PagesAreReusedBeforeThePoolGrows) {
  const auto pool = HostPages::create(Device::kCpu, 128);
  pool->reserve(128 * 20);
  const size_t reserved = pool->allocated_bytes();
  EXPECT_GE(reserved, 128u * 20);
  EXPECT_EQ(pool->free_bytes(), reserved);
  {
    PagedBytes a = pool->take(128 * 10);
    PagedBytes b = pool->take(128 * 9 - 5);
    EXPECT_EQ(pool->free_bytes(), reserved - 128 * 19);
    b = pool->take(1);  // the last free page; then b's old ones go back
    EXPECT_EQ(pool->free_bytes(), reserved - 128 * 11);
    PagedBytes c = std::move(a);
    EXPECT_EQ(pool->free_bytes(), reserved - 128 * 11);
  }
  EXPECT_EQ(pool->free_bytes(), reserved);
  EXPECT_EQ(pool->allocated_bytes(), reserved);
  { const PagedBytes big = pool->take(reserved + 1); }
  EXPECT_GT(pool->allocated_bytes(), reserved);
  EXPECT_EQ(pool->free_bytes(), pool->allocated_bytes());
}

// The reserve stays for the pool's life; a grown slab goes back to the system once all its pages
// have been free for keep_idle (at once here), and not while any of them is taken.
TEST(HostPages, GrownSlabsGoBackWhenIdleAndTheReserveStays) {
  const auto pool = HostPages::create(Device::kCpu, 64, std::chrono::milliseconds(0));
  pool->reserve(64 * 4);
  EXPECT_EQ(pool->allocated_bytes(), 64u * 4);
  {
    const PagedBytes all = pool->take(64 * 4);  // the reserve, wholly
    EXPECT_EQ(pool->allocated_bytes(), 64u * 4);
    const PagedBytes more = pool->take(64 * 3);  // a grown slab (of 16 pages at least)
    EXPECT_GT(pool->allocated_bytes(), 64u * 4);
    {
      const PagedBytes again = pool->take(64);  // from the grown slab's free pages
      EXPECT_EQ(again.to_vector().size(), 64u);
    }
    EXPECT_GT(pool->allocated_bytes(), 64u * 4);  // `more` still holds pages of it
  }
  EXPECT_EQ(pool->allocated_bytes(), 64u * 4);
  EXPECT_EQ(pool->free_bytes(), 64u * 4);

  const auto keeping = HostPages::create(Device::kCpu, 64);  // the default: kept a while
  { const PagedBytes b = keeping->take(64); }
  EXPECT_GT(keeping->allocated_bytes(), 0u);
}

// Bytes outlive the handle that made them (the store's reads finish after an engine may go), and
// threads take and give back at once.
TEST(HostPages, BytesKeepTheirPoolAndThreadsShareIt) {
  PagedBytes kept;
  {
    const auto pool = HostPages::create(Device::kCpu, 32);
    kept = pool->take_copy(counting(100, 7));
  }
  EXPECT_EQ(kept.to_vector(), counting(100, 7));

  const auto pool = HostPages::create(Device::kCpu, 32);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::vector<uint8_t> data = counting(static_cast<size_t>(1 + (i * 37 + t) % 300), static_cast<uint8_t>(t));
        const PagedBytes b = pool->take_copy(data);
        ASSERT_EQ(b.to_vector(), data);
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(pool->free_bytes(), pool->allocated_bytes());
}

}  // namespace
}  // namespace strata
