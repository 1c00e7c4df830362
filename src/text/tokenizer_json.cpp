// Building a Tokenizer from Hugging Face files: tokenizer.json (model, added tokens, pipeline
// stages) and the special-token facts of tokenizer_config.json and generation_config.json.
#include <algorithm>

#include "core/error.h"
#include "text/json_spec.h"
#include "text/tokenizer.h"
#include "text/tokenizer_parts.h"

namespace strata::text {

namespace {

std::vector<std::string> parse_vocab(const Json& vocab) {
  if (!vocab.is_object()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: model.vocab must be an object of piece -> id");
  }
  int64_t max_id = -1;
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (1LL << 30)) {
      fail(ErrorKind::kInvalidInput, "tokenizer: vocabulary entry '{}' has a bad id {}", piece,
           id.dump());
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  std::vector<std::string> pieces(static_cast<size_t>(max_id + 1));
  for (const auto& [piece, id] : vocab.items()) {
    std::string& slot = pieces[id.get<size_t>()];
    if (slot.empty()) slot = piece;
  }
  return pieces;
}

std::vector<std::pair<std::string, std::string>> parse_merges(const Json& merges) {
  if (!merges.is_array())
    fail(ErrorKind::kInvalidInput, "tokenizer: model.merges must be an array");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const Json& m : merges) {
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size() ||
          s.find(' ', space + 1) != std::string::npos) {
        fail(ErrorKind::kInvalidInput, "tokenizer: merge '{}' is not two pieces split by a space",
             s);
      }
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(ErrorKind::kInvalidInput, "tokenizer: merge {} is neither \"a b\" nor [\"a\", \"b\"]",
           m.dump());
    }
  }
  return out;
}

std::unique_ptr<BpeModel> make_model(const Json& model) {
  if (!model.is_object()) fail(ErrorKind::kInvalidInput, "tokenizer: 'model' must be an object");
  const std::string type = spec_string_or(model, "type", "BPE");
  if (type != "BPE") {
    fail(ErrorKind::kUnsupported, "tokenizer: model type '{}' is not supported (only BPE)", type);
  }
  if (auto it = model.find("dropout");
      it != model.end() && it->is_number() && it->get<double>() > 0.0) {
    fail(ErrorKind::kUnsupported, "tokenizer: BPE dropout is not supported");
  }
  BpeOptions options;
  if (auto it = model.find("unk_token"); it != model.end() && !it->is_null()) {
    options.unk_token = spec_string(model, "unk_token");
  }
  options.fuse_unk = spec_bool_or(model, "fuse_unk", false);
  options.byte_fallback = spec_bool_or(model, "byte_fallback", false);
  options.ignore_merges = spec_bool_or(model, "ignore_merges", false);
  options.continuing_subword_prefix = spec_string_or(model, "continuing_subword_prefix", "");
  options.end_of_word_suffix = spec_string_or(model, "end_of_word_suffix", "");
  const Json& merges = model.contains("merges") ? model["merges"] : Json::array();
  return BpeModel::from_merges(parse_vocab(spec_field(model, "vocab")), parse_merges(merges),
                               std::move(options));
}

std::vector<AddedToken> parse_added_tokens(const Json& list) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) fail(ErrorKind::kInvalidInput, "tokenizer: added_tokens must be an array");
  for (const Json& item : list) {
    if (!item.is_object())
      fail(ErrorKind::kInvalidInput, "tokenizer: bad added token {}", item.dump());
    AddedToken t;
    const Json& id = spec_field(item, "id");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (1LL << 30)) {
      fail(ErrorKind::kInvalidInput, "tokenizer: added token has a bad id {}", id.dump());
    }
    t.id = id.get<int32_t>();
    t.content = spec_string(item, "content");
    t.special = spec_bool_or(item, "special", false);
    t.normalized = spec_bool_or(item, "normalized", !t.special);
    t.lstrip = spec_bool_or(item, "lstrip", false);
    t.rstrip = spec_bool_or(item, "rstrip", false);
    t.single_word = spec_bool_or(item, "single_word", false);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

// A token named in tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> config_token(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  fail(ErrorKind::kInvalidInput, "tokenizer_config.json: '{}' must be a string or an object", key);
}

