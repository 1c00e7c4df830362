// Which files of a repository make the model strata loads: a safetensors checkpoint with its
// sidecars (config, generation config, tokenizer, tokenizer config, chat template, special tokens
// map; the index and every shard it names, or the single weights file), or the one GGUF file that a
// quant tag (":Q4_K_M") or a file name picks.
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "hub/reference.h"

namespace strata::hub {

enum class WeightsFormat { kSafetensors, kGguf };

struct Selection {
  WeightsFormat format = WeightsFormat::kSafetensors;
  std::vector<std::string> files;  // to fetch (the shards an index names come after it)
  std::string index;               // the safetensors index among `files`; "" when none
  std::string gguf;                // kGguf: the file the model loads from
};

// The files of `ref` among `files` (the repository's, or a snapshot's). Errors: kNotFound when no
// weights strata loads are there or nothing matches the selector (listing the GGUF files there
// are), kInvalidInput when a selector matches several files (listing them), kUnsupported for a
// GGUF split into parts.
Selection select_files(const std::vector<std::string>& files, const RepoRef& ref);

// The shards a safetensors index's weight_map names, sorted, each checked to
// be among `files` and to be a plain path in the repository (kNotFound / kInvalidInput otherwise).
std::vector<std::string> index_shards(const Json& index, const std::vector<std::string>& files,
                                      const RepoRef& ref, const std::string& index_path);

}  // namespace strata::hub
