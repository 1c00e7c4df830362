// Python str semantics over UTF-8 (see pystring.h). Character classes and case mappings come from
// tables generated from CPython's unicodedata (unicode_tables.cpp); whitespace and line
// boundaries follow CPython's own definitions.
#include "text/jinja/pystring.h"

#include <algorithm>

#include "text/jinja/unicode_tables.h"

namespace strata::text::jinja::py {
namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // invalid byte b decodes to U+DC00 + b (b >= 0x80)

unicode::Category category(char32_t c) {
  if (c > 0x10FFFF) return unicode::kCn;
  const uint32_t* begin = unicode::kCategoryStarts;
  const uint32_t* end = begin + unicode::kCategoryStartsSize;
  const uint32_t* it = std::upper_bound(begin, end, (static_cast<uint32_t>(c) << 5) | 31u);
  return static_cast<unicode::Category>(*(it - 1) & 31u);
}

bool in_set(const uint32_t* flips, size_t size, char32_t c) {
  return (std::upper_bound(flips, flips + size, static_cast<uint32_t>(c)) - flips) % 2 == 1;
}

const char* find_special(const unicode::CaseSpecial* table, size_t size, char32_t c) {
  const unicode::CaseSpecial* end = table + size;
  const unicode::CaseSpecial* it = std::lower_bound(
      table, end, c, [](const unicode::CaseSpecial& e, char32_t v) { return e.code_point < v; });
  return it != end && it->code_point == c ? it->utf8 : nullptr;
}

char32_t apply_rules(const unicode::CaseRule* rules, size_t size, char32_t c) {
  for (size_t i = 0; i < size && rules[i].start <= c; ++i) {
    const unicode::CaseRule& r = rules[i];
    uint32_t offset = static_cast<uint32_t>(c) - r.start;
    if (offset % r.stride == 0 && offset / r.stride < r.count) {
      return static_cast<char32_t>(static_cast<int64_t>(c) + r.delta);
    }
  }
  return c;
}

// Full case mappings (one code point may map to several), appended as UTF-8.
void append_upper(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
  } else if (const char* s = find_special(unicode::kUpperSpecial, unicode::kUpperSpecialSize, c)) {
    out += s;
  } else {
    append_utf8(out, apply_rules(unicode::kUpperRules, unicode::kUpperRulesSize, c));
  }
}

void append_lower(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
  } else if (const char* s = find_special(unicode::kLowerSpecial, unicode::kLowerSpecialSize, c)) {
    out += s;
  } else {
    append_utf8(out, apply_rules(unicode::kLowerRules, unicode::kLowerRulesSize, c));
  }
}

void append_title(std::string& out, char32_t c) {
  if (const char* s = find_special(unicode::kTitleSpecial, unicode::kTitleSpecialSize, c)) {
    out += s;
  } else {
    append_upper(out, c);
  }
}

// Lower-cases cps[i], with CPython's final-sigma rule for U+03A3.
void append_lower_at(std::string& out, const std::u32string& cps, size_t i) {
  if (cps[i] != 0x3A3) {
    append_lower(out, cps[i]);
    return;
  }
  bool cased_before = i > 0 && is_cased(cps[i - 1]);
  bool cased_after = i + 1 < cps.size() && is_cased(cps[i + 1]);
  append_utf8(out, cased_before && !cased_after ? 0x3C2 : 0x3C3);
}

char32_t next_code_point(std::string_view s, size_t& i) {
  auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  }
  if (len == 0 || i + len > s.size()) {
    ++i;
    return kEscapeBase + b0;
  }
  for (int k = 1; k < len; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return kEscapeBase + b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return kEscapeBase + b0;
  }
  i += len;
  return cp;
}

bool in_chars(char32_t c, const std::u32string& chars) {
  return chars.find(c) != std::u32string::npos;
}

bool is_line_break(char32_t c) {
  switch (c) {
    case '\n':
    case '\r':
    case 0x0B:
    case 0x0C:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x85:
    case 0x2028:
    case 0x2029:
      return true;
    default:
      return false;
  }
}

