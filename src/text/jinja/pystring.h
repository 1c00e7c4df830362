// Python str semantics over UTF-8 std::strings: code-point indexing and slicing, Unicode
// whitespace, case mapping and character classes, and the split/strip/replace/find family.
// Invalid UTF-8 bytes decode to U+DC80..U+DCFF and encode back unchanged (like surrogateescape).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text::jinja::py {

std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
bool is_ascii(std::string_view s);
size_t length(std::string_view s);  // in code points

bool is_space(char32_t c);
bool is_printable(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_alnum(char32_t c);
bool is_word(char32_t c);  // regex \w: alphanumeric or underscore
bool is_cased_upper(char32_t c);
bool is_cased_lower(char32_t c);
bool is_cased(char32_t c);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);
std::string title(std::string_view s);  // Python str.title()
std::string swapcase(std::string_view s);

// Character-class predicates over a whole string, as str.isdigit() etc.: false when empty.
bool all_of(std::string_view s, bool (*pred)(char32_t));
bool is_lower(std::string_view s);  // str.islower()
bool is_upper(std::string_view s);
bool is_title(std::string_view s);

// str.strip([chars]) and friends: chars unset strips Unicode whitespace.
std::string strip(std::string_view s, std::optional<std::string_view> chars, bool left, bool right);
// str.split(sep, maxsplit) / str.rsplit: sep unset splits on whitespace runs.
std::vector<std::string> split(std::string_view s, std::optional<std::string_view> sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, std::optional<std::string_view> sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);

// Normalizes Python slice indices for a sequence of `length` items (as slice.indices()).
struct SliceIndices {
  int64_t start, stop, step, count;
};
SliceIndices slice_indices(int64_t length, std::optional<int64_t> start,
                           std::optional<int64_t> stop, std::optional<int64_t> step);
// Clamps a Python start/end argument (negative counts from the end) to [0, length].
int64_t clamp_index(int64_t index, int64_t length);

// str.find / str.rfind / str.count with code-point start and end; -1 when absent.
int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse);
int64_t count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
              std::optional<int64_t> end);

}  // namespace strata::text::jinja::py
