// The vocabulary's byte trie.
#include "text/structured/vocabulary.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace strata::text::structured {

Vocabulary::Vocabulary(std::vector<std::string> bytes, std::vector<bool> excluded)
    : bytes_(std::move(bytes)), excluded_(std::move(excluded)) {
  check(excluded_.size() == bytes_.size(), ErrorKind::kInternal, "vocabulary: sizes differ");
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (!excluded_[id] && !bytes_[id].empty()) order_.push_back(static_cast<int32_t>(id));
  std::sort(order_.begin(), order_.end(),
            [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  // Depth-first: a token's nodes follow its prefix's; `open` holds the path's node indices.
  std::vector<uint32_t> open;
  const std::string* prev = nullptr;
  for (size_t k = 0; k < order_.size(); ++k) {
    const std::string& b = bytes_[order_[k]];
    size_t common = 0;
    if (prev != nullptr)
      while (common < prev->size() && common < b.size() && (*prev)[common] == b[common]) ++common;
    if (prev != nullptr && common == b.size() && common == prev->size()) {  // same bytes
      nodes_[open.back()].tokens_end = static_cast<uint32_t>(k + 1);
      continue;
    }
    while (open.size() > common) {
      nodes_[open.back()].skip = static_cast<uint32_t>(nodes_.size());
      open.pop_back();
    }
    for (size_t d = common; d < b.size(); ++d) {
      open.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(Node{static_cast<uint8_t>(b[d]), static_cast<uint16_t>(d), 0,
                            static_cast<uint32_t>(k), static_cast<uint32_t>(k)});
    }
    nodes_[open.back()].tokens_end = static_cast<uint32_t>(k + 1);
    max_depth_ = std::max(max_depth_, b.size());
    prev = &b;
  }
  while (!open.empty()) {
    nodes_[open.back()].skip = static_cast<uint32_t>(nodes_.size());
    open.pop_back();
  }
  check(max_depth_ < 65535, ErrorKind::kUnsupported, "vocabulary: a token of {} bytes", max_depth_);
}

std::string token_bytes(const Tokenizer& tokenizer, int32_t id, bool byte_level) {
  const std::string piece = tokenizer.id_to_piece(id);
  // Added tokens (and plain ASCII pieces) decode to themselves.
  if (tokenizer.decode(std::span<const int32_t>(&id, 1)) == piece) return piece;
  if (byte_level) {
    std::string out;
    size_t pos = 0;
    while (pos < piece.size()) {
      const int b = byte_level_byte(next_code_point(piece, pos));
      if (b < 0) return tokenizer.decode(std::span<const int32_t>(&id, 1));
      out.push_back(static_cast<char>(b));
    }
    return out;
  }
  if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') {
    const std::string hex = piece.substr(3, 2);
    if (std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(c); }))
      return std::string(1, static_cast<char>(std::stoi(hex, nullptr, 16)));
  }
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {  // ▁
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

std::shared_ptr<const Vocabulary> Vocabulary::from_tokenizer(
    const Tokenizer& tokenizer, const std::vector<std::string>& writable_special) {
  // Byte-level vocabularies (GPT-2, Qwen, Llama 3) spell a space as "Ġ".
  const std::optional<int32_t> space = tokenizer.token_id("\xC4\xA0");
  const bool byte_level =
      space && tokenizer.decode(std::span<const int32_t>(&*space, 1)) == " ";
  const auto n = static_cast<size_t>(tokenizer.vocab_size());
  std::vector<std::string> bytes(n);
  std::vector<bool> excluded(n, false);
  for (size_t id = 0; id < n; ++id) {
    const auto i = static_cast<int32_t>(id);
    if (tokenizer.is_special(i)) {
      const std::string text = tokenizer.id_to_piece(i);
      excluded[id] = std::find(writable_special.begin(), writable_special.end(), text) ==
                     writable_special.end();
      if (!excluded[id]) bytes[id] = text;
      continue;
    }
    if (!tokenizer.has_token(i)) {
      excluded[id] = true;  // an id that names no token
      continue;
    }
    bytes[id] = token_bytes(tokenizer, i, byte_level);
  }
  return std::make_shared<const Vocabulary>(std::move(bytes), std::move(excluded));
}

}  // namespace strata::text::structured
