// Building a Tokenizer from a GGUF vocabulary (tokenizer.ggml.*): "gpt2" is byte-level BPE with
// merges and a split regex chosen by tokenizer.ggml.pre; "llama" is SentencePiece-style BPE that
// merges by token score (llama.cpp's SPM tokenizer) with <0xNN> byte fallback and "▁" for spaces.
#include <algorithm>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/tokenizer_parts.h"

namespace strata::text {

namespace {

// llama.cpp's token types.
enum TokenType : int64_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct PreTokenizerChoice {
  const char* regex;
  bool ignore_merges;
  bool nfc;
};

// The split regexes of the Hugging Face tokenizers these GGUF pre-tokenizer names stand for.
PreTokenizerChoice choose_pre_tokenizer(const std::string& pre) {
  static const char* const kLlama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const char* const kQwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const char* const kQwen35 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "gpt2") {
    return {kGpt2SplitRegex, false, false};
  }
  if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3") return {kLlama3, true, false};
  // Qwen2/Qwen3 tokenizer.json files carry an NFC normalizer; Qwen3.5's reference has none.
  if (pre == "qwen2") return {kQwen2, false, true};
  if (pre == "qwen35") return {kQwen35, false, false};
  fail(ErrorKind::kUnsupported, "GGUF: pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported",
       pre);
}

const Json* find_key(const Json& metadata, const char* key) {
  auto it = metadata.find(key);
  return it == metadata.end() || it->is_null() ? nullptr : &*it;
}

template <typename T>
std::vector<T> array_of(const Json& metadata, const char* key, size_t expected) {
  const Json* v = find_key(metadata, key);
  if (v == nullptr) return {};
  if (!v->is_array()) fail(ErrorKind::kInvalidInput, "GGUF: {} must be an array", key);
  if (expected != 0 && v->size() != expected) {
    fail(ErrorKind::kInvalidInput, "GGUF: {} has {} entries for {} tokens", key, v->size(),
         expected);
  }
  std::vector<T> out;
  out.reserve(v->size());
  for (const Json& item : *v) {
    try {
      out.push_back(item.get<T>());
    } catch (const nlohmann::json::exception&) {
      fail(ErrorKind::kInvalidInput, "GGUF: {} holds a {} entry", key, item.type_name());
    }
  }
  return out;
}

std::optional<int32_t> token_id_key(const Json& metadata, const char* key, size_t n_tokens) {
  const Json* v = find_key(metadata, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) fail(ErrorKind::kInvalidInput, "GGUF: {} must be an integer", key);
  const int64_t id = v->get<int64_t>();
  if (id < 0 || id >= static_cast<int64_t>(n_tokens)) return std::nullopt;  // e.g. 0xFFFFFFFF
  return static_cast<int32_t>(id);
}

bool bool_key(const Json& metadata, const char* key, bool fallback) {
  const Json* v = find_key(metadata, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(ErrorKind::kInvalidInput, "GGUF: {} must be a boolean", key);
  return v->get<bool>();
}

std::vector<std::pair<std::string, std::string>> parse_merges(const std::vector<std::string>& in) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(in.size());
  for (const std::string& s : in) {
    const size_t space = s.find(' ', 1);
    if (space == std::string::npos || space + 1 == s.size()) {
      fail(ErrorKind::kInvalidInput, "GGUF: merge '{}' is not two pieces split by a space", s);
    }
    out.emplace_back(s.substr(0, space), s.substr(space + 1));
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf_metadata(const Json& metadata) {
  if (!metadata.is_object()) fail(ErrorKind::kInvalidInput, "GGUF: metadata must be an object");
  const Json* model_key = find_key(metadata, "tokenizer.ggml.model");
  if (model_key == nullptr || !model_key->is_string()) {
    fail(ErrorKind::kInvalidInput, "GGUF: the file has no tokenizer (tokenizer.ggml.model)");
  }
  const std::string model = model_key->get<std::string>();
  if (model != "gpt2" && model != "llama") {
    fail(ErrorKind::kUnsupported, "GGUF: tokenizer model '{}' is not supported (gpt2, llama)",
         model);
  }
  std::vector<std::string> tokens = array_of<std::string>(metadata, "tokenizer.ggml.tokens", 0);
  if (tokens.empty()) fail(ErrorKind::kInvalidInput, "GGUF: tokenizer.ggml.tokens is missing");
  const size_t n = tokens.size();
  std::vector<int64_t> types = array_of<int64_t>(metadata, "tokenizer.ggml.token_type", n);
  if (types.empty()) types.assign(n, kNormal);

  TokenizerParts parts;
  for (size_t id = 0; id < n; ++id) {
    const int64_t type = types[id];
    if (type != kControl && type != kUserDefined && type != kUnknown) continue;
    AddedToken t;
    t.id = static_cast<int32_t>(id);
    t.content = tokens[id];
    t.special = type != kUserDefined;
    parts.added_tokens.push_back(std::move(t));
  }
  parts.bos_id = token_id_key(metadata, "tokenizer.ggml.bos_token_id", n);
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    auto id = token_id_key(metadata, key, n);
    if (id && std::find(parts.eos_ids.begin(), parts.eos_ids.end(), *id) == parts.eos_ids.end()) {
      parts.eos_ids.push_back(*id);
    }
  }
  if (const Json* t = find_key(metadata, "tokenizer.chat_template"); t && t->is_string()) {
    parts.chat_template = t->get<std::string>();
  }

  bool add_bos_default = false;
  if (model == "gpt2") {
    const Json* pre_key = find_key(metadata, "tokenizer.ggml.pre");
    const PreTokenizerChoice pre =
        choose_pre_tokenizer(pre_key && pre_key->is_string() ? pre_key->get<std::string>() : "");
    const auto merges = array_of<std::string>(metadata, "tokenizer.ggml.merges", 0);
    if (merges.empty()) fail(ErrorKind::kInvalidInput, "GGUF: tokenizer.ggml.merges is missing");
    BpeOptions options;
    options.ignore_merges = pre.ignore_merges;
    parts.model =
        BpeModel::from_merges(std::move(tokens), parse_merges(merges), std::move(options));
    if (pre.nfc) parts.normalizer = make_nfc_normalizer();
    parts.pre_tokenizer = make_byte_level_pre_tokenizer(pre.regex);
    parts.decoder = make_byte_level_decoder();
  } else {
    std::vector<float> scores = array_of<float>(metadata, "tokenizer.ggml.scores", n);
    if (scores.empty()) scores.assign(n, 0.0f);
    std::vector<bool> mergeable(n);
    for (size_t id = 0; id < n; ++id) {
      mergeable[id] = types[id] == kNormal || types[id] == kUserDefined;
    }
    BpeOptions options;
    options.byte_fallback = true;
    if (auto unk = token_id_key(metadata, "tokenizer.ggml.unknown_token_id", n)) {
      options.unk_token = tokens[*unk];
    }
    parts.model =
        BpeModel::from_scores(std::move(tokens), scores, std::move(mergeable), std::move(options));
    // Each text span (between added tokens) gets a leading "▁" and spaces become "▁".
    const bool space_prefix = bool_key(metadata, "tokenizer.ggml.add_space_prefix", true);
    std::vector<std::unique_ptr<Normalizer>> steps;
    if (space_prefix) steps.push_back(make_prepend_normalizer("\xE2\x96\x81"));
    steps.push_back(make_replace_normalizer(" ", "\xE2\x96\x81"));
    parts.normalizer = make_sequence_normalizer(std::move(steps));
    parts.decoder = make_sentencepiece_decoder(space_prefix);
    add_bos_default = true;
  }

  std::vector<int32_t> prefix, suffix;
  if (bool_key(metadata, "tokenizer.ggml.add_bos_token", add_bos_default) && parts.bos_id) {
    prefix.push_back(*parts.bos_id);
  }
  if (bool_key(metadata, "tokenizer.ggml.add_eos_token", false) && !parts.eos_ids.empty()) {
    suffix.push_back(parts.eos_ids.front());
  }
  if (!prefix.empty() || !suffix.empty()) {
    parts.post_processor = make_affix_post_processor(std::move(prefix), std::move(suffix));
  }
  return std::make_unique<Tokenizer>(std::move(parts));
}

}  // namespace strata::text
