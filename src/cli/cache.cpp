// strata cache ls / clear: what the prefix cache's disk tier (runtime/state_store.h) holds under
// the state root, read from the files' headers alone, and removing it. Only the store's own names
// are touched: the `<16 hex digits>/` model directories and the `*.state` and `*.state.tmp` files
// in them, never a link, never anything else.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/human_bytes.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "core/json.h"
#include "runtime/state_format.h"

namespace strata::cli {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSuffix = ".state";
constexpr std::string_view kTemporarySuffix = ".state.tmp";

// One file of a model directory. A temporary (a write in progress, or one a crash cut short) has
// no header to read yet; a file whose header does not parse has `error`.
struct CacheFile {
  fs::path path;
  std::string key;  // the name without its suffix
  bool temporary = false;
  uint64_t bytes = 0;
  fs::file_time_type modified;
  std::string fingerprint;
  std::optional<int64_t> tokens;
  std::string error;
};

struct ModelDir {
  std::string name;  // 16 hex digits: runtime::state_directory's hash
  fs::path path;
  std::vector<CacheFile> files;  // by name
  uint64_t bytes = 0;
  std::string fingerprint;  // the first readable file's; "" when none is
};

bool is_model_dir_name(std::string_view name) {
  return name.size() == 16 && std::ranges::all_of(name, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string iso_utc(fs::file_time_type t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(
      std::chrono::time_point_cast<std::chrono::system_clock::duration>(
          std::chrono::file_clock::to_sys(t)));
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char out[32];
  std::strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

// The header of `file` (StateReader checks magic, version and the fingerprint's length); a file
// cannot hold more tokens than a quarter of its bytes, which bounds what a corrupt count allocates.
void read_header(CacheFile& file) {
  try {
    std::ifstream in(file.path, std::ios::binary);
    check(in.is_open(), ErrorKind::kIo, "cannot open it");
    runtime::StateReader reader([&](uint8_t* dst, size_t n) {
      in.read(reinterpret_cast<char*>(dst), static_cast<std::streamsize>(n));
      check(static_cast<size_t>(in.gcount()) == n, ErrorKind::kInvalidInput,
            "the file is truncated");
    });
    runtime::StateHeader header = reader.header(static_cast<int64_t>(file.bytes / sizeof(int32_t)));
    file.fingerprint = std::move(header.fingerprint);
    file.tokens = static_cast<int64_t>(header.tokens.size());
  } catch (const std::exception& e) {
    file.error = e.what();
  }
}

// The model directories under `root` (only `only` when not empty), by name, with their state
// files; `with_headers`: each file's header read too. A root that does not exist holds none.
std::vector<ModelDir> scan(const fs::path& root, const std::string& only, bool with_headers) {
  std::vector<ModelDir> dirs;
  std::error_code ec;
  const fs::file_status root_status = fs::status(root, ec);
  if (!fs::exists(root_status)) return dirs;
  check(fs::is_directory(root_status), ErrorKind::kInvalidInput,
        "the state directory {} is not a directory", root.string());
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_model_dir_name(name) || (!only.empty() && name != only)) continue;
    std::error_code entry_ec;
    if (entry.is_symlink(entry_ec) || !entry.is_directory(entry_ec)) continue;
    dirs.push_back({name, entry.path(), {}, 0, {}});
  }
  check(!ec, ErrorKind::kIo, "cannot list the state directory {}: {}", root.string(), ec.message());
  std::ranges::sort(dirs, {}, &ModelDir::name);
  for (ModelDir& dir : dirs) {
    for (const fs::directory_entry& entry : fs::directory_iterator(dir.path, ec)) {
      const std::string name = entry.path().filename().string();
      CacheFile file;
      file.path = entry.path();
      if (name.ends_with(kTemporarySuffix)) {
        file.temporary = true;
        file.key = name.substr(0, name.size() - kTemporarySuffix.size());
      } else if (name.ends_with(kSuffix)) {
        file.key = name.substr(0, name.size() - kSuffix.size());
      } else {
        continue;  // not the store's
      }
      std::error_code entry_ec;
      if (entry.is_symlink(entry_ec) || !entry.is_regular_file(entry_ec)) continue;
      file.bytes = entry.file_size(entry_ec);
      if (!entry_ec) file.modified = entry.last_write_time(entry_ec);
      if (entry_ec == std::errc::no_such_file_or_directory)
        continue;  // a running server removed it
      check(!entry_ec, ErrorKind::kIo, "cannot read {}: {}", file.path.string(),
            entry_ec.message());
      dir.files.push_back(std::move(file));
    }
    check(!ec, ErrorKind::kIo, "cannot list {}: {}", dir.path.string(), ec.message());
    std::ranges::sort(dir.files, {}, &CacheFile::path);
    for (CacheFile& file : dir.files) {
      dir.bytes += file.bytes;
      if (!with_headers || file.temporary) continue;
      read_header(file);
      if (dir.fingerprint.empty() && file.error.empty()) dir.fingerprint = file.fingerprint;
    }
  }
  return dirs;
}

std::string status(const CacheFile& file, const ModelDir& dir) {
  if (file.temporary) return "temporary";
  if (!file.error.empty()) return "unreadable";
  return file.fingerprint == dir.fingerprint ? "ok" : "foreign";
}

// Why a file is not an ordinary entry, for the text listing.
std::string note(const CacheFile& file, const ModelDir& dir) {
  const std::string s = status(file, dir);
  if (s == "temporary") return "temporary: a write in progress, or one that never finished";
  if (s == "unreadable") return "unreadable: " + file.error;
  if (s == "foreign") return "another model's: " + file.fingerprint;
  return "";
}

uint64_t total_bytes(const std::vector<ModelDir>& dirs) {
  uint64_t total = 0;
  for (const ModelDir& d : dirs) total += d.bytes;
  return total;
}

size_t total_files(const std::vector<ModelDir>& dirs) {
  size_t total = 0;
  for (const ModelDir& d : dirs) total += d.files.size();
  return total;
}

Json ls_json(const fs::path& root, bool exists, const std::vector<ModelDir>& dirs) {
  Json models = Json::array();
  for (const ModelDir& d : dirs) {
    Json files = Json::array();
    for (const CacheFile& f : d.files) {
      Json j = {{"key", f.key},
                {"file", f.path.filename().string()},
                {"status", status(f, d)},
                {"bytes", f.bytes},
                {"modified", iso_utc(f.modified)}};
      if (f.tokens) j["tokens"] = *f.tokens;
      if (!f.error.empty()) j["error"] = f.error;
      if (status(f, d) == "foreign") j["fingerprint"] = f.fingerprint;
      files.push_back(std::move(j));
    }
    models.push_back({{"dir", d.name},
                      {"path", d.path.string()},
                      {"fingerprint", d.fingerprint.empty() ? Json() : Json(d.fingerprint)},
                      {"entries", d.files.size()},
                      {"bytes", d.bytes},
                      {"files", std::move(files)}});
  }
  return {{"root", root.string()},
          {"exists", exists},
          {"entries", total_files(dirs)},
          {"bytes", total_bytes(dirs)},
          {"models", std::move(models)}};
}

void print_ls(const fs::path& root, const std::vector<ModelDir>& dirs) {
  const size_t files = total_files(dirs);
  fmt::print("{}: {} model director{}, {} entr{}, {}\n", root.string(), dirs.size(),
             dirs.size() == 1 ? "y" : "ies", files, files == 1 ? "y" : "ies",
             human_bytes(total_bytes(dirs)));
  for (const ModelDir& d : dirs) {
    fmt::print("\n{}  model {}  {} entr{}, {}\n", d.name,
               d.fingerprint.empty() ? "unknown" : d.fingerprint, d.files.size(),
               d.files.size() == 1 ? "y" : "ies", human_bytes(d.bytes));
    if (d.files.empty()) continue;
    fmt::print("  {:<16}  {:>8}  {:>10}  {}\n", "key", "tokens", "bytes", "modified (UTC)");
    for (const CacheFile& f : d.files) {
      const std::string tokens = f.tokens ? std::to_string(*f.tokens) : "-";
      const std::string line = fmt::format("  {:<16}  {:>8}  {:>10}  {:<20}  {}", f.key, tokens,
                                           human_bytes(f.bytes), iso_utc(f.modified), note(f, d));
      fmt::print("{}\n", line.substr(0, line.find_last_not_of(' ') + 1));
    }
  }
}

// Asks on the terminal; true for "y" or "yes".
bool confirm(const std::string& question) {
  std::fputs((question + " [y/N] ").c_str(), stderr);
  std::fflush(stderr);
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes";
}

}  // namespace

int run_cache_ls(const CacheArgs& args) {
  const fs::path root = fs::absolute(state_root(args.settings));
  std::error_code ec;
  const bool exists = fs::exists(root, ec);
  const std::vector<ModelDir> dirs = scan(root, "", /*with_headers=*/true);
  if (args.json) {
    std::cout << ls_json(root, exists, dirs).dump(2) << "\n";
  } else if (!exists) {
    fmt::print("{}: the cache is empty (the directory does not exist)\n", root.string());
  } else {
    print_ls(root, dirs);
  }
  return 0;
}

int run_cache_clear(const CacheArgs& args) {
  std::string only = args.model_dir;
  std::ranges::transform(only, only.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  check(only.empty() || is_model_dir_name(only), ErrorKind::kInvalidInput,
        "--model-dir '{}' is not a model directory's name: 16 hex digits, as cache ls shows",
        args.model_dir);
  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  check(args.yes || interactive, ErrorKind::kInvalidInput,
        "cache clear removes files: pass --yes to confirm (stdin is not a terminal to ask on)");
  const fs::path root = fs::absolute(state_root(args.settings));
  const std::vector<ModelDir> dirs = scan(root, only, /*with_headers=*/false);
  check(only.empty() || !dirs.empty(), ErrorKind::kNotFound,
        "{} has no model directory {} (see strata cache ls)", root.string(), only);
  if (dirs.empty()) {
    fmt::print("{}: the cache is empty, nothing to remove\n", root.string());
    return 0;
  }
  const size_t files = total_files(dirs);
  if (!args.yes &&
      !confirm(fmt::format("Remove {} state file{} ({}) in {} model director{} under {}?", files,
                           files == 1 ? "" : "s", human_bytes(total_bytes(dirs)), dirs.size(),
                           dirs.size() == 1 ? "y" : "ies", root.string()))) {
    fmt::print("Nothing removed.\n");
    return 1;
  }

  size_t removed = 0, removed_dirs = 0, failed = 0;
  uint64_t removed_bytes = 0;
  std::string first_failure;
  for (const ModelDir& d : dirs) {
    size_t n = 0;
    uint64_t bytes = 0;
    for (const CacheFile& f : d.files) {
      std::error_code ec;
      if (fs::remove(f.path, ec)) {
        ++n;
        bytes += f.bytes;
      } else if (ec) {
        if (failed++ == 0) first_failure = fmt::format("{}: {}", f.path.string(), ec.message());
      }
    }
    std::error_code ec;
    const bool emptied = fs::is_empty(d.path, ec) && fs::remove(d.path, ec);
    fmt::print("{}  {} file{}, {}{}\n", d.name, n, n == 1 ? "" : "s", human_bytes(bytes),
               emptied ? "; directory removed" : "; directory kept (it holds other files)");
    removed += n;
    removed_bytes += bytes;
    removed_dirs += emptied ? 1 : 0;
  }
  fmt::print("Removed {} file{} ({}) and {} model director{} from {}\n", removed,
             removed == 1 ? "" : "s", human_bytes(removed_bytes), removed_dirs,
             removed_dirs == 1 ? "y" : "ies", root.string());
  check(failed == 0, ErrorKind::kIo, "could not remove {} file{}: {}", failed,
        failed == 1 ? "" : "s", first_failure);
  return 0;
}

}  // namespace strata::cli
