// UTF-8 and Unicode helpers shared by the tokenizer stages: decoding and lossy repair of UTF-8,
// the character classes the Hugging Face pipeline relies on, normalization forms (utf8proc), and
// the GPT-2 byte <-> character table of byte-level BPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::text {

// Length of the UTF-8 sequence that starts with this lead byte (1 for ASCII and stray bytes).
inline size_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return lead < 0xC0 ? 1 : 2;
  return lead < 0xF0 ? 3 : 4;
}

// Decodes the code point at text[pos] of known-valid UTF-8 and advances pos past it.
char32_t next_code_point(std::string_view text, size_t& pos);

void append_utf8(std::string& out, char32_t cp);

// Length of the longest prefix of `bytes` that is valid UTF-8.
size_t valid_utf8_prefix(std::string_view bytes);
inline bool is_valid_utf8(std::string_view bytes) {
  return valid_utf8_prefix(bytes) == bytes.size();
}

// Appends `bytes` to `out`, replacing each maximal invalid subsequence by U+FFFD: the policy of
// Rust's String::from_utf8_lossy and Python's errors="replace", so decoded text matches theirs.
void append_utf8_lossy(std::string& out, std::string_view bytes);
inline std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  append_utf8_lossy(out, bytes);
  return out;
}

// Character classes, as Rust's char methods and the regex crate define them.
bool is_whitespace(char32_t cp);  // White_Space property (char::is_whitespace, regex \s)
bool is_word_char(char32_t cp);   // regex \w: alphabetic, marks, decimal digits, connectors
bool is_numeric(char32_t cp);     // char::is_numeric: general categories Nd, Nl, No

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
std::string normalize_unicode(std::string_view text, NormalForm form);  // text: valid UTF-8
std::string to_lower(std::string_view text);                            // simple case mapping

// GPT-2's reversible byte -> printable character map (byte-level BPE): bytes 33-126, 161-172 and
// 174-255 map to themselves, the other 68 bytes in order to U+0100, U+0101, ...
namespace detail {
struct ByteLevelChars {
  char utf8[256][2];
  uint8_t length[256];
};
constexpr ByteLevelChars make_byte_level_chars() {
  ByteLevelChars t{};
  unsigned next_extra = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    const unsigned cp = printable ? b : next_extra++;
    if (cp < 0x80) {
      t.utf8[b][0] = static_cast<char>(cp);
      t.length[b] = 1;
    } else {
      t.utf8[b][0] = static_cast<char>(0xC0 | (cp >> 6));
      t.utf8[b][1] = static_cast<char>(0x80 | (cp & 0x3F));
      t.length[b] = 2;
    }
  }
  return t;
}
inline constexpr ByteLevelChars kByteLevelChars = make_byte_level_chars();
}  // namespace detail

// The UTF-8 spelling of the byte-level character for `byte`.
inline std::string_view byte_level_char(uint8_t byte) {
  return {detail::kByteLevelChars.utf8[byte], detail::kByteLevelChars.length[byte]};
}
// The byte a byte-level character stands for, or -1 when cp is not one of the 256.
int byte_level_byte(char32_t cp);

}  // namespace strata::text
