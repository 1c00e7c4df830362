// Shared by the commands that load a model: --quantize parsing and load options.
#pragma once

#include <string>

#include "model/weights.h"

namespace strata::cli {

model::LoadOptions load_options(const std::string& quantize);  // "", "q4", "q8"

}  // namespace strata::cli
