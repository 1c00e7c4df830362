// A context-free grammar over bytes: the one form every output constraint compiles to (a JSON
// Schema, a regex, the grammar request field). Rules are alternatives of sequences of byte sets
// and rule references; compilers build them through the helpers below, and the automaton
// (structured/automaton.h) runs the laid-out form.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text::structured {

// A set of bytes.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

class Grammar {
 public:
  using Rule = uint32_t;
  // One item of an alternative: a byte set to match, or a rule to expand.
  struct Item {
    bool is_rule = false;
    uint32_t value = 0;  // a rule id, or an index into byte_sets()
  };
  // The laid-out form: element positions, each alternative's items followed by an end marker.
  struct Element {
    enum Kind : uint8_t { kBytes, kRule, kEnd } kind = kEnd;
    uint32_t value = 0;
  };

  Rule new_rule();  // no alternatives yet (matches nothing until some are added)
  void add(Rule rule, std::vector<Item> alternative);
  // Drops the rule's alternatives: for a compiler that gives a rule a stand-in definition until
  // the whole grammar is read.
  void clear(Rule rule);
  const std::vector<std::vector<Item>>& alternatives(Rule rule) const {
    return alternatives_.at(rule);
  }
  Item bytes(const ByteSet& set);
  static Item ref(Rule rule) { return Item{true, rule}; }

  // Helpers that each return a new rule.
  Rule literal(std::string_view text);
  Rule sequence(std::vector<Item> items);
  Rule choice(const std::vector<Rule>& rules);
  Rule empty();  // matches the empty string
  // rule repeated min..max times (max < 0: unbounded). Bounded repeats are expanded, so a rule
  // per count: bounds are capped by the compilers that call this.
  Rule repeat(Rule rule, int64_t min, int64_t max);

  void set_root(Rule rule) { root_ = rule; }
  Rule root() const { return root_; }
  size_t rule_count() const { return alternatives_.size(); }
  size_t item_count() const { return items_; }

  // Per rule: whether it matches the empty string.
  std::vector<bool> nullable_rules() const;
  // A rule that can call itself again before matching any byte with items left to match after
  // the call (left recursion, directly or through other rules and empty-matching prefixes): the
  // automaton's stack would grow without end on it. nullopt when there is none. A call that ends
  // its alternative returns straight to its caller's caller, so recursion there (a repeat's
  // tail) is fine.
  std::optional<Rule> left_recursive_rule() const;

  // Lays the rules out as elements; the automaton calls it.
  void lay_out(std::vector<Element>& elements, std::vector<std::vector<uint32_t>>& starts) const;
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }

 private:
  std::vector<std::vector<std::vector<Item>>> alternatives_;  // per rule
  std::vector<ByteSet> byte_sets_;
  Rule root_ = 0;
  size_t items_ = 0;
};

}  // namespace strata::text::structured
