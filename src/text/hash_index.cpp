// PieceIndex and MergeTable: linear probing over power-of-two tables kept at most 3/4 full.
#include "text/hash_index.h"

#include <algorithm>
#include <bit>

#include "core/hash.h"

namespace strata::text {

namespace {

// At most about two thirds full: short probes, and a table small enough to stay in cache longer.
size_t capacity_for(size_t n) { return std::bit_ceil(std::max<size_t>(16, n + n / 2)); }

uint64_t mix(uint64_t x) {  // a strong 64-bit finalizer (from splitmix64)
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t hash_piece(std::string_view s) { return hash64(s); }

PieceIndex::PieceIndex(const std::vector<std::string>& pieces) {
  slots_.resize(capacity_for(pieces.size()));
  mask_ = slots_.size() - 1;
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string& piece = pieces[id];
    if (piece.empty()) continue;
    const uint64_t h = hash_piece(piece);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.id < 0) {
        slot = {tag, static_cast<int32_t>(id)};
        break;
      }
      if (slot.tag == tag && pieces[slot.id] == piece) break;  // duplicate: keep the first
    }
  }
}

int32_t PieceIndex::find(std::string_view piece, const std::vector<std::string>& pieces) const {
  if (slots_.empty()) return -1;
  const uint64_t h = hash_piece(piece);
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.id < 0) return -1;
    if (slot.tag == tag && pieces[slot.id] == piece) return slot.id;
  }
}

MergeTable::MergeTable(size_t expected) {
  slots_.resize(capacity_for(expected));
  mask_ = slots_.size() - 1;
}

void MergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    for (uint64_t i = mix(s.key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = s;
        break;
      }
    }
  }
}

void MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  if ((size_ + 1) * 4 > slots_.size() * 3) grow();
  const uint64_t k = key(left, right);
  for (uint64_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.key == k) {
      slot.merge = merge;
      return;
    }
    if (slot.key == kEmpty) {
      slot = {k, merge};
      ++size_;
      return;
    }
  }
}

const MergeTable::Merge* MergeTable::find(int32_t left, int32_t right) const {
  const uint64_t k = key(left, right);
  for (uint64_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.key == k) return &slot.merge;
    if (slot.key == kEmpty) return nullptr;
  }
}

}  // namespace strata::text
