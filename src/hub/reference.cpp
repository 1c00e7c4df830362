// Parsing model references: the hub's repo-id rules, then revision and selector.
#include "hub/reference.h"

#include <algorithm>
#include <filesystem>

namespace strata::hub {

namespace {

constexpr size_t kMaxNameLength = 96;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// One part of a repo id, as the hub allows it.
bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  if (!std::ranges::all_of(name, name_char)) return false;
  if (name.front() == '-' || name.front() == '.' || name.back() == '-' || name.back() == '.')
    return false;
  return name.find("--") == std::string_view::npos && name.find("..") == std::string_view::npos;
}

// A revision: a branch or tag name (which may hold '/', as refs/pr/1 does) or a commit hash.
bool valid_revision(std::string_view revision) {
  if (revision.empty() || revision.size() > 255) return false;
  if (revision.front() == '/' || revision.back() == '/') return false;
  if (revision.find("..") != std::string_view::npos) return false;
  return std::ranges::none_of(revision, [](char c) {
    return c <= ' ' || c == '~' || c == '^' || c == ':' || c == '?' || c == '*' || c == '[' ||
           c == '\\' || c == '@' || c == 0x7f;
  });
}

// A file path in the repository, or a quant tag: no empty, "." or ".." segment, no leading '/'.
bool valid_selector(std::string_view selector) {
  if (selector.empty() || selector.size() > 1024) return false;
  if (std::ranges::any_of(selector, [](char c) { return c < ' ' || c == '\\'; })) return false;
  size_t start = 0;
  while (start <= selector.size()) {
    const size_t end = std::min(selector.find('/', start), selector.size());
    const std::string_view part = selector.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

std::string RepoRef::to_string() const {
  std::string s = repo;
  if (revision != "main") s += "@" + revision;
  if (!selector.empty()) s += ":" + selector;
  return s;
}

std::optional<RepoRef> parse_repo_ref(std::string_view text) {
  for (std::string_view prefix :
       {"https://huggingface.co/", "https://hf.co/", "huggingface.co/", "hf.co/"}) {
    if (text.starts_with(prefix)) {
      text.remove_prefix(prefix.size());
      break;
    }
  }
  RepoRef ref;
  const size_t name_end = std::min(text.find_first_of("@:"), text.size());
  const std::string_view id = text.substr(0, name_end);
  const size_t slash = id.find('/');
  if (slash == std::string_view::npos || !valid_name(id.substr(0, slash)) ||
      !valid_name(id.substr(slash + 1)))
    return std::nullopt;
  ref.repo = std::string(id);
  std::string_view rest = text.substr(name_end);
  if (rest.starts_with('@')) {
    const size_t end = std::min(rest.find(':'), rest.size());
    const std::string_view revision = rest.substr(1, end - 1);
    if (!valid_revision(revision)) return std::nullopt;
    ref.revision = std::string(revision);
    rest.remove_prefix(end);
  }
  if (rest.starts_with(':')) {
    const std::string_view selector = rest.substr(1);
    if (!valid_selector(selector)) return std::nullopt;
    ref.selector = std::string(selector);
    rest = {};
  }
  if (!rest.empty()) return std::nullopt;
  return ref;
}

Reference parse_reference(std::string_view text) {
  Reference r;
  r.path = std::string(text);
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(r.path), ec)) return r;
  if (auto repo = parse_repo_ref(text)) {
    r.kind = Reference::Kind::kRepo;
    r.repo = std::move(*repo);
  }
  return r;
}

std::string repo_folder_name(std::string_view repo) {
  std::string name = "models--";
  for (char c : repo) {
    if (c == '/') {
      name += "--";
    } else {
      name += c;
    }
  }
  return name;
}

bool is_commit_hash(std::string_view revision) {
  return revision.size() == 40 && std::ranges::all_of(revision, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace strata::hub
