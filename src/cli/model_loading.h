// Shared by the commands that load a model: --quantize and --device parsing, load options, the
// default model.
#pragma once

#include <string>

#include "model/weights.h"

namespace strata::cli {

// quantize: "", "q4", "q8"; device: "cpu", "cuda" or "auto"; kv_cache_type: "auto", "f32" or
// "bf16".
model::LoadOptions load_options(const std::string& quantize, const std::string& device,
                                const std::string& kv_cache_type);

// The model to use when no --model is given: $STRATA_MODEL, else the built-in strata-demo
// (models/strata-demo next to the binary's parent folder, i.e. the repository, or in the source
// tree this binary was built from). Errors when none exists.
std::string default_model_path(const char* argv0);

}  // namespace strata::cli
