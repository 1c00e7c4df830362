// --quantize q4|q8 → MLX affine quantization on load, group size 64 (MLX's default); --device;
// --kv-cache-type.
#include "cli/model_loading.h"

#include <cstdlib>
#include <filesystem>

#include "backend/memory.h"
#include "core/error.h"

namespace strata::cli {

model::LoadOptions load_options(const std::string& quantize, const std::string& device,
                                const std::string& kv_cache_type) {
  model::LoadOptions options;
  options.device = backend::parse_device(device);
  options.kv_cache = model::parse_kv_cache_type(kv_cache_type);
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

std::string default_model_path(const char* argv0) {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("STRATA_MODEL"); env != nullptr && *env != '\0') return env;
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "models" / "strata-demo");
    candidates.push_back(exe.parent_path() / "models" / "strata-demo");
  } else if (argv0 != nullptr) {
    candidates.push_back(fs::absolute(argv0).parent_path().parent_path() / "models" / "strata-demo");
  }
  candidates.push_back(fs::path(STRATA_SOURCE_DIR) / "models" / "strata-demo");
  for (const fs::path& c : candidates)
    if (fs::exists(c / "config.json")) return c.string();
  fail(ErrorKind::kNotFound, "no --model given and the built-in model was not found (looked in {}); pass --model PATH",
       candidates.front().string());
}

}  // namespace strata::cli
