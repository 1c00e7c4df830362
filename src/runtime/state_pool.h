// StatePool: the sequence states an engine runs, allocated once when the engine starts, so that
// no request allocates state. A slot is one sequence of the pool's capacity (per attention layer
// its KV rows, per recurrent layer its conv window and SSM matrix); a request holds one slot from
// admission to its end and finds it reset to empty.
//
// Every slot holds a whole context, so a running request never runs out of KV rows and nothing is
// preempted; the price is memory for the full context of every slot. Paged KV (blocks shared
// between sequences with a common prefix) replaces this layout when the prefix cache comes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/sequence.h"

namespace strata::runtime {

class StatePool {
 public:
  StatePool(const model::Model& model, int64_t slots, int64_t capacity);

  int64_t slots() const { return static_cast<int64_t>(sequences_.size()); }
  int64_t free_slots() const { return static_cast<int64_t>(free_.size()); }
  int64_t capacity() const { return capacity_; }  // tokens per slot
  size_t bytes() const { return bytes_; }         // all slots' state

  // A free slot, reset to empty; -1 when every slot is taken.
  int acquire();
  void release(int slot);
  Sequence& sequence(int slot) { return *sequences_.at(static_cast<size_t>(slot)); }

  // The state bytes of one slot of `capacity` tokens.
  static size_t slot_bytes(const model::ModelInfo& info, int64_t capacity);

 private:
  std::vector<std::unique_ptr<Sequence>> sequences_;
  std::vector<int> free_;  // taken from the back: the lowest slot first
  int64_t capacity_ = 0;
  size_t bytes_ = 0;
};

}  // namespace strata::runtime
