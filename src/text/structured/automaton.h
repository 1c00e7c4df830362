// The automaton a byte grammar runs as: a pushdown automaton whose configurations (stacks of
// grammar positions) are hash-consed, so a stack is one id and a state (the set of stacks the text
// so far allows) is one id too. Transitions are memoized per (state, byte), so the automaton grows
// into a DFA over the states text actually reaches, and the token-mask walk (structured/
// token_mask.h) becomes table lookups. Not thread-safe: its owner serializes calls.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "text/structured/grammar.h"

namespace strata::text::structured {

class Automaton {
 public:
  static constexpr uint32_t kDead = 0;  // the state no text reaches (every stack failed)

  explicit Automaton(const Grammar& grammar);

  uint32_t start() const { return start_; }
  uint32_t next(uint32_t state, uint8_t byte) {
    const size_t at = static_cast<size_t>(state) * 256 + byte;
    const int32_t known = transitions_[at];
    return known >= 0 ? static_cast<uint32_t>(known) : compute(state, byte);
  }
  uint32_t walk(uint32_t state, std::string_view bytes);
  // The text so far is complete (the grammar's root matched all of it).
  bool accepts(uint32_t state) const;
  // Complete and nothing may follow: only an end of generation.
  bool finished(uint32_t state) const;
  size_t state_count() const { return stacks_.size(); }

 private:
  struct Node {  // a grammar position and the stack below it
    uint32_t element;
    uint32_t below;
  };
  struct StacksHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };
  static constexpr uint32_t kBottom = 0xffffffffu;  // below the root
  static constexpr uint32_t kComplete = 0;          // the node id of an empty (complete) stack

  uint32_t compute(uint32_t state, uint8_t byte);
  uint32_t node(uint32_t element, uint32_t below);
  // Every stack that continues from `element` over `below` with a byte set on top (or complete).
  void close(uint32_t element, uint32_t below);
  uint32_t intern(std::vector<uint32_t>& stacks);

  std::vector<Grammar::Element> elements_;
  std::vector<std::vector<uint32_t>> starts_;  // per rule: its alternatives' first positions
  std::vector<ByteSet> sets_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<std::vector<uint32_t>> stacks_;  // per state: its stack nodes, sorted
  std::unordered_map<std::vector<uint32_t>, uint32_t, StacksHash> state_ids_;
  std::vector<int32_t> transitions_;  // state × 256 + byte -> state, -1 not computed yet
  uint32_t start_ = kDead;
  // Scratch of close().
  std::vector<uint32_t> out_;
  std::unordered_set<uint64_t> seen_;
};

}  // namespace strata::text::structured
