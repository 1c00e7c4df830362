// StreamingDetokenizer: decode a sliding window of ids and emit what it adds to the already
// emitted prefix, holding text back while it ends in U+FFFD (an incomplete UTF-8 sequence).
#include "text/tokenizer.h"

namespace strata::text {

namespace {

bool ends_incomplete(const std::string& text) {
  return text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDetokenizer::push(int32_t id) {
  if (skip_special_tokens_ && tokenizer_.is_special(id)) return "";
  ids_.push_back(id);
  const std::span<const int32_t> all(ids_);
  // Both decodes start at prefix_, so decoders that treat the first token specially (a stripped
  // leading space) agree on the shared part.
  const std::string before =
      tokenizer_.decode(all.subspan(prefix_, read_ - prefix_), skip_special_tokens_);
  std::string after = tokenizer_.decode(all.subspan(prefix_), skip_special_tokens_);
  if (after.size() <= before.size() || ends_incomplete(after)) return "";
  std::string delta = after.substr(before.size());
  prefix_ = read_;
  read_ = ids_.size();
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_));
  read_ -= prefix_;
  prefix_ = 0;
  return delta;
}

std::string StreamingDetokenizer::flush() {
  const std::span<const int32_t> all(ids_);
  const std::string before =
      tokenizer_.decode(all.subspan(prefix_, read_ - prefix_), skip_special_tokens_);
  const std::string after = tokenizer_.decode(all.subspan(prefix_), skip_special_tokens_);
  // Keep the last ids as context, so that the stream may go on after a flush.
  prefix_ = read_;
  read_ = ids_.size();
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_));
  read_ -= prefix_;
  prefix_ = 0;
  return after.size() > before.size() ? after.substr(before.size()) : "";
}

}  // namespace strata::text
