// The HF cache layout on disk: paths, refs, snapshot symlinks, listing and removal.
#include "hub/cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "hub/reference.h"

namespace strata::hub {

namespace fs = std::filesystem;

namespace {

// A name no other writer picks: this process, this thread, a counter.
std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return fmt::format(".tmp.{}.{}.{}", ::getpid(),
                     std::hash<std::thread::id>{}(std::this_thread::get_id()) % 1000000,
                     counter.fetch_add(1));
}

// "org/name" from "models--org--name"; "" for any other name.
std::string repo_from_folder(const std::string& folder) {
  if (!folder.starts_with("models--")) return "";
  const std::string rest = folder.substr(8);
  const size_t sep = rest.find("--");
  if (sep == std::string::npos) return "";
  return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
}

}  // namespace

RepoCache::RepoCache(fs::path cache_dir, const std::string& repo)
    : cache_dir_(std::move(cache_dir)), folder_(cache_dir_ / repo_folder_name(repo)) {}

fs::path RepoCache::blob(const std::string& etag) const { return folder_ / "blobs" / etag; }

fs::path RepoCache::incomplete(const std::string& etag) const {
  return folder_ / "blobs" / (etag + ".incomplete");
}

fs::path RepoCache::lock(const std::string& etag) const {
  return cache_dir_ / ".locks" / folder_.filename() / (etag + ".lock");
}

fs::path RepoCache::snapshot(const std::string& commit) const {
  return folder_ / "snapshots" / commit;
}

fs::path RepoCache::pointer(const std::string& commit, const std::string& file) const {
  return snapshot(commit) / fs::path(file);
}

std::optional<std::string> RepoCache::read_ref(const std::string& revision) const {
  std::ifstream in(folder_ / "refs" / fs::path(revision));
  if (!in) return std::nullopt;
  std::string commit;
  std::getline(in, commit);
  while (!commit.empty() && (commit.back() == '\r' || commit.back() == ' ')) commit.pop_back();
  if (!is_commit_hash(commit)) return std::nullopt;
  return commit;
}

void RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  const fs::path ref = folder_ / "refs" / fs::path(revision);
  fs::create_directories(ref.parent_path());
  const fs::path tmp = ref.string() + unique_suffix();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;  // no newline, as huggingface_hub writes it
    out.close();
    check(static_cast<bool>(out), ErrorKind::kIo, "cannot write {}", tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, ref, ec);
  if (ec) {
    fs::remove(tmp);
    fail(ErrorKind::kIo, "cannot write {}: {}", ref.string(), ec.message());
  }
}

bool RepoCache::has_file(const std::string& commit, const std::string& file) const {
  std::error_code ec;
  return fs::is_regular_file(pointer(commit, file), ec);  // follows the link to its blob
}

void RepoCache::link(const std::string& commit, const std::string& file,
                     const std::string& etag) const {
  const fs::path dst = pointer(commit, file);
  fs::create_directories(dst.parent_path());
  // Up from the file's folder to the repository folder: its folders in the repo, the commit,
  // snapshots/.
  std::string target;
  for (size_t i = 0, ups = 2 + static_cast<size_t>(std::ranges::count(file, '/')); i < ups; ++i)
    target += "../";
  target += "blobs/" + etag;
  const fs::path tmp = dst.string() + unique_suffix();
  std::error_code ec;
  fs::create_symlink(target, tmp, ec);
  if (!ec) fs::rename(tmp, dst, ec);
  if (ec) {
    fs::remove(tmp);
    fail(ErrorKind::kIo, "cannot link {} to {}: {}", dst.string(), target, ec.message());
  }
}

std::vector<CachedRepo> scan_cache(const fs::path& cache_dir) {
  std::vector<CachedRepo> repos;
  std::error_code ec;
  if (!fs::is_directory(cache_dir, ec)) return repos;
  for (const fs::directory_entry& entry : fs::directory_iterator(cache_dir, ec)) {
    const std::string repo = repo_from_folder(entry.path().filename().string());
    if (repo.empty() || !entry.is_directory(ec)) continue;
    CachedRepo r{repo, entry.path(), {}};
    const fs::path snapshots = entry.path() / "snapshots";
    if (fs::is_directory(snapshots, ec)) {
      for (const fs::directory_entry& s : fs::directory_iterator(snapshots, ec))
        if (s.is_directory(ec)) r.snapshots.push_back({s.path().filename().string(), {}, s.path()});
    }
    std::ranges::sort(r.snapshots, {}, &CachedSnapshot::commit);
    const fs::path refs = entry.path() / "refs";
    if (fs::is_directory(refs, ec)) {
      for (const fs::directory_entry& ref : fs::recursive_directory_iterator(refs, ec)) {
        if (!ref.is_regular_file(ec)) continue;
        const std::string revision = ref.path().lexically_relative(refs).generic_string();
        const auto commit = RepoCache(cache_dir, repo).read_ref(revision);
        for (CachedSnapshot& s : r.snapshots)
          if (commit && s.commit == *commit) s.refs.push_back(revision);
      }
    }
    for (CachedSnapshot& s : r.snapshots) std::ranges::sort(s.refs);
    repos.push_back(std::move(r));
  }
  check(!ec, ErrorKind::kIo, "cannot list the hub cache {}: {}", cache_dir.string(), ec.message());
  std::ranges::sort(repos, {}, &CachedRepo::repo);
  return repos;
}

std::vector<std::string> snapshot_files(const fs::path& snapshot) {
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::is_directory(snapshot, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(snapshot, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code entry_ec;
    // Files and links to files; a link whose blob is missing is no file.
    if (!it->is_regular_file(entry_ec)) continue;
    files.push_back(it->path().lexically_relative(snapshot).generic_string());
  }
  std::ranges::sort(files);
  return files;
}

uint64_t remove_repo(const fs::path& cache_dir, const std::string& repo) {
  const RepoCache cache(cache_dir, repo);
  std::error_code ec;
  check(fs::is_directory(cache.folder(), ec), ErrorKind::kNotFound,
        "{} is not in the hub cache ({} does not exist); strata ls lists what it holds", repo,
        cache.folder().string());
  uint64_t bytes = 0;
  const fs::path blobs = cache.folder() / "blobs";
  if (fs::is_directory(blobs, ec))
    for (const fs::directory_entry& b : fs::directory_iterator(blobs, ec))
      if (b.is_regular_file(ec)) bytes += b.file_size(ec);
  fs::remove_all(cache.folder(), ec);
  check(!ec, ErrorKind::kIo, "cannot remove {}: {}", cache.folder().string(), ec.message());
  fs::remove_all(cache_dir / ".locks" / cache.folder().filename(), ec);
  return bytes;
}

}  // namespace strata::hub