std::vector<std::string> split_whitespace(const std::u32string& cps, int64_t maxsplit,
                                          bool reverse) {
  std::vector<std::string> out;
  int64_t n = static_cast<int64_t>(cps.size());
  if (!reverse) {
    int64_t i = 0;
    while (i < n) {
      while (i < n && is_space(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(encode(std::u32string_view(cps).substr(i)));  // keeps trailing whitespace
        break;
      }
      int64_t j = i;
      while (j < n && !is_space(cps[j])) ++j;
      out.push_back(encode(std::u32string_view(cps).substr(i, j - i)));
      i = j;
    }
    return out;
  }
  int64_t i = n;
  while (i > 0) {
    while (i > 0 && is_space(cps[i - 1])) --i;
    if (i <= 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(encode(std::u32string_view(cps).substr(0, i)));  // keeps leading whitespace
      break;
    }
    int64_t j = i;
    while (j > 0 && !is_space(cps[j - 1])) --j;
    out.push_back(encode(std::u32string_view(cps).substr(j, i - j)));
    i = j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out.push_back(next_code_point(s, i));
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c >= kEscapeBase + 0x80 && c <= kEscapeBase + 0xFF) {
    out.push_back(static_cast<char>(c - kEscapeBase));
  } else if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

size_t length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  size_t i = 0;
  while (i < s.size()) {
    next_code_point(s, i);
    ++n;
  }
  return n;
}

bool is_space(char32_t c) {
  if (c <= 0x20) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}
bool is_printable(char32_t c) {
  if (c == ' ') return true;
  if (c >= kEscapeBase + 0x80 && c <= kEscapeBase + 0xFF) return false;
  switch (category(c)) {
    case unicode::kCc:
    case unicode::kCf:
    case unicode::kCs:
    case unicode::kCo:
    case unicode::kCn:
    case unicode::kZl:
    case unicode::kZp:
    case unicode::kZs:
      return false;
    default:
      return true;
  }
}

bool is_alpha(char32_t c) {
  auto cat = category(c);
  return cat >= unicode::kLu && cat <= unicode::kLo;
}
bool is_decimal(char32_t c) { return category(c) == unicode::kNd; }
bool is_digit(char32_t c) { return in_set(unicode::kDigit, unicode::kDigitSize, c); }
bool is_numeric(char32_t c) { return in_set(unicode::kNumeric, unicode::kNumericSize, c); }
bool is_alnum(char32_t c) { return is_alpha(c) || is_decimal(c) || is_digit(c) || is_numeric(c); }
bool is_word(char32_t c) { return c == '_' || is_alnum(c); }
bool is_cased_upper(char32_t c) { return in_set(unicode::kUppercase, unicode::kUppercaseSize, c); }
bool is_cased_lower(char32_t c) { return in_set(unicode::kLowercase, unicode::kLowercaseSize, c); }
bool is_cased(char32_t c) {
  return is_cased_upper(c) || is_cased_lower(c) || category(c) == unicode::kLt;
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back(c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c);
    return out;
  }
  for (char32_t c : decode(s)) append_upper(out, c);
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
    return out;
  }
  std::u32string cps = decode(s);
  for (size_t i = 0; i < cps.size(); ++i) append_lower_at(out, cps, i);
  return out;
}

std::string capitalize(std::string_view s) {
  std::u32string cps = decode(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) {
      append_title(out, cps[i]);
    } else {
      append_lower_at(out, cps, i);
    }
  }
  return out;
}

std::string title(std::string_view s) {
  std::u32string cps = decode(s);
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    if (previous_cased) {
      append_lower_at(out, cps, i);
    } else {
      append_title(out, c);
    }
    previous_cased = is_cased(c);
  }
  return out;
}

std::string swapcase(std::string_view s) {
  std::u32string cps = decode(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    if (is_cased_upper(c)) {
      append_lower_at(out, cps, i);
    } else if (is_cased_lower(c)) {
      append_upper(out, c);
    } else {
      append_utf8(out, c);
    }
  }
  return out;
}

bool all_of(std::string_view s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  std::u32string cps = decode(s);
  return std::all_of(cps.begin(), cps.end(), pred);
}

bool is_lower(std::string_view s) {
  bool any_cased = false;
  for (char32_t c : decode(s)) {
    if (is_cased_upper(c) || category(c) == unicode::kLt) return false;
    if (is_cased_lower(c)) any_cased = true;
  }
  return any_cased;
}

bool is_upper(std::string_view s) {
  bool any_cased = false;
  for (char32_t c : decode(s)) {
    if (is_cased_lower(c) || category(c) == unicode::kLt) return false;
    if (is_cased_upper(c)) any_cased = true;
  }
  return any_cased;
}

bool is_title(std::string_view s) {
  bool any_cased = false;
  bool previous_cased = false;
  for (char32_t c : decode(s)) {
    if (is_cased_upper(c) || category(c) == unicode::kLt) {
      if (previous_cased) return false;
      previous_cased = any_cased = true;
    } else if (is_cased_lower(c)) {
      if (!previous_cased) return false;
      previous_cased = any_cased = true;
    } else {
      previous_cased = false;
    }
  }
  return any_cased;
}

