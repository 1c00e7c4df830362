// Flat open-addressing tables for the BPE hot path (power-of-two capacity, linear probing, no
// allocation per entry): PieceIndex maps a piece string to its id, MergeTable maps a pair of
// ids to the merge that joins them. Built once at load time, then read-only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text {

uint64_t hash_piece(std::string_view s);

class PieceIndex {
 public:
  PieceIndex() = default;
  // Indexes pieces[id] for every non-empty piece; the first of duplicate pieces wins.
  explicit PieceIndex(const std::vector<std::string>& pieces);
  // The id of `piece`, or -1. `pieces` must be the vector the index was built from.
  int32_t find(std::string_view piece, const std::vector<std::string>& pieces) const;

 private:
  struct Slot {
    uint32_t tag = 0;  // high bits of the hash
    int32_t id = -1;   // -1: empty
  };
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
};

class MergeTable {
 public:
  struct Merge {
    uint32_t rank;
    int32_t id;  // the merged token
  };
  explicit MergeTable(size_t expected = 0);
  void insert(int32_t left, int32_t right, Merge merge);  // replaces an existing pair
  const Merge* find(int32_t left, int32_t right) const;
  size_t size() const { return size_; }

 private:
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are below 2^31, so no key is all ones
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  void grow();
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace strata::text
