// HubOptions from huggingface_hub's environment variables.
#include "hub/options.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace strata::hub {

namespace {

namespace fs = std::filesystem;

std::string get(const SettingMap& env, std::string_view name) {
  const auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

std::string lower(std::string s) {
  std::ranges::transform(s, s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

bool truthy(const SettingMap& env, std::string_view name) {
  const std::string v = lower(trim(get(env, name)));
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
  check(v == "1" || v == "true" || v == "yes" || v == "on", ErrorKind::kInvalidInput,
        "{}='{}' is not a boolean: use 1 or 0", name, get(env, name));
  return true;
}

fs::path hf_home(const SettingMap& env) {
  if (const std::string home = get(env, "HF_HOME"); !home.empty()) return home;
  if (const std::string xdg = get(env, "XDG_CACHE_HOME"); !xdg.empty())
    return fs::path(xdg) / "huggingface";
  const std::string home = get(env, "HOME");
  return fs::path(home.empty() ? "." : home) / ".cache" / "huggingface";
}

}  // namespace

HubOptions options_from_environment(const SettingMap& env) {
  HubOptions o;
  if (std::string endpoint = trim(get(env, "HF_ENDPOINT")); !endpoint.empty()) {
    while (endpoint.ends_with('/')) endpoint.pop_back();
    check(endpoint.starts_with("http://") || endpoint.starts_with("https://"),
          ErrorKind::kInvalidInput, "HF_ENDPOINT='{}' is not an http(s) URL", endpoint);
    o.endpoint = endpoint;
  }
  o.token = trim(get(env, "HF_TOKEN"));
  if (o.token.empty()) o.token = trim(get(env, "HUGGING_FACE_HUB_TOKEN"));
  if (o.token.empty()) {
    const std::string path = get(env, "HF_TOKEN_PATH");
    std::ifstream in(path.empty() ? hf_home(env) / "token" : fs::path(path));
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      o.token = trim(text.str());
    }
  }
  if (const std::string cache = get(env, "HF_HUB_CACHE"); !cache.empty()) {
    o.cache_dir = cache;
  } else if (const std::string old = get(env, "HUGGINGFACE_HUB_CACHE"); !old.empty()) {
    o.cache_dir = old;
  } else {
    o.cache_dir = hf_home(env) / "hub";
  }
  o.offline = truthy(env, "HF_HUB_OFFLINE");
  return o;
}

}  // namespace strata::hub
