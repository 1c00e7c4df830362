// The pre-tokenizer components and their construction from tokenizer.json. Each stage passes its
// words straight to the next (Sequence) and finally to the model, so no list of words is built.
#include "text/pre_tokenizer.h"

#include <utf8proc.h>

#include <vector>

#include "core/error.h"
#include "text/json_spec.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace strata::text {

const char* const kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

SplitBehavior parse_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail(ErrorKind::kInvalidInput, "tokenizer: unknown split behavior '{}'", name);
}

// Feeds every occurrence of `literal` in `text` to the splitter.
void add_literal_matches(std::string_view text, std::string_view literal, SpanSplitter& splitter) {
  if (literal.empty()) return;
  for (size_t at = text.find(literal); at != std::string_view::npos;
       at = text.find(literal, at + literal.size())) {
    splitter.add_match(at, at + literal.size());
  }
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(const PatternSpec& pattern, SplitBehavior behavior, bool invert)
      : behavior_(behavior), invert_(invert) {
    if (pattern.is_regex) {
      regex_ = std::make_unique<Regex>(pattern.text);
    } else {
      literal_ = pattern.text;
    }
  }

  void pre_tokenize(std::string_view text, bool at_start, WordSink sink) const override {
    SpanSplitter splitter(text, at_start, behavior_, invert_, sink);
    if (regex_) {
      regex_->for_each_match(text,
                             [&](size_t begin, size_t end) { splitter.add_match(begin, end); });
    } else {
      add_literal_matches(text, literal_, splitter);
    }
    splitter.finish();
  }

 private:
  std::unique_ptr<Regex> regex_;
  std::string literal_;
  SplitBehavior behavior_;
  bool invert_;
};

// Maps every byte to its GPT-2 byte-level character; optionally adds a leading space and splits
// with the GPT-2 regex first.
class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Regex>(kGpt2SplitRegex);
  }

  void pre_tokenize(std::string_view text, bool at_start, WordSink sink) const override {
    std::string prefixed;
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
      prefixed.reserve(text.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(text);
      text = prefixed;
    }
    std::string mapped;
    auto map_word = [&](std::string_view word, bool word_at_start) {
      mapped.clear();
      for (char c : word) mapped += byte_level_char(static_cast<uint8_t>(c));
      if (!mapped.empty()) sink(mapped, word_at_start);
    };
    if (!regex_) {
      map_word(text, at_start);
      return;
    }
    SpanSplitter splitter(text, at_start, SplitBehavior::kIsolated, false, map_word);
    regex_->for_each_match(text, [&](size_t begin, size_t end) { splitter.add_match(begin, end); });
    splitter.finish();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}

  void pre_tokenize(std::string_view text, bool at_start, WordSink sink) const override {
    std::string replaced;
    replaced.reserve(text.size() + replacement_.size() * 2);
    const bool starts =
        text.substr(0, replacement_.size()) == replacement_ || (!text.empty() && text[0] == ' ');
    if (!starts && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && at_start))) {
      replaced += replacement_;
    }
    for (char c : text) {
      if (c == ' ') {
        replaced += replacement_;
      } else {
        replaced.push_back(c);
      }
    }
    if (!split_) {
      if (!replaced.empty()) sink(replaced, at_start);
      return;
    }
    SpanSplitter splitter(replaced, at_start, SplitBehavior::kMergedWithNext, false, sink);
    add_literal_matches(replaced, replacement_, splitter);
    splitter.finish();
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

// Splits at single characters that satisfy a predicate (digits, whitespace, punctuation).
class CharSplitPreTokenizer : public PreTokenizer {
 public:
  using Predicate = bool (*)(char32_t);
  CharSplitPreTokenizer(Predicate pred, SplitBehavior behavior)
      : pred_(pred), behavior_(behavior) {}

  void pre_tokenize(std::string_view text, bool at_start, WordSink sink) const override {
    SpanSplitter splitter(text, at_start, behavior_, false, sink);
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t begin = pos;
      if (pred_(next_code_point(text, pos))) splitter.add_match(begin, pos);
    }
    splitter.finish();
  }

 private:
  Predicate pred_;
  SplitBehavior behavior_;
};

bool is_punctuation(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  }
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