// An id or list of ids (generation_config.json "eos_token_id").
std::vector<int32_t> config_ids(const Json& config, const char* key) {
  std::vector<int32_t> ids;
  if (!config.is_object()) return ids;
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return ids;
  auto add = [&](const Json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      fail(ErrorKind::kInvalidInput, "config: '{}' holds a bad id {}", key, v.dump());
    }
    ids.push_back(v.get<int32_t>());
  };
  if (it->is_array()) {
    for (const Json& v : *it) add(v);
  } else {
    add(*it);
  }
  return ids;
}

std::string config_chat_template(const Json& config) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // [{"name": "default", "template": ...}, ...]
    for (const Json& named : *it) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string()) {
        return named["template"].get<std::string>();
      }
    }
  }
  return "";
}

void add_unique(std::vector<int32_t>& ids, int32_t id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_json(const Json& tokenizer_json,
                                                const Json& tokenizer_config,
                                                const Json& generation_config) {
  if (!tokenizer_json.is_object()) {
    fail(ErrorKind::kInvalidInput, "tokenizer.json must hold a JSON object");
  }
  auto field = [&](const char* key) -> const Json& {
    static const Json kNull;
    auto it = tokenizer_json.find(key);
    return it == tokenizer_json.end() ? kNull : *it;
  };
  TokenizerParts parts;
  parts.model = make_model(spec_field(tokenizer_json, "model"));
  parts.normalizer = make_normalizer(field("normalizer"));
  parts.pre_tokenizer = make_pre_tokenizer(field("pre_tokenizer"));
  parts.decoder = make_decoder(field("decoder"));
  parts.post_processor = make_post_processor(field("post_processor"));
  parts.added_tokens = parse_added_tokens(field("added_tokens"));

  // Special-token facts come from the config files; look names up in the added tokens first.
  auto lookup = [&](const std::string& token) -> std::optional<int32_t> {
    for (const AddedToken& t : parts.added_tokens) {
      if (t.content == token) return t.id;
    }
    return parts.model->token_id(token);
  };
  const Json& config = tokenizer_config.is_object() ? tokenizer_config : Json::object();
  if (!tokenizer_config.is_null() && !tokenizer_config.is_object()) {
    fail(ErrorKind::kInvalidInput, "tokenizer_config.json must hold a JSON object");
  }
  // An explicit "bos_token": null (Qwen) means no BOS, whatever generation_config.json says.
  if (config.contains("bos_token")) {
    if (auto bos = config_token(config, "bos_token")) {
      parts.bos_id = lookup(*bos);
      check(parts.bos_id.has_value(), ErrorKind::kInvalidInput,
            "tokenizer_config.json: bos_token '{}' is not in the vocabulary", *bos);
    }
  } else if (auto ids = config_ids(config, "bos_token_id"); !ids.empty()) {
    parts.bos_id = ids.front();
  } else if (auto gen = config_ids(generation_config, "bos_token_id"); !gen.empty()) {
    parts.bos_id = gen.front();
  }
  if (auto eos = config_token(config, "eos_token")) {
    auto id = lookup(*eos);
    check(id.has_value(), ErrorKind::kInvalidInput,
          "tokenizer_config.json: eos_token '{}' is not in the vocabulary", *eos);
    add_unique(parts.eos_ids, *id);
  }
  for (int32_t id : config_ids(config, "eos_token_id")) add_unique(parts.eos_ids, id);
  for (int32_t id : config_ids(generation_config, "eos_token_id")) add_unique(parts.eos_ids, id);
  parts.chat_template = config_chat_template(config);

  // transformers adds BOS/EOS when the config asks for it even if the post-processor does not
  // (Llama/Gemma tokenizer classes rebuild their post-processor from these flags).
  std::vector<int32_t> probe;
  if (parts.post_processor) parts.post_processor->process(probe);
  std::vector<int32_t> prefix, suffix;
  if (spec_bool_or(config, "add_bos_token", false) && parts.bos_id &&
      (probe.empty() || probe.front() != *parts.bos_id)) {
    prefix.push_back(*parts.bos_id);
  }
  if (spec_bool_or(config, "add_eos_token", false) && !parts.eos_ids.empty() &&
      (probe.empty() || probe.back() != parts.eos_ids.front())) {
    suffix.push_back(parts.eos_ids.front());
  }
  if (!prefix.empty() || !suffix.empty()) {
    parts.post_processor =
        chain_post_processors(std::move(parts.post_processor),
                              make_affix_post_processor(std::move(prefix), std::move(suffix)));
  }
  return std::make_unique<Tokenizer>(std::move(parts));
}

}  // namespace strata::text
