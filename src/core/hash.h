// Hashing: XXH3 for fingerprints and cache keys (fast, stable across runs and machines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

uint64_t hash64(const void* data, size_t size, uint64_t seed = 0);
inline uint64_t hash64(std::string_view s, uint64_t seed = 0) { return hash64(s.data(), s.size(), seed); }

// Incremental XXH3-128, rendered as 32 hex digits.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex_digest() const;

 private:
  void* state_;
};

}  // namespace strata
