// XXH3 through libxxhash.
#include "core/hash.h"

#include <fmt/format.h>
#include <xxhash.h>

namespace strata {

uint64_t hash64(const void* data, size_t size, uint64_t seed) { return XXH3_64bits_withSeed(data, size, seed); }

Hasher::Hasher() : state_(XXH3_createState()) { XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_)); }
Hasher::~Hasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hasher::update(const void* data, size_t size) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

std::string Hasher::hex_digest() const {
  const XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

}  // namespace strata
