// --quantize q4|q8 → MLX affine quantization on load, group size 64 (MLX's default).
#include "cli/model_loading.h"

#include "core/error.h"

namespace strata::cli {

model::LoadOptions load_options(const std::string& quantize) {
  model::LoadOptions options;
  if (quantize.empty() || quantize == "none") return options;
  if (quantize == "q4") {
    options.quantize = formats::QuantParams{4, 64};
  } else if (quantize == "q8") {
    options.quantize = formats::QuantParams{8, 64};
  } else {
    fail(ErrorKind::kInvalidInput, "--quantize must be q4 or q8, got '{}'", quantize);
  }
  return options;
}

}  // namespace strata::cli
