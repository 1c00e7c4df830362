// Unicode data for Python's str semantics (see tools/gen_jinja_unicode_tables.py, which generates
// unicode_tables.cpp from CPython's unicodedata): general categories, character properties as
// flip-point lists, and full case mappings.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::text::jinja::unicode {

// General categories, in the order of kCategoryStarts' low 5 bits.
enum Category : uint8_t {
  kCn,
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo,
};

// A run of one-to-one case mappings: `count` code points from `start`, `stride` apart, each
// mapping to itself plus `delta`.
struct CaseRule {
  uint32_t start;
  uint32_t count;
  uint32_t stride;
  int32_t delta;
};

// A mapping to several code points (UTF-8), e.g. U+00DF -> "SS".
struct CaseSpecial {
  uint32_t code_point;
  const char* utf8;
};

// (start << 5 | category) for each run of equal category, sorted.
extern const uint32_t kCategoryStarts[];
extern const size_t kCategoryStartsSize;
// Flip points of boolean properties: c is in the set when an odd number of entries are <= c.
extern const uint32_t kLowercase[];
extern const size_t kLowercaseSize;
extern const uint32_t kUppercase[];
extern const size_t kUppercaseSize;
extern const uint32_t kDigit[];
extern const size_t kDigitSize;
extern const uint32_t kNumeric[];
extern const size_t kNumericSize;

extern const CaseRule kUpperRules[];
extern const size_t kUpperRulesSize;
extern const CaseSpecial kUpperSpecial[];
extern const size_t kUpperSpecialSize;
extern const CaseRule kLowerRules[];
extern const size_t kLowerRulesSize;
extern const CaseSpecial kLowerSpecial[];
extern const size_t kLowerSpecialSize;
// Code points whose title case differs from their upper case.
extern const CaseSpecial kTitleSpecial[];
extern const size_t kTitleSpecialSize;

}  // namespace strata::text::jinja::unicode
