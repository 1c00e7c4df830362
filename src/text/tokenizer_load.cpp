// Tokenizer::load: finds the tokenizer files a path names (model directory, tokenizer.json,
// or .gguf) and hands their contents to the matching builder.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json.h"
#include "formats/gguf.h"
#include "text/tokenizer.h"

namespace strata::text {

namespace {

namespace fs = std::filesystem;

bool has_gguf_magic(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

Json read_optional_json(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return nullptr;
  return read_json_file(path.string());
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) fail(ErrorKind::kNotFound, "tokenizer: '{}' does not exist", path);
  fs::path json_path;
  if (fs::is_directory(p, ec)) {
    json_path = p / "tokenizer.json";
    if (!fs::is_regular_file(json_path, ec)) {
      if (fs::is_regular_file(p / "tokenizer.model", ec)) {
        fail(ErrorKind::kUnsupported,
             "tokenizer: '{}' has only a SentencePiece tokenizer.model; strata needs "
             "tokenizer.json (or a GGUF file)",
             path);
      }
      fail(ErrorKind::kNotFound, "tokenizer: no tokenizer.json in '{}'", path);
    }
  } else if (p.extension() == ".gguf" || has_gguf_magic(p)) {
    const formats::GgufFile gguf(path);
    return from_gguf_metadata(gguf.metadata());
  } else {
    json_path = p;
  }
  const fs::path dir = json_path.parent_path();
  const Json tokenizer_json = read_json_file(json_path.string());
  const Json config = read_optional_json(dir / "tokenizer_config.json");
  const Json generation = read_optional_json(dir / "generation_config.json");
  try {
    return from_json(tokenizer_json, config, generation);
  } catch (const Error& e) {
    throw Error(e.kind(), json_path.string() + ": " + e.what());
  }
}

}  // namespace strata::text
