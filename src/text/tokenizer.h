// Tokenizer: text <-> token ids for every model the engine serves, loaded from a Hugging Face
// tokenizer.json (with tokenizer_config.json) or a GGUF vocabulary, and StreamingDetokenizer,
// which turns a stream of generated ids into text without ever cutting a UTF-8 sequence.
// Encoding follows Hugging Face `tokenizers`: added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor; decoding runs the file's decoder. Both are const and safe to call from many
// threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace strata::text {

struct TokenizerParts;

class Tokenizer {
 public:
  // path: a model directory (tokenizer.json, plus tokenizer_config.json and
  // generation_config.json when present), a tokenizer.json file (its folder's config files are
  // read too), or a .gguf file. Throws strata::Error: kNotFound for a missing file,
  // kInvalidInput for a malformed one, kUnsupported for a tokenizer type strata lacks.
  static std::unique_ptr<Tokenizer> load(const std::string& path);
  // From a GGUF file's metadata (tokenizer.ggml.*), for callers that already opened the file.
  static std::unique_ptr<Tokenizer> from_gguf_metadata(const Json& metadata);
  // From a parsed tokenizer.json and optional tokenizer_config.json / generation_config.json
  // contents (null when absent).
  static std::unique_ptr<Tokenizer> from_json(const Json& tokenizer_json,
                                              const Json& tokenizer_config = nullptr,
                                              const Json& generation_config = nullptr);

  explicit Tokenizer(TokenizerParts&& parts);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special_tokens: apply the post-processor (BOS etc.). Special tokens written in `text`
  // (e.g. "<|im_start|>") are always recognised, as Hugging Face does. Invalid UTF-8 in `text`
  // is read as U+FFFD.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Ids that name no token are skipped; the result is always valid UTF-8.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;  // one past the largest id, added tokens included
  std::optional<int32_t> token_id(std::string_view token) const;  // exact piece or added token
  std::string id_to_piece(int32_t id) const;  // the raw piece; throws kInvalidInput out of range
  bool is_special(int32_t id) const;
  bool has_token(int32_t id) const;  // whether the id names a token (vocabularies may have holes)

  std::optional<int32_t> bos_id() const;
  std::vector<int32_t> eos_ids() const;      // every id that ends generation
  bool adds_bos() const;                     // encode(.., true) starts with bos_id()
  const std::string& chat_template() const;  // empty when the files carry none

 private:
  std::unique_ptr<TokenizerParts> parts_;
};

// Incremental decoding for streaming: push one id at a time and get the text it completes. Text
// is held back while it would end in an incomplete UTF-8 sequence (a multi-byte character split
// across tokens, or <0xNN> byte tokens still arriving); flush() returns whatever is left (an
// incomplete tail as U+FFFD) and the stream may go on. The concatenation of all pieces equals
// decode() of all ids. The Tokenizer must outlive it; one instance per sequence.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;  // a window: ids_[0, read_) were emitted, ids_[read_, ..) are not
  size_t prefix_ = 0;         // decoding starts here, so that context-dependent decoders agree
  size_t read_ = 0;
};

}  // namespace strata::text
