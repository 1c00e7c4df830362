// The decoder components and their construction from tokenizer.json.
#include "text/decoder.h"

#include "core/error.h"
#include "text/json_spec.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace strata::text {

namespace {

// Maps byte-level characters back to bytes; a token with any other character is kept as it is
// (added tokens such as "<|im_end|>" pass through). The bytes are then read as lossy UTF-8.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      const size_t mark = bytes.size();
      size_t pos = 0;
      bool all_mapped = true;
      while (pos < token.size()) {
        const int b = byte_level_byte(next_code_point(token, pos));
        if (b < 0) {
          all_mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!all_mapped) {
        bytes.resize(mark);
        bytes += token;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

// Runs of <0xNN> tokens become the bytes they name: valid UTF-8 as text, otherwise one U+FFFD
// per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& token : tokens) {
      int byte = -1;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
        byte = parse_hex_byte(token[3], token[4]);
      }
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parse_hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& t : tokens) joined += t;
    tokens.assign(1, std::move(joined));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(const PatternSpec& pattern, std::string content) : content_(std::move(content)) {
    if (pattern.is_regex) {
      regex_ = std::make_unique<Regex>(pattern.text);
    } else {
      literal_ = pattern.text;
      if (literal_.empty())
        fail(ErrorKind::kInvalidInput, "tokenizer: Replace with an empty pattern");
    }
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<ByteRange> matches;
    for (std::string& token : tokens) {
      matches.clear();
      if (regex_) {
        regex_->find_all(token, matches);
      } else {
        for (size_t at = token.find(literal_); at != std::string::npos;
             at = token.find(literal_, at + literal_.size())) {
          matches.emplace_back(at, at + literal_.size());
        }
      }
      if (matches.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (const auto& [begin, end] : matches) {
        out.append(token, prev, begin - prev);
        out += content_;
        prev = end;
      }
      out.append(token, prev, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  std::unique_ptr<Regex> regex_;
  std::string literal_;
  std::string content_;
};

// Removes up to `start` leading and `stop` trailing copies of one character from every token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    const size_t n = content_.size();
    for (std::string& token : tokens) {
      size_t begin = 0;
      for (size_t i = 0; i < start_ && token.compare(begin, n, content_) == 0; ++i) begin += n;
      size_t end = token.size();
      for (size_t i = 0; i < stop_ && end >= begin + n && token.compare(end - n, n, content_) == 0;
           ++i) {
        end -= n;
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

// "▁" -> " "; in the first token (unless prepend_scheme is "never") the "▁"s are dropped.
class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      const bool drop = i == 0 && strip_first_;
      std::string out;
      out.reserve(token.size());
      size_t prev = 0;
      for (size_t at = token.find(replacement_); at != std::string::npos;
           at = token.find(replacement_, prev)) {
        out.append(token, prev, at - prev);
        if (!drop) out.push_back(' ');
        prev = at + replacement_.size();
      }
      out.append(token, prev, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

// BPEDecoder: the end-of-word suffix becomes a space (nothing on the last token).
class SuffixDecoder : public Decoder {
 public:
  explicit SuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) return;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const char* replacement = i + 1 == tokens.size() ? "" : " ";
      std::string& token = tokens[i];
      std::string out;
      size_t prev = 0;
      for (size_t at = token.find(suffix_); at != std::string::npos;
           at = token.find(suffix_, prev)) {
        out.append(token, prev, at - prev);
        out += replacement;
        prev = at + suffix_.size();
      }
      out.append(token, prev, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& part : parts_) part->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

size_t spec_count(const Json& spec, const char* key) {
  const int64_t v = spec_int_or(spec, key, 0);
  if (v < 0) fail(ErrorKind::kInvalidInput, "tokenizer: Strip.{} must not be negative", key);
  return static_cast<size_t>(v);
}

}  // namespace

std::unique_ptr<Decoder> make_byte_level_decoder() { return std::make_unique<ByteLevelDecoder>(); }

std::unique_ptr<Decoder> make_sentencepiece_decoder(bool strip_leading_space) {
  std::vector<std::unique_ptr<Decoder>> parts;
  parts.push_back(std::make_unique<ReplaceDecoder>(PatternSpec{false, "\xE2\x96\x81"}, " "));
  parts.push_back(std::make_unique<ByteFallbackDecoder>());
  parts.push_back(std::make_unique<FuseDecoder>());
  if (strip_leading_space) parts.push_back(std::make_unique<StripDecoder>(" ", 1, 0));
  return std::make_unique<SequenceDecoder>(std::move(parts));
}

std::unique_ptr<Decoder> make_decoder(const Json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec_type(spec, "decoder");
  if (type == "ByteLevel") return make_byte_level_decoder();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(spec_pattern(spec, "pattern"),
                                            spec_string(spec, "content"));
  }
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(spec_char(spec, "content", " "),
                                          spec_count(spec, "start"), spec_count(spec, "stop"));
  }
  if (type == "Metaspace") {
    bool strip_first = spec_bool_or(spec, "add_prefix_space", true);
    if (spec.contains("prepend_scheme"))
      strip_first = spec_string(spec, "prepend_scheme") != "never";
    return std::make_unique<MetaspaceDecoder>(spec_char(spec, "replacement", "\xE2\x96\x81"),
                                              strip_first);
  }
  if (type == "BPEDecoder") {
    return std::make_unique<SuffixDecoder>(spec_string_or(spec, "suffix", "</w>"));
  }
  if (type == "Sequence") {
    const Json& list = spec_field(spec, "decoders");
    if (!list.is_array())
      fail(ErrorKind::kInvalidInput, "tokenizer: Sequence.decoders must be an array");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const Json& item : list) {
      if (auto d = make_decoder(item)) parts.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  fail(ErrorKind::kUnsupported, "tokenizer: decoder type '{}' is not supported", type);
}

}  // namespace strata::text
