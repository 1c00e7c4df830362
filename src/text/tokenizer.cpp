// The encode and decode pipelines over a TokenizerParts, and the id <-> piece tables.
#include "text/tokenizer.h"

#include "core/error.h"
#include "text/tokenizer_parts.h"
#include "text/unicode.h"

namespace strata::text {

namespace {

constexpr uint8_t kExists = 1;
constexpr uint8_t kSpecial = 2;

}  // namespace

Tokenizer::Tokenizer(TokenizerParts&& parts) : parts_(new TokenizerParts(std::move(parts))) {
  TokenizerParts& p = *parts_;
  check(p.model != nullptr, ErrorKind::kInternal, "tokenizer without a model");

  int32_t size = p.model->size();
  for (const AddedToken& t : p.added_tokens) {
    check(t.id >= 0, ErrorKind::kInvalidInput, "tokenizer: added token '{}' has a negative id",
          t.content);
    size = std::max(size, t.id + 1);
  }
  static const std::string kNoPiece;
  p.pieces.assign(size, &kNoPiece);
  p.flags.assign(size, 0);
  const std::vector<std::string>& model_pieces = p.model->pieces();
  for (int32_t id = 0; id < p.model->size(); ++id) {
    p.pieces[id] = &model_pieces[id];
    if (!model_pieces[id].empty()) p.flags[id] = kExists;
  }

  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const AddedToken& t : p.added_tokens) {
    if (t.content.empty()) continue;  // Hugging Face ignores empty added tokens
    p.pieces[t.id] = &t.content;
    p.flags[t.id] = kExists | (t.special ? kSpecial : 0);
    p.added_ids[t.content] = t.id;
    if (t.normalized && p.normalizer) {
      std::string pattern = t.content;
      p.normalizer->normalize(pattern);
      normalized.push_back(t);
      normalized_patterns.push_back(std::move(pattern));
    } else {
      raw.push_back(t);
      raw_patterns.push_back(t.content);
    }
  }
  p.raw_matcher = AddedTokenMatcher(std::move(raw), raw_patterns);
  p.normalized_matcher = AddedTokenMatcher(std::move(normalized), normalized_patterns);

  if (p.bos_id && p.post_processor) {
    std::vector<int32_t> ids;
    p.post_processor->process(ids);
    p.adds_bos = !ids.empty() && ids.front() == *p.bos_id;
  }
}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const TokenizerParts& p = *parts_;
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }

  Pieces pieces;
  {
    Piece whole;
    whole.text.assign(text);
    whole.at_start = true;
    if (p.raw_matcher.empty()) {
      pieces.push_back(std::move(whole));
    } else {
      p.raw_matcher.split(whole, pieces);
    }
  }
  if (p.normalizer || !p.normalized_matcher.empty()) {
    Pieces normalized;
    normalized.reserve(pieces.size());
    for (Piece& piece : pieces) {
      if (piece.token < 0 && p.normalizer) p.normalizer->normalize(piece.text);
      if (piece.token < 0 && !p.normalized_matcher.empty()) {
        p.normalized_matcher.split(piece, normalized);
      } else {
        normalized.push_back(std::move(piece));
      }
    }
    pieces = std::move(normalized);
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  auto to_model = [&](std::string_view word, bool) { p.model->tokenize(word, ids); };
  for (const Piece& piece : pieces) {
    if (piece.token >= 0) {
      ids.push_back(piece.token);
    } else if (p.pre_tokenizer) {
      p.pre_tokenizer->pre_tokenize(piece.text, piece.at_start, to_model);
    } else {
      p.model->tokenize(piece.text, ids);
    }
  }
  if (add_special_tokens && p.post_processor) p.post_processor->process(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const TokenizerParts& p = *parts_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(p.flags.size())) continue;
    const uint8_t f = p.flags[id];
    if (!(f & kExists) || (skip_special_tokens && (f & kSpecial))) continue;
    tokens.push_back(*p.pieces[id]);
  }
  std::string text;
  if (p.decoder) {
    p.decoder->decode_chain(tokens);
    for (const std::string& t : tokens) text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text.push_back(' ');
      text += tokens[i];
    }
  }
  if (!is_valid_utf8(text)) text = utf8_lossy(text);
  return text;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(parts_->pieces.size()); }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (auto it = parts_->added_ids.find(token); it != parts_->added_ids.end()) return it->second;
  return parts_->model->token_id(token);
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    fail(ErrorKind::kInvalidInput, "token id {} is out of range (vocabulary of {})", id,
         vocab_size());
  }
  return *parts_->pieces[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && (parts_->flags[id] & kSpecial);
}

bool Tokenizer::has_token(int32_t id) const {
  return id >= 0 && id < vocab_size() && (parts_->flags[id] & kExists);
}

std::optional<int32_t> Tokenizer::bos_id() const { return parts_->bos_id; }
std::vector<int32_t> Tokenizer::eos_ids() const { return parts_->eos_ids; }
bool Tokenizer::adds_bos() const { return parts_->adds_bos; }
const std::string& Tokenizer::chat_template() const { return parts_->chat_template; }

}  // namespace strata::text
