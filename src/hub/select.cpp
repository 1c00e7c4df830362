// Picking a repository's files: sidecars by name, safetensors by index, GGUF by quant tag.
#include "hub/select.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <string_view>

namespace strata::hub {

namespace {

constexpr std::array<std::string_view, 7> kSidecars = {"config.json",
                                                       "generation_config.json",
                                                       "tokenizer.json",
                                                       "tokenizer_config.json",
                                                       "chat_template.jinja",
                                                       "chat_template.json",
                                                       "special_tokens_map.json"};
constexpr std::string_view kIndex = "model.safetensors.index.json";

std::string lower(std::string_view s) {
  std::string out(s);
  std::ranges::transform(out, out.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool has(const std::vector<std::string>& files, std::string_view name) {
  return std::ranges::find(files, name) != files.end();
}

bool top_level(std::string_view path) { return path.find('/') == std::string_view::npos; }

bool is_gguf(std::string_view path) { return lower(path).ends_with(".gguf"); }

// Vision projectors ship beside GGUF models (mmproj-*.gguf); they are never the model.
bool is_projector(std::string_view path) { return lower(path).find("mmproj") != std::string::npos; }

bool separator(char c) { return c == '-' || c == '.' || c == '/'; }

// `tag` (lower case) in `path` (lower case) between separators ('-', '.', '/', or either end), as a
// quant tag sits in "model-Q4_K_M.gguf" or "Q4_K_M/model-00001-of-00002.gguf".
bool bounded_match(const std::string& path, const std::string& tag) {
  for (size_t at = path.find(tag); at != std::string::npos; at = path.find(tag, at + 1)) {
    const size_t end = at + tag.size();
    if ((at == 0 || separator(path[at - 1])) && (end == path.size() || separator(path[end])))
      return true;
  }
  return false;
}

// "-00001-of-00003.gguf": a part of a split GGUF.
bool is_split_part(std::string_view path) {
  const std::string p = lower(path);
  const size_t of = p.rfind("-of-");
  return of != std::string::npos && of >= 6 && p[of - 6] == '-' &&
         std::all_of(p.begin() + static_cast<long>(of) - 5, p.begin() + static_cast<long>(of),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

std::vector<std::string> ggufs_of(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const std::string& f : files)
    if (is_gguf(f) && !is_projector(f)) out.push_back(f);
  return out;
}

Selection gguf_selection(const std::string& file) {
  Selection s;
  s.format = WeightsFormat::kGguf;
  s.files = {file};
  s.gguf = file;
  return s;
}

// The GGUF file `ref.selector` names: the file itself, else the files its quant tag matches.
Selection pick_gguf(const std::vector<std::string>& files, const RepoRef& ref) {
  if (has(files, ref.selector)) {
    check(is_gguf(ref.selector), ErrorKind::kInvalidInput,
          "{}: ':{}' names a file that is not a GGUF model; after ':' give a GGUF file or a "
          "quant tag such as Q4_K_M (or nothing, for the safetensors checkpoint)",
          ref.to_string(), ref.selector);
    return gguf_selection(ref.selector);
  }
  const std::vector<std::string> ggufs = ggufs_of(files);
  const std::string tag = lower(ref.selector);
  std::vector<std::string> matches;
  for (const std::string& f : ggufs)
    if (bounded_match(lower(f), tag)) matches.push_back(f);
  if (matches.empty())
    for (const std::string& f : ggufs)
      if (lower(f).find(tag) != std::string::npos) matches.push_back(f);
  check(!matches.empty(), ErrorKind::kNotFound,
        "no GGUF file of {} matches '{}'; its GGUF files: {}", ref.repo, ref.selector, list(ggufs));
  if (matches.size() > 1) {
    check(!std::ranges::all_of(matches, is_split_part), ErrorKind::kUnsupported,
          "'{}' picks a GGUF model of {} split into {} files ({}), which strata cannot load yet",
          ref.selector, ref.repo, matches.size(), list(matches));
    fail(ErrorKind::kInvalidInput, "'{}' matches {} GGUF files of {}: {}; name one, e.g. {}:{}",
         ref.selector, matches.size(), ref.repo, list(matches), ref.repo, matches.front());
  }
  check(!is_split_part(matches.front()), ErrorKind::kUnsupported,
        "{} of {} is one part of a split GGUF model, which strata cannot load yet", matches.front(),
        ref.repo);
  return gguf_selection(matches.front());
}

}  // namespace

Selection select_files(const std::vector<std::string>& files, const RepoRef& ref) {
  if (!ref.selector.empty()) return pick_gguf(files, ref);

  std::vector<std::string> weights;
  std::string index;
  if (has(files, kIndex)) {
    index = kIndex;
  } else if (has(files, "model.safetensors")) {
    weights = {"model.safetensors"};
  } else {
    for (const std::string& f : files)
      if (top_level(f) && f.ends_with(".safetensors")) weights.push_back(f);
  }
  if (!index.empty() || !weights.empty()) {
    check(has(files, "config.json"), ErrorKind::kNotFound,
          "{} has safetensors weights but no config.json, which strata needs to load them",
          ref.to_string());
    Selection s;
    for (std::string_view sidecar : kSidecars)
      if (has(files, sidecar)) s.files.emplace_back(sidecar);
    if (!index.empty()) s.files.push_back(index);
    s.files.insert(s.files.end(), weights.begin(), weights.end());
    s.index = index;
    return s;
  }

  const std::vector<std::string> ggufs = ggufs_of(files);
  check(!ggufs.empty(), ErrorKind::kNotFound,
        "{} holds no weights strata loads (no safetensors checkpoint, no GGUF file)",
        ref.to_string());
  if (ggufs.size() == 1) {
    check(!is_split_part(ggufs.front()), ErrorKind::kUnsupported,
          "{} of {} is one part of a split GGUF model, which strata cannot load yet", ggufs.front(),
          ref.repo);
    return gguf_selection(ggufs.front());
  }
  fail(ErrorKind::kInvalidInput,
       "{} has {} GGUF files: pick one with {}:QUANT (a quant tag such as Q4_K_M) or {}:FILE; its "
       "GGUF files: {}",
       ref.to_string(), ggufs.size(), ref.repo, ref.repo, list(ggufs));
}

std::vector<std::string> index_shards(const Json& index, const std::vector<std::string>& files,
                                      const RepoRef& ref, const std::string& index_path) {
  check(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
        ErrorKind::kInvalidInput, "{} of {} has no weight_map object", index_path, ref.repo);
  std::vector<std::string> shards;
  std::set<std::string> seen;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    check(shard.is_string(), ErrorKind::kInvalidInput,
          "{} of {}: the shard of tensor '{}' is not a string", index_path, ref.repo, tensor);
    const std::string name = shard.get<std::string>();
    if (!seen.insert(name).second) continue;
    check(!name.empty() && !name.starts_with('/') && name.find("..") == std::string::npos,
          ErrorKind::kInvalidInput, "{} of {} names the shard '{}', which is not a file in it",
          index_path, ref.repo, name);
    check(has(files, name), ErrorKind::kNotFound, "{} of {} names the shard {}, which it lacks",
          index_path, ref.repo, name);
    shards.push_back(name);
  }
  check(!shards.empty(), ErrorKind::kInvalidInput, "{} of {} names no shard", index_path, ref.repo);
  std::ranges::sort(shards);
  return shards;
}

}  // namespace strata::hub
