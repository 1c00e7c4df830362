// Shared by the commands that load a model: the settings in effect (core/settings.h) turned into
// load and engine options, and the model to load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/settings.h"
#include "hub/options.h"
#include "model/weights.h"
#include "runtime/engine.h"

namespace strata::cli {

// The settings' device, kv_cache_type, cuda_graphs and moe_fold_shared, and --quantize ("", "none",
// "q4" or "q8").
model::LoadOptions load_options(const Settings& settings, const std::string& quantize);

// A context of `context_size` tokens and the settings' run_ahead (off: never; on: on a GPU).
runtime::EngineOptions engine_options(const Settings& settings, int64_t context_size);

// The root of the prefix cache's disk tier: the state_dir setting, else $STRATA_DATA_DIR/state,
// else $XDG_DATA_HOME/strata/state, else ~/.local/share/strata/state.
std::filesystem::path state_root(const Settings& settings);

// The context of generate, info and chat: the ctx_size setting, else 4096.
int64_t context_size(const Settings& settings);

// The hub's options (hub/options.h) from this process's environment: HF_ENDPOINT, HF_TOKEN, HF_HOME,
// HF_HUB_CACHE, HF_HUB_OFFLINE.
hub::HubOptions hub_options();

// A model reference (hub/reference.h) as the path to load: a local path as given; a hub repository
// (org/name[@revision][:file-or-quant]) from the hub cache, downloaded first when the cache lacks it
// (a progress bar on a terminal; offline, only the cache).
std::string resolve_model(const std::string& ref);

// The model to load: the model setting (--model, $STRATA_MODEL) resolved by resolve_model, else the
// built-in strata-demo
// (models/strata-demo next to the binary's parent folder, i.e. the repository, or in the source
// tree this binary was built from). Errors when none exists.
std::string model_path(const Settings& settings, const char* argv0);

}  // namespace strata::cli
