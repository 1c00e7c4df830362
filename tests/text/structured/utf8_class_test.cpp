// Character classes as UTF-8 byte grammars, checked against every code point: a class matches a
// code point's UTF-8 form (text/unicode.h's encoder) exactly when the code point is in it, and no
// ill-formed sequence (a surrogate's form, an overlong form, past U+10FFFF, a stray byte).
#include "text/structured/utf8_class.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "text/structured/automaton.h"
#include "text/unicode.h"

namespace strata::text::structured {
namespace {

void expect_class(const CodePointRanges& ranges, bool negated,
                  const std::function<bool(char32_t)>& in) {
  Grammar g;
  g.set_root(g.sequence({code_point_class(g, ranges, negated)}));
  Automaton a(g);
  size_t wrong = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string bytes;
    append_utf8(bytes, cp);
    const uint32_t s = a.walk(a.start(), bytes);
    const bool matched = s != Automaton::kDead && a.accepts(s);
    if (matched != in(cp) && ++wrong <= 5)
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(cp)
                    << (matched ? " matched" : " missed");
  }
  EXPECT_EQ(wrong, 0u);
  for (const char* bad :
       {"\xED\xA0\x80", "\xED\xBF\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xF0\x80\x80\x80",
        "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80", "\xFF"}) {
    const uint32_t s = a.walk(a.start(), bad);
    EXPECT_FALSE(s != Automaton::kDead && a.accepts(s)) << "an ill-formed sequence matched";
  }
}

TEST(Utf8Class, MatchesExactlyTheCodePointsOfTheClass) {
  expect_class({{'a', 'z'}}, false, [](char32_t c) { return c >= 'a' && c <= 'z'; });
  expect_class({{0, 0x10FFFF}}, false, [](char32_t) { return true; });
  // Ranges across every boundary of the encoding, overlapping and out of order.
  const CodePointRanges odd = {{0x7E, 0x82},         {0x7F0, 0x812},   {0xFFF0, 0x10010},
                               {0x3041, 0x309F},     {0x3000, 0x3050}, {0xD7F0, 0xE010},
                               {0x10FFF0, 0x10FFFF}, {0x5, 0x5}};
  const auto in_odd = [&odd](char32_t c) {
    for (const auto& [lo, hi] : odd)
      if (c >= lo && c <= hi) return true;
    return false;
  };
  expect_class(odd, false, in_odd);
  expect_class(odd, true, [&](char32_t c) { return !in_odd(c); });
  expect_class({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true,
               [](char32_t c) { return c != '"' && c != '\\' && c >= 0x20; });
}

TEST(Utf8Class, AsciiClassesAreOneByteSetAndEmptyClassesMatchNothing) {
  Grammar g;
  EXPECT_FALSE(code_point_class(g, {{'0', '9'}, {'a', 'f'}}).is_rule);
  EXPECT_TRUE(code_point_class(g, {{'a', 0xE9}}).is_rule);
  const Grammar::Item none = code_point_class(g, {{0xD800, 0xDFFF}});
  g.set_root(g.sequence({none}));
  Automaton a(g);
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(a.next(a.start(), static_cast<uint8_t>(b)), Automaton::kDead);
}

}  // namespace
}  // namespace strata::text::structured
