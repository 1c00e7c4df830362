// Global operator new/delete for the runtime tests that count heap allocations (in a TU of its own
// so the compiler never sees a replaced new beside a delete).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {
std::atomic<int64_t> g_allocations{0};
}

int64_t heap_allocations() { return g_allocations.load(); }

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
