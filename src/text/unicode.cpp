// UTF-8 decoding and repair, character classes (utf8proc categories), normalization forms and
// the GPT-2 byte-level table.
#include "text/unicode.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace strata::text {

char32_t next_code_point(std::string_view text, size_t& pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const uint8_t lead = p[0];
  if (lead < 0x80) {
    pos += 1;
    return lead;
  }
  const size_t n = utf8_sequence_length(lead);
  if (n == 1 || pos + n > text.size()) {  // not valid UTF-8: callers promised it was
    pos += 1;
    return 0xFFFD;
  }
  char32_t cp = lead & (0xFF >> (n + 1));
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (p[i] & 0x3F);
  pos += n;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// How many bytes of a well-formed sequence start at p (0 when the lead byte is invalid), and how
// many bytes form the maximal valid prefix when it is cut short or broken (Unicode 3.9, D93b).
struct SequenceCheck {
  size_t valid_length;   // > 0: a complete, well-formed sequence of this length
  size_t broken_prefix;  // when valid_length == 0: bytes to replace by one U+FFFD (>= 1)
};

SequenceCheck check_sequence(const uint8_t* p, size_t available) {
  const uint8_t lead = p[0];
  if (lead < 0x80) return {1, 0};
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {0, 1};
  }
  for (size_t i = 1; i < n; ++i) {
    if (i >= available) return {0, i};
    const uint8_t b = p[i];
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {0, i};
  }
  return {n, 0};
}

}  // namespace

size_t valid_utf8_prefix(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const SequenceCheck c = check_sequence(p + i, n - i);
    if (c.valid_length == 0) return i;
    i += c.valid_length;
  }
  return n;
}

void append_utf8_lossy(std::string& out, std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    size_t run = i;  // copy valid runs in one go
    while (run < n) {
      if (p[run] < 0x80) {
        ++run;
        continue;
      }
      const SequenceCheck c = check_sequence(p + run, n - run);
      if (c.valid_length == 0) break;
      run += c.valid_length;
    }
    out.append(bytes.data() + i, run - i);
    if (run == n) return;
    out.append("\xEF\xBF\xBD");
    i = run + check_sequence(p + run, n - run).broken_prefix;
  }
}

bool is_whitespace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;  // Join_Control
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_numeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

namespace {

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

// Every code point below U+0300 is unchanged by NFC (no combining marks, no singletons), and
// such text has no byte >= 0xCC.
bool nfc_is_identity(std::string_view text) {
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) return false;
  }
  return true;
}

}  // namespace

std::string normalize_unicode(std::string_view text, NormalForm form) {
  if (form == NormalForm::kNfc ? nfc_is_identity(text) : is_ascii(text)) return std::string(text);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    fail(ErrorKind::kInvalidInput, "unicode normalization failed: {}", utf8proc_errmsg(n));
  }
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string to_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const auto c = static_cast<uint8_t>(text[pos]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
      ++pos;
      continue;
    }
    const char32_t cp = next_code_point(text, pos);
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}

int byte_level_byte(char32_t cp) {
  // The inverse of the table in unicode.h, built once.
  static const auto inverse = [] {
    std::array<int16_t, 324> bytes;
    bytes.fill(-1);
    for (int b = 0; b < 256; ++b) {
      const std::string_view ch = byte_level_char(static_cast<uint8_t>(b));
      size_t pos = 0;
      bytes[next_code_point(ch, pos)] = static_cast<int16_t>(b);
    }
    return bytes;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

}  // namespace strata::text