std::string strip(std::string_view s, std::optional<std::string_view> chars, bool left,
                  bool right) {
  if (is_ascii(s) && (!chars || is_ascii(*chars))) {
    auto strip_char = [&](char c) {
      return chars ? chars->find(c) != std::string_view::npos
                   : is_space(static_cast<unsigned char>(c));
    };
    size_t begin = 0;
    size_t end = s.size();
    if (left)
      while (begin < end && strip_char(s[begin])) ++begin;
    if (right)
      while (end > begin && strip_char(s[end - 1])) --end;
    return std::string(s.substr(begin, end - begin));
  }
  std::u32string cps = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_cp = [&](char32_t c) { return chars ? in_chars(c, set) : is_space(c); };
  size_t begin = 0;
  size_t end = cps.size();
  if (left)
    while (begin < end && strip_cp(cps[begin])) ++begin;
  if (right)
    while (end > begin && strip_cp(cps[end - 1])) --end;
  return encode(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view s, std::optional<std::string_view> sep,
                               int64_t maxsplit) {
  if (!sep) return split_whitespace(decode(s), maxsplit, false);
  std::vector<std::string> out;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, std::optional<std::string_view> sep,
                                int64_t maxsplit) {
  if (!sep) return split_whitespace(decode(s), maxsplit, true);
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::u32string cps = decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  size_t i = 0;
  while (i < cps.size()) {
    if (!is_line_break(cps[i])) {
      ++i;
      continue;
    }
    size_t eol = i;
    size_t next = i + 1;
    if (cps[i] == '\r' && next < cps.size() && cps[next] == '\n') ++next;
    out.push_back(encode(std::u32string_view(cps).substr(start, (keepends ? next : eol) - start)));
    start = i = next;
  }
  if (start < cps.size()) out.push_back(encode(std::u32string_view(cps).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    std::u32string cps = decode(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

SliceIndices slice_indices(int64_t length, std::optional<int64_t> start,
                           std::optional<int64_t> stop, std::optional<int64_t> step) {
  SliceIndices r{};
  r.step = step.value_or(1);
  if (r.step > 0) {
    r.start =
        start ? (*start < 0 ? std::max<int64_t>(*start + length, 0) : std::min(*start, length)) : 0;
    r.stop = stop ? (*stop < 0 ? std::max<int64_t>(*stop + length, 0) : std::min(*stop, length))
                  : length;
    r.count = r.stop > r.start ? (r.stop - r.start + r.step - 1) / r.step : 0;
  } else {
    r.start =
        start ? (*start < 0 ? std::max<int64_t>(*start + length, -1) : std::min(*start, length - 1))
              : length - 1;
    r.stop = stop
                 ? (*stop < 0 ? std::max<int64_t>(*stop + length, -1) : std::min(*stop, length - 1))
                 : -1;
    r.count = r.start > r.stop ? (r.start - r.stop - r.step - 1) / (-r.step) : 0;
  }
  return r;
}

int64_t clamp_index(int64_t index, int64_t length) {
  if (index < 0) index = std::max<int64_t>(index + length, 0);
  return std::min(index, length);
}

int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse) {
  std::u32string cps = decode(s);
  std::u32string needle = decode(sub);
  auto n = static_cast<int64_t>(cps.size());
  int64_t lo = start ? clamp_index(*start, n) : 0;
  int64_t hi = end ? clamp_index(*end, n) : n;
  if (hi - lo < static_cast<int64_t>(needle.size())) return -1;
  std::u32string_view window = std::u32string_view(cps).substr(lo, hi - lo);
  size_t hit = reverse ? window.rfind(needle) : window.find(needle);
  return hit == std::u32string_view::npos ? -1 : lo + static_cast<int64_t>(hit);
}

int64_t count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
              std::optional<int64_t> end) {
  std::u32string cps = decode(s);
  std::u32string needle = decode(sub);
  auto n = static_cast<int64_t>(cps.size());
  int64_t lo = start ? clamp_index(*start, n) : 0;
  int64_t hi = end ? clamp_index(*end, n) : n;
  if (hi < lo) return 0;
  if (needle.empty()) return hi - lo + 1;
  std::u32string_view window = std::u32string_view(cps).substr(lo, hi - lo);
  int64_t total = 0;
  size_t pos = 0;
  while ((pos = window.find(needle, pos)) != std::u32string_view::npos) {
    ++total;
    pos += needle.size();
  }
  return total;
}

}  // namespace strata::text::jinja::py
