// StatePool: slots allocated up front, handed out lowest first.
#include "runtime/state_pool.h"

#include <algorithm>

#include "core/error.h"

namespace strata::runtime {

StatePool::StatePool(const model::Model& model, int64_t slots, int64_t capacity)
    : capacity_(capacity) {
  check(slots > 0, ErrorKind::kInvalidInput, "the engine needs at least one sequence slot (got {})",
        slots);
  check(capacity > 0, ErrorKind::kInvalidInput, "the context size must be positive (got {})",
        capacity);
  sequences_.reserve(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i)
    sequences_.push_back(std::make_unique<Sequence>(model, capacity));
  for (int64_t i = slots - 1; i >= 0; --i) free_.push_back(static_cast<int>(i));
  bytes_ = static_cast<size_t>(slots) * slot_bytes(model.info(), capacity);
}

int StatePool::acquire() {
  if (free_.empty()) return -1;
  const int slot = free_.back();
  free_.pop_back();
  sequences_[static_cast<size_t>(slot)]->reset();
  return slot;
}

void StatePool::release(int slot) {
  check(slot >= 0 && slot < slots() && std::find(free_.begin(), free_.end(), slot) == free_.end(),
        ErrorKind::kInternal, "slot {} released twice or never taken", slot);
  free_.push_back(slot);
  // Lowest first again, so that a lone request always runs in slot 0 (its graphs stay warm).
  std::sort(free_.begin(), free_.end(), std::greater<>());
}

size_t StatePool::slot_bytes(const model::ModelInfo& info, int64_t capacity) {
  return info.state_bytes_fixed + info.state_bytes_per_token * static_cast<size_t>(capacity);
}

}  // namespace strata::runtime
