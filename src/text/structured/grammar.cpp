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

void Grammar::clear(Rule rule) {
  for (const std::vector<Item>& alt : alternatives_.at(rule)) items_ -= alt.size() + 1;
  alternatives_[rule].clear();
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

std::vector<bool> Grammar::nullable_rules() const {
  const size_t n = alternatives_.size();
  // An alternative of rule references only matches the empty string once each of them does:
  // worked off from the empty alternatives, each reference counted down once.
  std::vector<bool> nullable(n, false);
  std::vector<Rule> owner;        // per alternative of only rule references: its rule
  std::vector<size_t> remaining;  // per such alternative: references not yet known nullable
  std::vector<std::vector<uint32_t>> uses(n);  // per rule: those alternatives that reference it
  std::vector<Rule> work;
  for (size_t r = 0; r < n; ++r)
    for (const std::vector<Item>& alt : alternatives_[r]) {
      if (!std::all_of(alt.begin(), alt.end(), [](const Item& i) { return i.is_rule; })) continue;
      if (alt.empty()) {
        if (!nullable[r]) work.push_back(static_cast<Rule>(r));
        nullable[r] = true;
        continue;
      }
      for (const Item& i : alt) uses[i.value].push_back(static_cast<uint32_t>(owner.size()));
      owner.push_back(static_cast<Rule>(r));
      remaining.push_back(alt.size());
    }
  while (!work.empty()) {
    const Rule r = work.back();
    work.pop_back();
    for (uint32_t a : uses[r])
      if (--remaining[a] == 0 && !nullable[owner[a]]) {
        nullable[owner[a]] = true;
        work.push_back(owner[a]);
      }
  }
  return nullable;
}

std::optional<Grammar::Rule> Grammar::left_recursive_rule() const {
  const size_t n = alternatives_.size();
  const std::vector<bool> nullable = nullable_rules();
  // The calls made before any byte is matched: rule -> callee, and whether items follow the call.
  std::vector<size_t> first(n + 1, 0);
  std::vector<Rule> callee;
  std::vector<char> grows;
  for (size_t r = 0; r < n; ++r) {
    first[r] = callee.size();
    for (const std::vector<Item>& alt : alternatives_[r])
      for (size_t k = 0; k < alt.size() && alt[k].is_rule; ++k) {
        callee.push_back(alt[k].value);
        grows.push_back(k + 1 < alt.size());
        if (!nullable[alt[k].value]) break;
      }
  }
  first[n] = callee.size();
  // Strongly connected components of those calls (Tarjan's, with an explicit stack): a growing
  // call inside a component is left recursion.
  constexpr uint32_t kUnseen = 0xffffffffu;
  std::vector<uint32_t> index(n, kUnseen), low(n, 0), component(n, kUnseen);
  std::vector<Rule> open;
  std::vector<char> on_open(n, 0);
  std::vector<std::pair<Rule, size_t>> calls;  // the walk: a rule and its next call to follow
  uint32_t counter = 0;
  auto visit = [&](Rule r) {
    index[r] = low[r] = counter++;
    open.push_back(r);
    on_open[r] = 1;
    calls.emplace_back(r, first[r]);
  };
  for (size_t s = 0; s < n; ++s) {
    if (index[s] != kUnseen) continue;
    visit(static_cast<Rule>(s));
    while (!calls.empty()) {
      const Rule v = calls.back().first;
      const size_t e = calls.back().second;
      if (e < first[v + 1]) {
        ++calls.back().second;
        const Rule w = callee[e];
        if (index[w] == kUnseen) {
          visit(w);
        } else if (on_open[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        Rule w;
        do {
          w = open.back();
          open.pop_back();
          on_open[w] = 0;
          component[w] = v;
        } while (w != v);
      }
      calls.pop_back();
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[v]);
    }
  }
  for (size_t r = 0; r < n; ++r)
    for (size_t e = first[r]; e < first[r + 1]; ++e)
      if (grows[e] && component[callee[e]] == component[r]) return static_cast<Rule>(r);
  return std::nullopt;
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
