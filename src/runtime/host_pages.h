// HostPages: the host memory that states leave the device in (the prefix cache's host tier, its
// disk reads and writes, preempted sequences), in pages of one size taken from slabs that are
// allocated once and reused. For a GPU the slabs are page-locked, so a state moves between host
// and device memory by DMA at the bus's speed (about 50 GB/s on PCIe 5, against 6-8 through
// pageable memory); locking costs about 0.5 s per GiB, which is why pages are reused rather than
// given back to the system. A pool keeps the bytes it is told to reserve (the host tier's budget)
// for its life, and grows by slabs when more are taken at once (writes on their way, preempted
// sequences); a grown slab goes back to the system once all its pages have been free for a while
// (`keep_idle`), so that a burst does not keep memory locked for good. Pages are taken from the
// reserve first, then from the oldest grown slabs, so that the newest drain.
//
// PagedBytes: bytes in such pages, read and written by offset; contiguous pieces of it are what
// copies to and from the device take. Its pages go back to the pool when it goes. Thread-safe: a
// disk read fills pages on the store's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include "backend/memory.h"

namespace strata::runtime {

class HostPages;

class PagedBytes {
 public:
  PagedBytes() = default;
  PagedBytes(PagedBytes&&) noexcept = default;
  PagedBytes& operator=(PagedBytes&& other) noexcept;
  PagedBytes(const PagedBytes&) = delete;
  PagedBytes& operator=(const PagedBytes&) = delete;
  ~PagedBytes();

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // f(pointer, length) for each contiguous piece of bytes [offset, offset + n), in order.
  template <typename F>
  void pieces(size_t offset, size_t n, F&& f) const {
    while (n > 0) {
      const size_t page = offset / page_bytes_, within = offset % page_bytes_;
      const size_t length = std::min(n, page_bytes_ - within);
      f(pages_[page] + within, length);
      offset += length;
      n -= length;
    }
  }
  void write(size_t offset, const void* src, size_t n);
  void read(size_t offset, void* dst, size_t n) const;
  // Queues copies between tensor t (on any device) and bytes [offset, offset + t's size), one per
  // page: into the pages (to_pages) or out of them. backend::synchronize() before the bytes are
  // read or the pages go.
  void copy_queued(const Tensor& t, size_t offset, bool to_pages) const;
  std::vector<uint8_t> to_vector() const;

 private:
  friend class HostPages;
  std::shared_ptr<HostPages> pool_;
  std::vector<uint8_t*> pages_;
  size_t page_bytes_ = 1;
  size_t size_ = 0;
};

class HostPages : public std::enable_shared_from_this<HostPages> {
 public:
  static constexpr std::chrono::milliseconds kKeepIdle{5000};
  static std::shared_ptr<HostPages> create(Device device, size_t page_bytes,
                                           std::chrono::milliseconds keep_idle = kKeepIdle);
  // Plain host memory in small pages (tests; states of the CPU).
  static std::shared_ptr<HostPages> plain() { return create(Device::kCpu, size_t{64} << 10); }

  Device device() const { return device_; }
  size_t page_bytes() const { return page_bytes_; }
  size_t allocated_bytes() const;  // all slabs
  size_t free_bytes() const;

  // Grows the reserve to at least `bytes` (whole pages): kept for the pool's life.
  void reserve(size_t bytes);
  // n bytes (not zeroed) in free pages, growing the pool when too few are.
  PagedBytes take(size_t n);
  PagedBytes take_copy(std::span<const uint8_t> bytes);  // pages holding a copy of bytes

 private:
  using Clock = std::chrono::steady_clock;
  struct Slab {
    backend::HostMemory memory;
    size_t pages = 0;
    std::vector<uint8_t*> free;
    bool reserved = false;
    Clock::time_point idle_since;  // a grown slab's, since all its pages came back
  };
  HostPages(Device device, size_t page_bytes, std::chrono::milliseconds keep_idle)
      : device_(device), page_bytes_(page_bytes), keep_idle_(keep_idle) {}
  // Under mutex_: a new slab of at least `pages` pages; the grown slabs idle past keep_idle go.
  void grow(size_t pages, bool reserved);
  void trim(Clock::time_point now);
  void give_back(std::span<uint8_t* const> pages);
  friend class PagedBytes;

  Device device_;
  size_t page_bytes_;
  std::chrono::milliseconds keep_idle_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Slab>> slabs_;  // the reserve first, then grown ones, oldest first
  std::map<const uint8_t*, Slab*> by_start_;   // where each slab's memory starts
  size_t free_pages_ = 0;
};

}  // namespace strata::runtime
