// The model shapes strata bench builds: config.json objects of real models (MODEL_SPEC.md §1.1 and
// the published configs), without weights: model::make_synthetic_checkpoint fills those in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace strata::cli {

// The shapes run when none is named: qwen3.5-9b, qwen3.5-0.8b, qwen3.5-35b-a3b, qwen3-8b,
// llama-3.1-8b.
const std::vector<std::string>& bench_shape_names();

// The built-in model as a shape: its own config, and where a bench can, its own weights (the
// prefix-cache bench loads the checkpoint itself).
inline constexpr const char* kDemoShape = "strata-demo";

// The config of a named shape (also the tiny ones the tests use: tiny-hybrid, tiny-dense, and
// strata-demo); an invalid_input error listing the names otherwise.
Json bench_shape_config(const std::string& name);

// The same config with only its first `layers` layers (quick checks of the real widths on a small
// machine). The layer pattern is kept: hybrid layer i stays what it was.
Json with_layers(Json config, int64_t layers);

}  // namespace strata::cli
