// The hash-consed pushdown automaton of a byte grammar.
#include "text/structured/automaton.h"

#include <algorithm>

#include "core/error.h"

namespace strata::text::structured {

namespace {
// Bounds on what one constraint may build as text is matched (a request's schema can be hostile):
// past them the request fails with a clear error rather than taking the server's memory.
constexpr size_t kMaxNodes = 8'000'000;
constexpr size_t kMaxStates = 200'000;
}  // namespace

static_assert(kMaxStates <= (size_t{1} << 18), "a state id must fit a transition's state bits");

size_t Automaton::StacksHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ v.size();
  for (uint32_t x : v) h = (h ^ x) * 0x100000001b3ull + (h >> 29);
  return static_cast<size_t>(h);
}

Automaton::Automaton(const Grammar& grammar) : sets_(grammar.byte_sets()) {
  grammar.lay_out(elements_, starts_);
  nodes_.push_back(Node{kBottom, kBottom});  // kComplete
  std::vector<uint32_t> none;
  intern(none);  // kDead
  out_.clear();
  seen_.clear();
  for (uint32_t a : starts_.at(grammar.root())) close(a, kBottom);
  start_ = intern(out_);
}

void Automaton::restart_budget() {
  for (size_t at : charged_) transitions_[at] &= ~kCharged;
  charged_.clear();
  spent_ = 0;
}

void Automaton::charge(size_t at) {
  const int32_t cost = (transitions_[at] >> kStateBits) & kCostInTable;
  transitions_[at] |= kCharged;
  charged_.push_back(at);
  spend(cost == kCostInTable ? costly_.at(at) : static_cast<uint64_t>(cost));
}

void Automaton::over_budget() {
  throw Error(ErrorKind::kInvalidInput,
              fmt::format("the output constraint is too ambiguous: matching it at one point of "
                          "the text takes over {} steps (its alternatives and repeats can read "
                          "the same text in too many ways)",
                          kWorkBudget));
}

uint32_t Automaton::node(uint32_t element, uint32_t below) {
  const uint64_t key = (uint64_t{element} << 32) | below;
  auto [it, fresh] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (fresh) {
    check(nodes_.size() < kMaxNodes, ErrorKind::kInvalidInput,
          "the output constraint grew too large while matching (over {} stack nodes)",
          kMaxNodes);
    nodes_.push_back(Node{element, below});
  }
  return it->second;
}

void Automaton::close(uint32_t element, uint32_t below) {
  // An explicit work list: nested rules at the start of alternatives could otherwise recurse deep.
  struct Item {
    uint32_t element, below;
  };
  std::vector<Item> work{{element, below}};
  while (!work.empty()) {
    const Item it = work.back();
    work.pop_back();
    spend(kItemWork);
    if (!seen_.insert((uint64_t{it.element} << 32) | it.below).second) continue;
    check(seen_.size() < kMaxNodes, ErrorKind::kInvalidInput,
          "the output constraint is too ambiguous to match");
    const Grammar::Element& e = elements_[it.element];
    switch (e.kind) {
      case Grammar::Element::kEnd:
        if (it.below == kBottom) {
          out_.push_back(kComplete);
        } else {
          const Node& n = nodes_[it.below];
          work.push_back({n.element, n.below});
        }
        break;
      case Grammar::Element::kBytes:
        if (!sets_[e.value].empty()) out_.push_back(node(it.element, it.below));
        break;
      case Grammar::Element::kRule: {
        // A rule last in its alternative returns straight to the stack below (no growth: a
        // right-recursive repeat runs in constant stack).
        const uint32_t after = elements_[it.element + 1].kind == Grammar::Element::kEnd
                                   ? it.below
                                   : node(it.element + 1, it.below);
        const std::vector<uint32_t>& alts = starts_[e.value];
        for (auto a = alts.rbegin(); a != alts.rend(); ++a) work.push_back({*a, after});
        check(work.size() < kMaxNodes, ErrorKind::kInvalidInput,
              "the output constraint is too ambiguous to match");
        break;
      }
    }
  }
}

uint32_t Automaton::intern(std::vector<uint32_t>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty() && !stacks_.empty()) return kDead;
  auto [it, fresh] = state_ids_.try_emplace(stacks, static_cast<uint32_t>(stacks_.size()));
  if (fresh) {
    check(stacks_.size() < kMaxStates, ErrorKind::kInvalidInput,
          "the output constraint grew too large while matching (over {} states)", kMaxStates);
    stacks_.push_back(stacks);
    transitions_.resize(stacks_.size() * 256, -1);
    if (it->second == kDead) std::fill(transitions_.begin(), transitions_.begin() + 256, 0);
  }
  return it->second;
}

uint32_t Automaton::compute(uint32_t state, uint8_t byte) {
  const uint64_t before = spent_;
  out_.clear();
  seen_.clear();
  for (uint32_t n : stacks_[state]) {
    spend(1);
    if (n == kComplete) continue;
    const Node node = nodes_[n];
    if (sets_[elements_[node.element].value].has(byte)) close(node.element + 1, node.below);
  }
  const uint32_t next = intern(out_);
  const size_t at = static_cast<size_t>(state) * 256 + byte;
  const uint64_t cost = spent_ - before;
  if (cost >= kCostInTable) costly_.emplace(at, cost);
  const auto packed = static_cast<int32_t>(std::min<uint64_t>(cost, kCostInTable));
  transitions_[at] = (packed << kStateBits) | static_cast<int32_t>(next) | kCharged;
  charged_.push_back(at);  // its work was this operation's
  return next;
}

uint32_t Automaton::walk(uint32_t state, std::string_view bytes) {
  for (char c : bytes) {
    if (state == kDead) break;
    state = next(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool Automaton::accepts(uint32_t state) const {
  const std::vector<uint32_t>& s = stacks_[state];
  return !s.empty() && s.front() == kComplete;
}

bool Automaton::finished(uint32_t state) const {
  const std::vector<uint32_t>& s = stacks_[state];
  return s.size() == 1 && s.front() == kComplete;
}

}  // namespace strata::text::structured
