// Code point ranges to UTF-8 byte-set sequences.
#include "text/structured/utf8_class.h"

#include <algorithm>
#include <array>

namespace strata::text::structured {

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kSurrogatesFirst = 0xD800, kSurrogatesLast = 0xDFFF;

// Sorted, overlaps and neighbours merged, clamped to Unicode, surrogates cut out.
CodePointRanges normalized(CodePointRanges ranges, bool negated) {
  for (auto& [lo, hi] : ranges) hi = std::min(hi, kMaxCodePoint);
  std::erase_if(ranges, [](const auto& r) { return r.first > r.second; });
  std::sort(ranges.begin(), ranges.end());
  CodePointRanges merged;
  for (const auto& [lo, hi] : ranges) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  if (negated) {
    CodePointRanges complement;
    char32_t next = 0;
    for (const auto& [lo, hi] : merged) {
      if (lo > next) complement.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next <= kMaxCodePoint) complement.emplace_back(next, kMaxCodePoint);
    merged = std::move(complement);
  }
  CodePointRanges out;
  for (const auto& [lo, hi] : merged) {
    if (hi < kSurrogatesFirst || lo > kSurrogatesLast) {
      out.emplace_back(lo, hi);
      continue;
    }
    if (lo < kSurrogatesFirst) out.emplace_back(lo, kSurrogatesFirst - 1);
    if (hi > kSurrogatesLast) out.emplace_back(kSurrogatesLast + 1, hi);
  }
  return out;
}

int encoded_length(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

std::array<uint8_t, 4> encode(char32_t cp, int n) {
  std::array<uint8_t, 4> b{};
  static constexpr uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int k = n - 1; k > 0; --k) {
    b[static_cast<size_t>(k)] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  b[0] = static_cast<uint8_t>(kLead[n] | cp);
  return b;
}

class Pieces {
 public:
  Pieces(Grammar& g, Grammar::Rule rule) : g_(g), rule_(rule) {}

  // A range of code points of one encoded length n > 1: cut where a continuation byte would
  // otherwise not run over its whole block, until each byte of the encoding ranges on its own
  // (then the range is exactly the byte ranges' product: one alternative).
  void add(char32_t lo, char32_t hi, int n) {
    for (int i = 1; i < n; ++i) {
      const char32_t block = (char32_t{1} << (6 * i)) - 1;  // the low bits i bytes hold
      if ((lo & ~block) == (hi & ~block)) continue;         // they share the bytes above
      if ((lo & block) != 0) {
        add(lo, lo | block, n);
        add((lo | block) + 1, hi, n);
        return;
      }
      if ((hi & block) != block) {
        add(lo, (hi & ~block) - 1, n);
        add(hi & ~block, hi, n);
        return;
      }
    }
    const auto a = encode(lo, n), b = encode(hi, n);
    std::vector<Grammar::Item> items;
    for (size_t k = 0; k < static_cast<size_t>(n); ++k) {
      ByteSet s;
      s.add_range(a[k], b[k]);
      items.push_back(g_.bytes(s));
    }
    g_.add(rule_, std::move(items));
  }

 private:
  Grammar& g_;
  Grammar::Rule rule_;
};

}  // namespace

Grammar::Item code_point_class(Grammar& g, CodePointRanges ranges, bool negated) {
  const CodePointRanges set = normalized(std::move(ranges), negated);
  ByteSet ascii;
  bool wide = false;
  for (const auto& [lo, hi] : set) {
    if (lo < 0x80)
      ascii.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(std::min<char32_t>(hi, 0x7F)));
    wide = wide || hi >= 0x80;
  }
  if (!wide && !ascii.empty()) return g.bytes(ascii);
  const Grammar::Rule r = g.new_rule();
  if (!ascii.empty()) g.add(r, {g.bytes(ascii)});
  Pieces pieces(g, r);
  static constexpr char32_t kLengthStarts[] = {0x80, 0x800, 0x10000, kMaxCodePoint + 1};
  for (const auto& [lo, hi] : set) {
    for (int k = 0; k < 3; ++k) {  // the part of [lo, hi] encoded in k + 2 bytes
      const char32_t from = std::max(lo, kLengthStarts[k]);
      const char32_t to = std::min<char32_t>(hi, kLengthStarts[k + 1] - 1);
      if (from <= to) pieces.add(from, to, encoded_length(from));
    }
  }
  return Grammar::ref(r);
}

}  // namespace strata::text::structured
