// The settings as load and engine options; --quantize q4|q8 → MLX affine quantization on
// load, group size 64 (MLX's default); the default model.
#include "cli/model_loading.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "backend/memory.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "hub/pull.h"
#include "hub/reference.h"
#include "runtime/speculative.h"

namespace strata::cli {

model::LoadOptions load_options(const Settings& settings, const std::string& quantize) {
  model::LoadOptions options;
  options.device = backend::parse_device(settings.device);
  options.kv_cache = model::parse_kv_cache_type(settings.kv_cache_type);
  options.cuda_graphs = settings.cuda_graphs;
  options.moe_fold_shared = settings.moe_fold_shared;
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

runtime::EngineOptions engine_options(const Settings& settings, int64_t context_size) {
  runtime::EngineOptions options;
  options.context_size = context_size;
  options.run_ahead = settings.run_ahead ? runtime::EngineOptions::RunAhead::kAuto
                                         : runtime::EngineOptions::RunAhead::kOff;
  options.step_tokens = settings.step_tokens;
  options.prefill_chunk = settings.prefill_chunk;
  options.prefix_cache = settings.prefix_cache;
  options.prefix_cache_host_bytes = static_cast<size_t>(settings.prefix_cache_host_mib) << 20;
  options.prefix_cache_disk_bytes = static_cast<uint64_t>(settings.prefix_cache_disk_mib) << 20;
  options.prefix_cache_compress = settings.prefix_cache_compress;
  options.speculative = {runtime::parse_speculative_method(settings.speculative), settings.draft_max};
  options.self_draft_layers = settings.self_draft_layers;
  options.speculative_adaptive = settings.speculative_adaptive;
  if (!settings.draft_model.empty())  // loaded as the model is, without quantizing on load
    options.draft_model =
        model::load_model(resolve_model(settings.draft_model), load_options(settings, "none"));
  if (options.prefix_cache_disk_bytes > 0) options.state_dir = state_root(settings);
  return options;
}

std::filesystem::path state_root(const Settings& settings) {
  namespace fs = std::filesystem;
  if (!settings.state_dir.empty()) return settings.state_dir;
  if (const char* d = std::getenv("STRATA_DATA_DIR"); d != nullptr && *d != '\0') return fs::path(d) / "state";
  if (const char* d = std::getenv("XDG_DATA_HOME"); d != nullptr && *d != '\0')
    return fs::path(d) / "strata" / "state";
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr && *home != '\0' ? home : ".") / ".local" / "share" / "strata" / "state";
}

int64_t context_size(const Settings& settings) {
  return settings.ctx_size > 0 ? settings.ctx_size : 4096;
}

hub::HubOptions hub_options() { return hub::options_from_environment(environment_map(environ)); }

std::string resolve_model(const std::string& ref) {
  const hub::Reference reference = hub::parse_reference(ref);
  if (reference.kind == hub::Reference::Kind::kLocal) return reference.path;
  try {
    ProgressBar bar(/*lines=*/false);
    return hub::resolve(reference, hub_options(), bar.callback()).string();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound) throw;
    throw Error(e.kind(), fmt::format("{} (and no local file or directory '{}' exists)", e.what(), ref));
  }
}

std::string model_path(const Settings& settings, const char* argv0) {
  namespace fs = std::filesystem;
  if (!settings.model.empty()) return resolve_model(settings.model);
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "models" / "strata-demo");
    candidates.push_back(exe.parent_path() / "models" / "strata-demo");
  } else if (argv0 != nullptr) {
    candidates.push_back(fs::absolute(argv0).parent_path().parent_path() / "models" /
                         "strata-demo");
  }
  candidates.push_back(fs::path(STRATA_SOURCE_DIR) / "models" / "strata-demo");
  for (const fs::path& c : candidates)
    if (fs::exists(c / "config.json")) return c.string();
  fail(ErrorKind::kNotFound,
       "no --model given and the built-in model was not found (looked in {}); pass --model PATH",
       candidates.front().string());
}

}  // namespace strata::cli
