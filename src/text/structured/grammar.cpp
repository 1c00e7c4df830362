// Building and laying out byte grammars.
#include "text/structured/grammar.h"

#include <algorithm>

#include "core/error.h"

namespace strata::text::structured {

namespace {
// A grammar larger than this is refused: it bounds the memory a request's schema can take.
constexpr size_t kMaxItems = 4'000'000;
}  // namespace

Grammar::Rule Grammar::new_rule() {
  alternatives_.emplace_back();
  return static_cast<Rule>(alternatives_.size() - 1);
}

void Grammar::add(Rule rule, std::vector<Item> alternative) {
  items_ += alternative.size() + 1;
  check(items_ <= kMaxItems, ErrorKind::kInvalidInput,
        "the output constraint is too large (over {} grammar items): lower its bounds "
        "(maxLength, maxItems, repetition counts)",
        kMaxItems);
  alternatives_.at(rule).push_back(std::move(alternative));
}

Grammar::Item Grammar::bytes(const ByteSet& set) {
  // Byte sets are few and reused (the digit class, a string's characters): shared by value.
  auto it = std::find(byte_sets_.begin(), byte_sets_.end(), set);
  if (it == byte_sets_.end()) {
    byte_sets_.push_back(set);
    it = byte_sets_.end() - 1;
  }
  return Item{false, static_cast<uint32_t>(it - byte_sets_.begin())};
}

Grammar::Rule Grammar::literal(std::string_view text) {
  std::vector<Item> items;
  for (char c : text) {
    ByteSet s;
    s.add(static_cast<uint8_t>(c));
    items.push_back(bytes(s));
  }
  return sequence(std::move(items));
}

Grammar::Rule Grammar::sequence(std::vector<Item> items) {
  const Rule r = new_rule();
  add(r, std::move(items));
  return r;
}

Grammar::Rule Grammar::choice(const std::vector<Rule>& rules) {
  const Rule r = new_rule();
  for (Rule x : rules) add(r, {ref(x)});
  return r;
}

Grammar::Rule Grammar::empty() { return sequence({}); }

Grammar::Rule Grammar::repeat(Rule rule, int64_t min, int64_t max) {
  std::vector<Item> items(static_cast<size_t>(min), ref(rule));
  if (max < 0) {
    const Rule tail = new_rule();  // tail := rule tail | ""
    add(tail, {ref(rule), ref(tail)});
    add(tail, {});
    items.push_back(ref(tail));
  } else if (max > min) {
    Rule opt = empty();  // opt_k := rule opt_{k-1} | ""
    for (int64_t k = 0; k < max - min; ++k) {
      const Rule next = new_rule();
      add(next, {ref(rule), ref(opt)});
      add(next, {});
      opt = next;
    }
    items.push_back(ref(opt));
  }
  return sequence(std::move(items));
}

void Grammar::lay_out(std::vector<Element>& elements,
                      std::vector<std::vector<uint32_t>>& starts) const {
  elements.clear();
  starts.assign(alternatives_.size(), {});
  for (size_t r = 0; r < alternatives_.size(); ++r)
    for (const std::vector<Item>& alt : alternatives_[r]) {
      starts[r].push_back(static_cast<uint32_t>(elements.size()));
      for (const Item& item : alt)
        elements.push_back(
            Element{item.is_rule ? Element::kRule : Element::kBytes, item.value});
      elements.push_back(Element{Element::kEnd, 0});
    }
}

}  // namespace strata::text::structured
