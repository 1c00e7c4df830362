// The automaton a byte grammar runs as: a pushdown automaton whose configurations (stacks of
// grammar positions) are hash-consed, so a stack is one id and a state (the set of stacks the text
// so far allows) is one id too. Transitions are memoized per (state, byte), so the automaton grows
// into a DFA over the states text actually reaches, and the token-mask walk (structured/
// token_mask.h) becomes table lookups. Not thread-safe: its owner serializes calls.
//
// Work is budgeted, so that an ambiguous grammar cannot hold the engine thread for seconds: a unit
// per stack a transition looks at (a bit test) and kItemWork per item its closure visits (a hash
// set insert, often a new stack node). The owner restarts the budget for each operation (a token
// mask, a token's advance; building the start state is one too), and an operation is charged what
// it would cost on a fresh automaton: each transition it takes costs, once, the work it took when
// it was first computed, also when it is read from the table. So the same grammar and text always
// cost the same whatever other requests warmed the automaton, and the budget bounds the work an
// operation can really do. Past the budget the operation throws Error(kInvalidInput) saying so.
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
  // The work of one stack closure item, in units of a stack looked at.
  static constexpr uint64_t kItemWork = 16;
  // Units of work one operation may take: at worst (an ambiguous grammar's large stack sets)
  // about a fifth of a second for a token mask, measured on two shared cores. The JSON schemas of
  // bench/bench_structured take at most about 700,000 per token mask over a 150K- or 262K-token
  // vocabulary, the calls of sixty tools of twelve parameters each under 400,000.
  static constexpr uint64_t kWorkBudget = 16'000'000;

  explicit Automaton(const Grammar& grammar);

  uint32_t start() const { return start_; }
  // Starts a new operation: the work from here on is counted against a whole budget.
  void restart_budget();
  uint64_t spent() const { return spent_; }  // the operation's work so far
  uint32_t next(uint32_t state, uint8_t byte) {
    const size_t at = static_cast<size_t>(state) * 256 + byte;
    const int32_t known = transitions_[at];
    if (known < 0) return compute(state, byte);
    if (!(known & kCharged)) charge(at);
    return static_cast<uint32_t>(known & kStateMask);
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
  // A known transition packs the state it leads to, the work it cost (a cost too large for its
  // bits is kept in costly_) and whether the current operation was charged for it; the sign bit
  // stays clear (-1: not computed yet).
  static constexpr int kStateBits = 18;
  static constexpr int kCostBits = 12;
  static constexpr int32_t kStateMask = (1 << kStateBits) - 1;
  static constexpr int32_t kCostInTable = (1 << kCostBits) - 1;
  static constexpr int32_t kCharged = 1 << (kStateBits + kCostBits);

  void spend(uint64_t units) {
    spent_ += units;
    if (spent_ > kWorkBudget) over_budget();
  }
  [[noreturn]] static void over_budget();
  void charge(size_t at);  // a known transition's first use in this operation
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
  std::vector<int32_t> transitions_;  // state × 256 + byte -> state and cost, -1 not computed yet
  std::unordered_map<size_t, uint64_t> costly_;  // state × 256 + byte -> cost, when too large
  uint32_t start_ = kDead;
  uint64_t spent_ = 0;
  std::vector<size_t> charged_;  // the transitions marked kCharged in this operation
  // Scratch of close().
  std::vector<uint32_t> out_;
  std::unordered_set<uint64_t> seen_;
};

}  // namespace strata::text::structured
