// Finding a model's chat template and special tokens: an explicit file, the Hugging Face files of
// a model directory (chat_template.jinja, chat_template.json, tokenizer_config.json), GGUF
// metadata, or the ChatML fallback.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "core/json_limits.h"
#include "core/mmap.h"
#include "formats/gguf.h"
#include "text/chat/chat_template.h"

namespace strata::text::chat {

namespace {

namespace fs = std::filesystem;

// A template found in a file: the default text plus any other named ones.
struct Found {
  std::string source;
  std::map<std::string, std::string> named;
};

OrderedJson read_ordered_json(const std::string& path) {
  return parse_limited_json_or_throw(read_file(path), path, kModelFileJsonLimits);
}

// "chat_template" of tokenizer_config.json or chat_template.json: a string, or HF's list of
// {"name", "template"} whose "default" entry is the main one. nullopt when absent.
std::optional<Found> template_field(const OrderedJson& config, const std::string& path) {
  check(config.is_object(), ErrorKind::kInvalidInput, "{}: expected a JSON object", path);
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return Found{it->get<std::string>(), {}};
  check(it->is_array(), ErrorKind::kInvalidInput,
        "{}: chat_template must be a string or a list of named templates", path);
  Found found;
  bool has_default = false;
  for (const OrderedJson& entry : *it) {
    check(entry.is_object() && entry.contains("name") && entry["name"].is_string() &&
              entry.contains("template") && entry["template"].is_string(),
          ErrorKind::kInvalidInput, "{}: each named chat template needs a 'name' and a 'template'",
          path);
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") {
      found.source = entry["template"].get<std::string>();
      has_default = true;
    } else {
      found.named[name] = entry["template"].get<std::string>();
    }
  }
  check(has_default, ErrorKind::kInvalidInput, "{}: no chat template named 'default'", path);
  return found;
}

// The special-token strings of tokenizer_config.json: "bos_token": "<s>" or {"content": "<s>"}.
SpecialTokens config_tokens(const OrderedJson& config) {
  SpecialTokens tokens;
  if (!config.is_object()) return tokens;
  for (const char* name : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
                           "cls_token", "mask_token"}) {
    auto it = config.find(name);
    if (it == config.end()) continue;
    if (it->is_string()) {
      tokens[name] = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      tokens[name] = (*it)["content"].get<std::string>();
    }
  }
  return tokens;
}

// From GGUF metadata: tokenizer.chat_template (+ tokenizer.chat_template.<name>), and BOS/EOS
// strings looked up in tokenizer.ggml.tokens.
std::optional<Found> gguf_template(const formats::GgufFile& gguf, SpecialTokens& tokens) {
  const Json& meta = gguf.metadata();
  auto token_text = [&](const char* id_key) -> std::optional<std::string> {
    auto id = meta.find(id_key);
    auto list = meta.find("tokenizer.ggml.tokens");
    if (id == meta.end() || !id->is_number_integer() || list == meta.end() || !list->is_array()) {
      return std::nullopt;
    }
    const int64_t i = id->get<int64_t>();
    if (i < 0 || i >= static_cast<int64_t>(list->size()) || !(*list)[i].is_string()) {
      return std::nullopt;
    }
    return (*list)[i].get<std::string>();
  };
  if (auto bos = token_text("tokenizer.ggml.bos_token_id")) tokens["bos_token"] = *bos;
  if (auto eos = token_text("tokenizer.ggml.eos_token_id")) tokens["eos_token"] = *eos;

  auto main = meta.find("tokenizer.chat_template");
  if (main == meta.end() || !main->is_string()) return std::nullopt;
  Found found{main->get<std::string>(), {}};
  const std::string prefix = "tokenizer.chat_template.";
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    if (it.key().starts_with(prefix) && it->is_string()) {
      found.named[it.key().substr(prefix.size())] = it->get<std::string>();
    }
  }
  return found;
}

