// How the hub layer reaches the Hugging Face hub and where its cache lives. The CLI builds these
// from the environment (HF_ENDPOINT, HF_TOKEN, HF_HOME / HF_HUB_CACHE, HF_HUB_OFFLINE: the
// variables huggingface_hub reads); nothing in the hub layer reads the environment itself.
#pragma once

#include <filesystem>
#include <string>

#include "core/settings.h"

namespace strata::hub {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // no trailing '/'
  std::string token;                                // sent as "Authorization: Bearer" when set
  std::filesystem::path cache_dir;                  // the hub cache: models--org--name/ folders
  bool offline = false;                             // only the cache; no request is made
  int parallel_downloads = 4;                       // files downloaded at once
  // Retries of a request answered 429, 408 or 5xx, or cut off: waits of backoff_initial_s doubling
  // up to backoff_max_s (a Retry-After is honoured, within backoff_max_s).
  int max_retries = 5;
  double backoff_initial_s = 1.0;
  double backoff_max_s = 30.0;
  double connect_timeout_s = 15.0;
  double stall_timeout_s = 60.0;  // a transfer that receives nothing for this long is retried
  std::string user_agent = "strata";
};

// The options huggingface_hub would use in `environment` (a variable map, cli: environment_map):
// HF_ENDPOINT; HF_TOKEN, else the token file (HF_TOKEN_PATH, else $HF_HOME/token) that `hf auth
// login` writes; HF_HUB_CACHE (or the older HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub, HF_HOME
// defaulting to $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface; HF_HUB_OFFLINE (1, true, yes,
// on). A bad value is a kInvalidInput error naming the variable.
HubOptions options_from_environment(const SettingMap& environment);

}  // namespace strata::hub
