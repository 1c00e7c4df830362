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

void PagedBytes::copy_queued(const Tensor& t, size_t offset, bool to_pages) const {
  check(offset + t.nbytes() <= size_, ErrorKind::kInternal, "bytes [{}, {}) of {}", offset, offset + t.nbytes(), size_);
  size_t done = 0;
  pieces(offset, t.nbytes(), [&](uint8_t* p, size_t n) {
    const Tensor part = backend::byte_view(t, done, n), host = backend::host_bytes(p, n);
    backend::copy_queued(to_pages ? part : host, to_pages ? host : part);
    done += n;
  });
}

std::vector<uint8_t> PagedBytes::to_vector() const {
  std::vector<uint8_t> out(size_);
  read(0, out.data(), size_);
  return out;
}

std::shared_ptr<HostPages> HostPages::create(Device device, size_t page_bytes, std::chrono::milliseconds keep_idle) {
  check(page_bytes > 0, ErrorKind::kInternal, "host pages of 0 bytes");
  return std::shared_ptr<HostPages>(new HostPages(device, page_bytes, keep_idle));
}

void HostPages::reserve(size_t bytes) {
  std::lock_guard lock(mutex_);
  size_t reserved = 0;
  for (const auto& s : slabs_)
    if (s->reserved) reserved += s->memory.size();
  if (bytes > reserved) grow((bytes - reserved + page_bytes_ - 1) / page_bytes_, /*reserved=*/true);
}

size_t HostPages::allocated_bytes() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& s : slabs_) n += s->memory.size();
  return n;
}

size_t HostPages::free_bytes() const {
  std::lock_guard lock(mutex_);
  return free_pages_ * page_bytes_;
}

void HostPages::grow(size_t pages, bool reserved) {
  if (!reserved) pages = std::max(pages, kSlabPages);
  auto slab = std::make_unique<Slab>(Slab{backend::HostMemory(device_, pages * page_bytes_), pages, {}, reserved, {}});
  for (size_t i = 0; i < pages; ++i) slab->free.push_back(slab->memory.data() + i * page_bytes_);
  free_pages_ += pages;
  by_start_[slab->memory.data()] = slab.get();
  // The reserve stays ahead of the grown slabs (pages are taken from the front).
  const auto at = reserved ? std::find_if(slabs_.begin(), slabs_.end(), [](const auto& s) { return !s->reserved; })
                           : slabs_.end();
  slabs_.insert(at, std::move(slab));
  size_t all = 0;
  for (const auto& s : slabs_) all += s->memory.size();
  log::debug("host pages: {} MiB more, {} MiB in all", (pages * page_bytes_) >> 20, all >> 20);
}

void HostPages::trim(Clock::time_point now) {
  for (size_t i = 0; i < slabs_.size();) {
    Slab& s = *slabs_[i];
    if (s.reserved || s.free.size() != s.pages || now - s.idle_since < keep_idle_) {
      ++i;
      continue;
    }
    free_pages_ -= s.pages;
    by_start_.erase(s.memory.data());
    log::debug("host pages: {} MiB given back", (s.pages * page_bytes_) >> 20);
    slabs_.erase(slabs_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

PagedBytes HostPages::take(size_t n) {
  PagedBytes out;
  out.pool_ = shared_from_this();
  out.page_bytes_ = page_bytes_;
  out.size_ = n;
  size_t pages = (n + page_bytes_ - 1) / page_bytes_;
  out.pages_.reserve(pages);
  std::lock_guard lock(mutex_);
  trim(Clock::now());
  if (free_pages_ < pages) grow(pages - free_pages_, /*reserved=*/false);
  free_pages_ -= pages;
  for (const auto& s : slabs_) {
    const size_t k = std::min(pages, s->free.size());
    out.pages_.insert(out.pages_.end(), s->free.end() - static_cast<std::ptrdiff_t>(k), s->free.end());
    s->free.resize(s->free.size() - k);
    pages -= k;
    if (pages == 0) break;
  }
  return out;
}

PagedBytes HostPages::take_copy(std::span<const uint8_t> bytes) {
  PagedBytes out = take(bytes.size());
  out.write(0, bytes.data(), bytes.size());
  return out;
}

void HostPages::give_back(std::span<uint8_t* const> pages) {
  std::lock_guard lock(mutex_);
  const Clock::time_point now = Clock::now();
  for (uint8_t* page : pages) {
    Slab& s = *std::prev(by_start_.upper_bound(page))->second;
    s.free.push_back(page);
    if (s.free.size() == s.pages) s.idle_since = now;
  }
  free_pages_ += pages.size();
  trim(now);
}

}  // namespace strata::runtime
