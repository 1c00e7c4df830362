// HostPages: slabs of pages, handed out from a free list and taken back when PagedBytes go.
#include "runtime/host_pages.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/log.h"

namespace strata::runtime {

namespace {

// Pages per slab at least when the pool grows (one lock of the pages per slab).
constexpr size_t kSlabPages = 16;

}  // namespace

PagedBytes& PagedBytes::operator=(PagedBytes&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr) pool_->give_back(pages_);
    pool_ = std::move(other.pool_);
    pages_ = std::move(other.pages_);
    page_bytes_ = other.page_bytes_;
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PagedBytes::~PagedBytes() {
  if (pool_ != nullptr) pool_->give_back(pages_);
}

void PagedBytes::write(size_t offset, const void* src, size_t n) {
  check(offset + n <= size_, ErrorKind::kInternal, "bytes [{}, {}) of {}", offset, offset + n, size_);
  const auto* from = static_cast<const uint8_t*>(src);
  pieces(offset, n, [&](uint8_t* p, size_t length) {
    std::memcpy(p, from, length);
    from += length;
  });
}

void PagedBytes::read(size_t offset, void* dst, size_t n) const {
  check(offset + n <= size_, ErrorKind::kInternal, "bytes [{}, {}) of {}", offset, offset + n, size_);
  auto* to = static_cast<uint8_t*>(dst);
  pieces(offset, n, [&](const uint8_t* p, size_t length) {
    std::memcpy(to, p, length);
    to += length;
  });
}

std::vector<uint8_t> PagedBytes::to_vector() const {
  std::vector<uint8_t> out(size_);
  read(0, out.data(), size_);
  return out;
}

std::shared_ptr<HostPages> HostPages::create(Device device, size_t page_bytes) {
  check(page_bytes > 0, ErrorKind::kInternal, "host pages of 0 bytes");
  return std::shared_ptr<HostPages>(new HostPages(device, page_bytes));
}

void HostPages::reserve(size_t bytes) {
  std::lock_guard lock(mutex_);
  size_t all = 0;
  for (const backend::HostMemory& s : slabs_) all += s.size();
  if (bytes > all) grow((bytes - all + page_bytes_ - 1) / page_bytes_);
}

size_t HostPages::allocated_bytes() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const backend::HostMemory& s : slabs_) n += s.size();
  return n;
}

size_t HostPages::free_bytes() const {
  std::lock_guard lock(mutex_);
  return free_.size() * page_bytes_;
}

void HostPages::grow(size_t pages) {
  pages = std::max(pages, kSlabPages);
  backend::HostMemory& slab = slabs_.emplace_back(device_, pages * page_bytes_);
  for (size_t i = 0; i < pages; ++i) free_.push_back(slab.data() + i * page_bytes_);
  size_t all = 0;
  for (const backend::HostMemory& s : slabs_) all += s.size();
  log::debug("host pages: {} MiB more, {} MiB in all", (pages * page_bytes_) >> 20, all >> 20);
}

PagedBytes HostPages::take(size_t n) {
  PagedBytes out;
  out.pool_ = shared_from_this();
  out.page_bytes_ = page_bytes_;
  out.size_ = n;
  const size_t pages = (n + page_bytes_ - 1) / page_bytes_;
  std::lock_guard lock(mutex_);
  if (free_.size() < pages) grow(pages - free_.size());
  out.pages_.assign(free_.end() - static_cast<std::ptrdiff_t>(pages), free_.end());
  free_.resize(free_.size() - pages);
  return out;
}

PagedBytes HostPages::take_copy(std::span<const uint8_t> bytes) {
  PagedBytes out = take(bytes.size());
  out.write(0, bytes.data(), bytes.size());
  return out;
}

void HostPages::give_back(std::span<uint8_t* const> pages) {
  std::lock_guard lock(mutex_);
  free_.insert(free_.end(), pages.begin(), pages.end());
}

}  // namespace strata::runtime
