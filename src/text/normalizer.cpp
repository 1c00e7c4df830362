// The normalizer components and their construction from tokenizer.json.
#include "text/normalizer.h"

#include <utf8proc.h>

#include "core/error.h"
#include "text/json_spec.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace strata::text {

namespace {

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = normalize_unicode(text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = to_lower(text); }
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!is_whitespace(next_code_point(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t at = end - 1;
        while (at > begin && (static_cast<uint8_t>(text[at]) & 0xC0) == 0x80) --at;
        size_t probe = at;
        if (!is_whitespace(next_code_point(text, probe))) break;
        end = at;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Drops nonspacing marks (general category Mn), as Hugging Face's StripAccents does.
class StripAccentsNormalizer : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t start = pos;
      const char32_t cp = next_code_point(text, pos);
      if (cp >= 0x300 &&
          utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_MN) {
        continue;
      }
      out.append(text, start, pos - start);
    }
    text = std::move(out);
  }
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::string content)
      : literal_(std::move(literal)), content_(std::move(content)) {
    if (literal_.empty())
      fail(ErrorKind::kInvalidInput, "tokenizer: Replace with an empty pattern");
  }
  ReplaceNormalizer(std::unique_ptr<Regex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}

  void normalize(std::string& text) const override {
    if (regex_) {
      std::vector<ByteRange> matches;
      regex_->find_all(text, matches);
      if (matches.empty()) return;
      std::string out;
      size_t prev = 0;
      for (const auto& [begin, end] : matches) {
        out.append(text, prev, begin - prev);
        out += content_;
        prev = end;
      }
      out.append(text, prev, std::string::npos);
      text = std::move(out);
      return;
    }
    size_t at = text.find(literal_);
    if (at == std::string::npos) return;
    std::string out;
    out.reserve(text.size() + content_.size());
    size_t prev = 0;
    for (; at != std::string::npos; at = text.find(literal_, prev)) {
      out.append(text, prev, at - prev);
      out += content_;
      prev = at + literal_.size();
    }
    out.append(text, prev, std::string::npos);
    text = std::move(out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& part : parts_) part->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_prepend_normalizer(std::string prefix) {
  return std::make_unique<PrependNormalizer>(std::move(prefix));
}

std::unique_ptr<Normalizer> make_replace_normalizer(std::string pattern, std::string content) {
  return std::make_unique<ReplaceNormalizer>(std::move(pattern), std::move(content));
}

std::unique_ptr<Normalizer> make_nfc_normalizer() {
  return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
}

std::unique_ptr<Normalizer> make_sequence_normalizer(
    std::vector<std::unique_ptr<Normalizer>> normalizers) {
  return std::make_unique<SequenceNormalizer>(std::move(normalizers));
}

std::unique_ptr<Normalizer> make_normalizer(const Json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec_type(spec, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(spec_bool_or(spec, "strip_left", true),
                                             spec_bool_or(spec, "strip_right", true));
  }
  if (type == "Prepend") return make_prepend_normalizer(spec_string(spec, "prepend"));
  if (type == "Replace") {
    const PatternSpec pattern = spec_pattern(spec, "pattern");
    std::string content = spec_string(spec, "content");
    if (pattern.is_regex) {
      return std::make_unique<ReplaceNormalizer>(std::make_unique<Regex>(pattern.text),
                                                 std::move(content));
    }
    return make_replace_normalizer(pattern.text, std::move(content));
  }
  if (type == "Sequence") {
    const Json& list = spec_field(spec, "normalizers");
    if (!list.is_array()) {
      fail(ErrorKind::kInvalidInput, "tokenizer: Sequence.normalizers must be an array");
    }
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const Json& item : list) {
      if (auto n = make_normalizer(item)) parts.push_back(std::move(n));
    }
    return make_sequence_normalizer(std::move(parts));
  }
  fail(ErrorKind::kUnsupported, "tokenizer: normalizer type '{}' is not supported", type);
}

}  // namespace strata::text