std::optional<std::string> first_gguf_in(const fs::path& dir) {
  std::vector<std::string> ggufs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".gguf") {
      ggufs.push_back(entry.path().string());
    }
  }
  if (ggufs.empty()) return std::nullopt;
  std::sort(ggufs.begin(), ggufs.end());
  return ggufs.front();
}

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// Special tokens of a model path (directory or .gguf file), for an explicit template file.
SpecialTokens model_tokens(const fs::path& model) {
  SpecialTokens tokens;
  std::error_code ec;
  if (fs::is_directory(model, ec)) {
    if (is_file(model / "tokenizer_config.json")) {
      return config_tokens(read_ordered_json((model / "tokenizer_config.json").string()));
    }
  } else if (model.extension() == ".gguf" && is_file(model)) {
    gguf_template(formats::GgufFile(model.string()), tokens);
  }
  return tokens;
}

}  // namespace

ChatTemplate ChatTemplate::from_file(const std::string& path, SpecialTokens tokens,
                                     const jinja::Options& options) {
  check(is_file(path), ErrorKind::kNotFound, "chat template file '{}' does not exist", path);
  if (fs::path(path).extension() == ".json") {
    const std::optional<Found> found = template_field(read_ordered_json(path), path);
    check(found.has_value(), ErrorKind::kInvalidInput, "{}: no 'chat_template' field", path);
    return from_source(found->source, std::move(tokens), path, found->named, options);
  }
  return from_source(read_file(path), std::move(tokens), path, {}, options);
}

ChatTemplate ChatTemplate::load(const std::string& model_path, const std::string& template_file,
                                const jinja::Options& options) {
  const fs::path model(model_path);
  std::error_code ec;
  check(fs::exists(model, ec), ErrorKind::kNotFound, "model '{}' does not exist", model_path);
  if (!template_file.empty()) return from_file(template_file, model_tokens(model), options);

  if (!fs::is_directory(model, ec)) {
    check(model.extension() == ".gguf", ErrorKind::kInvalidInput,
          "{}: expected a model directory or a .gguf file", model_path);
    SpecialTokens tokens;
    const formats::GgufFile gguf(model_path);
    if (std::optional<Found> found = gguf_template(gguf, tokens)) {
      return from_source(found->source, std::move(tokens), "gguf:" + model_path, found->named,
                         options);
    }
    return fallback(std::move(tokens), options);
  }

  const fs::path config_path = model / "tokenizer_config.json";
  const OrderedJson config =
      is_file(config_path) ? read_ordered_json(config_path.string()) : OrderedJson();
  SpecialTokens tokens = config_tokens(config);
  if (const fs::path jinja = model / "chat_template.jinja"; is_file(jinja)) {
    return from_source(read_file(jinja.string()), std::move(tokens), jinja.string(), {}, options);
  }
  if (const fs::path json = model / "chat_template.json"; is_file(json)) {
    const std::optional<Found> found =
        template_field(read_ordered_json(json.string()), json.string());
    check(found.has_value(), ErrorKind::kInvalidInput, "{}: no 'chat_template' field",
          json.string());
    return from_source(found->source, std::move(tokens), json.string(), found->named, options);
  }
  if (!config.is_null()) {
    if (std::optional<Found> found = template_field(config, config_path.string())) {
      return from_source(found->source, std::move(tokens), config_path.string(), found->named,
                         options);
    }
  }
  if (std::optional<std::string> gguf_path = first_gguf_in(model)) {
    SpecialTokens gguf_tokens;
    const formats::GgufFile gguf(*gguf_path);
    if (std::optional<Found> found = gguf_template(gguf, gguf_tokens)) {
      if (tokens.empty()) tokens = std::move(gguf_tokens);
      return from_source(found->source, std::move(tokens), "gguf:" + *gguf_path, found->named,
                         options);
    }
  }
  return fallback(std::move(tokens), options);
}

}  // namespace strata::text::chat
