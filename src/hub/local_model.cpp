// Model summaries from config.json and GGUF metadata.
#include "hub/local_model.h"

#include <algorithm>
#include <cctype>

#include "core/json.h"
#include "formats/gguf.h"

namespace strata::hub {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::ranges::transform(s, s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool is_gguf_file(const fs::path& p) {
  const std::string name = lower(p.filename().string());
  return name.ends_with(".gguf") && name.find("mmproj") == std::string::npos;
}

uint64_t size_of(const fs::path& p) {
  std::error_code ec;
  const uint64_t n = fs::file_size(p, ec);  // follows a link to its blob
  return ec ? 0 : n;
}

ModelSummary describe_gguf(const fs::path& file) {
  ModelSummary s{file, "GGUF", "-", size_of(file)};
  try {
    const formats::GgufFile gguf(file.string());
    const Json& arch = gguf.metadata().contains("general.architecture")
                           ? gguf.metadata()["general.architecture"]
                           : Json();
    if (arch.is_string()) s.family = arch.get<std::string>();
  } catch (const std::exception&) {  // not a GGUF file we can read: its family stays unknown
  }
  return s;
}

// The checkpoint's format and family from its config.json.
void read_config(const fs::path& config, ModelSummary& s) {
  try {
    const Json c = read_json_file(config.string());
    if (c.contains("model_type") && c["model_type"].is_string()) {
      s.family = c["model_type"].get<std::string>();
    } else if (c.contains("architectures") && c["architectures"].is_array() &&
               !c["architectures"].empty() && c["architectures"][0].is_string()) {
      s.family = c["architectures"][0].get<std::string>();
    }
    // MLX writes "quantization": {"group_size", "bits"}; transformers "quantization_config" with a
    // quant_method.
    const Json& mlx = c.contains("quantization") ? c["quantization"] : Json();
    const Json& hf = c.contains("quantization_config") ? c["quantization_config"] : Json();
    if (mlx.is_object() && mlx.contains("bits") && mlx["bits"].is_number_integer()) {
      s.format = fmt::format("MLX {}-bit", mlx["bits"].get<int>());
    } else if (hf.is_object() && hf.contains("quant_method") && hf["quant_method"].is_string()) {
      s.format = fmt::format("safetensors ({})", hf["quant_method"].get<std::string>());
    }
  } catch (const std::exception&) {  // an unreadable config: what the folder holds still shows
  }
}

}  // namespace

bool is_model_path(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return is_gguf_file(path);
  if (!fs::is_directory(path, ec)) return false;
  if (fs::exists(path / "config.json", ec)) return true;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
    if (is_gguf_file(e.path()) && e.is_regular_file(ec)) return true;
  return false;
}

std::vector<ModelSummary> describe_models(const fs::path& path, bool recurse) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {describe_gguf(path)};
  std::vector<fs::path> ggufs;
  ModelSummary checkpoint{path, "-", "-", 0};
  bool safetensors = false;
  auto visit = [&](const fs::directory_entry& e) {
    std::error_code entry_ec;
    if (!e.is_regular_file(entry_ec)) return;
    if (is_gguf_file(e.path())) {
      ggufs.push_back(e.path());
      return;
    }
    if (lower(e.path().filename().string()).find("mmproj") == std::string::npos)
      checkpoint.bytes += size_of(e.path());
    if (e.path().extension() == ".safetensors") safetensors = true;
  };
  if (recurse) {
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(path, ec)) visit(e);
  } else {
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) visit(e);
  }
  std::ranges::sort(ggufs);
  std::vector<ModelSummary> out;
  if (safetensors && fs::exists(path / "config.json", ec)) {
    checkpoint.format = "safetensors";
    read_config(path / "config.json", checkpoint);
    out.push_back(checkpoint);
  }
  for (const fs::path& g : ggufs) out.push_back(describe_gguf(g));
  if (out.empty()) out.push_back(checkpoint);  // no weights: listed, so that it can be removed
  return out;
}

}  // namespace strata::hub