// Whitespace: keeps the runs of \w+ and of [^\w\s]+, drops the rest.
class WhitespacePreTokenizer : public PreTokenizer {
 public:
  WhitespacePreTokenizer() : regex_(R"(\w+|[^\w\s]+)") {}
  void pre_tokenize(std::string_view text, bool at_start, WordSink sink) const override {
    SpanSplitter splitter(text, at_start, SplitBehavior::kRemoved, true, sink);
    regex_.for_each_match(text, [&](size_t begin, size_t end) { splitter.add_match(begin, end); });
    splitter.finish();
  }

 private:
  Regex regex_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void pre_tokenize(std::string_view text, bool at_start, WordSink sink) const override {
    run(0, text, at_start, sink);
  }

 private:
  void run(size_t stage, std::string_view text, bool at_start, WordSink sink) const {
    if (stage == parts_.size()) {
      sink(text, at_start);
      return;
    }
    parts_[stage]->pre_tokenize(text, at_start, [&](std::string_view word, bool word_at_start) {
      run(stage + 1, word, word_at_start, sink);
    });
  }

  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

std::unique_ptr<PreTokenizer> make_metaspace(const Json& spec) {
  std::string replacement = spec_char(spec, "replacement", "\xE2\x96\x81");
  MetaspacePreTokenizer::Prepend prepend = MetaspacePreTokenizer::Prepend::kAlways;
  if (spec.contains("prepend_scheme")) {
    const std::string scheme = spec_string(spec, "prepend_scheme");
    if (scheme == "always") {
      prepend = MetaspacePreTokenizer::Prepend::kAlways;
    } else if (scheme == "first") {
      prepend = MetaspacePreTokenizer::Prepend::kFirst;
    } else if (scheme == "never") {
      prepend = MetaspacePreTokenizer::Prepend::kNever;
    } else {
      fail(ErrorKind::kInvalidInput, "tokenizer: unknown Metaspace prepend_scheme '{}'", scheme);
    }
  } else if (!spec_bool_or(spec, "add_prefix_space", true)) {
    prepend = MetaspacePreTokenizer::Prepend::kNever;
  }
  return std::make_unique<MetaspacePreTokenizer>(std::move(replacement), prepend,
                                                 spec_bool_or(spec, "split", true));
}

}  // namespace

std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(const std::string& split_regex) {
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  parts.push_back(std::make_unique<SplitPreTokenizer>(PatternSpec{true, split_regex},
                                                      SplitBehavior::kIsolated, false));
  parts.push_back(std::make_unique<ByteLevelPreTokenizer>(false, false));
  return std::make_unique<SequencePreTokenizer>(std::move(parts));
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec_type(spec, "pre_tokenizer");
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(spec_pattern(spec, "pattern"),
                                               parse_behavior(spec_string(spec, "behavior")),
                                               spec_bool_or(spec, "invert", false));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(spec_bool_or(spec, "add_prefix_space", true),
                                                   spec_bool_or(spec, "use_regex", true));
  }
  if (type == "Metaspace") return make_metaspace(spec);
  if (type == "Digits") {
    const bool individual = spec_bool_or(spec, "individual_digits", false);
    return std::make_unique<CharSplitPreTokenizer>(
        is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplitPreTokenizer>(is_whitespace, SplitBehavior::kRemoved);
  }
  if (type == "Punctuation") {
    return std::make_unique<CharSplitPreTokenizer>(
        is_punctuation, parse_behavior(spec_string_or(spec, "behavior", "Isolated")));
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(
        std::make_unique<CharSplitPreTokenizer>(is_whitespace, SplitBehavior::kRemoved));
    parts.push_back(
        std::make_unique<CharSplitPreTokenizer>(is_punctuation, SplitBehavior::kIsolated));
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Sequence") {
    const Json& list = spec_field(spec, "pretokenizers");
    if (!list.is_array()) {
      fail(ErrorKind::kInvalidInput, "tokenizer: Sequence.pretokenizers must be an array");
    }
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const Json& item : list) {
      if (auto p = make_pre_tokenizer(item)) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  fail(ErrorKind::kUnsupported, "tokenizer: pre_tokenizer type '{}' is not supported", type);
}

}  // namespace strata::text
