// What a local model is, for `strata ls`: its format, family and size, read from config.json or a
// GGUF file's metadata, without loading weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace strata::hub {

struct ModelSummary {
  std::filesystem::path path;  // a checkpoint directory or a GGUF file
  std::string format;  // "safetensors", "safetensors (fp8)", "MLX 4-bit", "GGUF"; "-": no weights
  std::string family;  // config.json's model_type (else its first architecture), or
                       // GGUF's general.architecture; "-" when unknown
  uint64_t bytes = 0;  // its files (links followed)
};

// The models in `path`: a checkpoint directory (config.json with *.safetensors) and each GGUF file
// there (vision projectors aside), a GGUF file itself; a directory holding neither gives one entry
// of format "-". `recurse`: GGUF files in subfolders count too (a snapshot's "BF16/x.gguf").
std::vector<ModelSummary> describe_models(const std::filesystem::path& path, bool recurse);

// True when `path` is a checkpoint directory (config.json) or holds a GGUF file at its top.
bool is_model_path(const std::filesystem::path& path);

}  // namespace strata::hub
