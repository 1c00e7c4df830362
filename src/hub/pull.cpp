// pull: the revision's file list, the model's files, their metadata and downloads in parallel,
// each landing in the snapshot as a relative symlink once its blob is whole; the ref last.
#include "hub/pull.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "core/json.h"
#include "core/log.h"
#include "hub/api.h"
#include "hub/cache.h"
#include "hub/download.h"
#include "hub/http.h"

namespace strata::hub {

namespace fs = std::filesystem;

namespace {

// Runs fn(i, client) for i in [0, n) on up to `threads` threads, each with its own HTTP client.
// The first error cancels the rest (through `cancel`) and is rethrown.
void parallel_for(size_t n, int threads, const HubOptions& options, std::atomic<bool>& cancel,
                  const std::function<void(size_t, HttpClient&)>& fn) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    try {
      HttpClient client(options);
      for (size_t i = next++; i < n && !cancel.load(); i = next++) fn(i, client);
    } catch (...) {
      const std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      cancel = true;
    }
  };
  const size_t count = std::min(n, static_cast<size_t>(std::max(1, threads)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < count; ++t) pool.emplace_back(worker);
  if (count > 0) worker();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// The progress of one pull, reported through the callback one call at a time.
class Progress {
 public:
  Progress(const std::string& repo, const ProgressCallback& callback) : callback_(callback) {
    state_.repo = repo;
  }

  void add_files(size_t n) {
    update([&] { state_.files_total += n; }, "", true);
  }
  void add_total(uint64_t bytes) {
    update([&] { state_.bytes_total += bytes; }, "", false);
  }
  void add_bytes(const std::string& file, int64_t n) {
    update(
        [&] {
          state_.bytes_done = static_cast<uint64_t>(static_cast<int64_t>(state_.bytes_done) + n);
        },
        file, false);
  }
  void file_done(const std::string& file) {
    update([&] { ++state_.files_done; }, file, true, true);
  }

 private:
  template <typename Change>
  void update(Change change, const std::string& file, bool always, bool finished = false) {
    const std::lock_guard lock(mutex_);
    change();
    if (!callback_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!always && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    state_.file = file;
    state_.file_finished = finished;
    callback_(state_);
  }

  const ProgressCallback& callback_;
  std::mutex mutex_;
  PullProgress state_;
  std::chrono::steady_clock::time_point last_{};
};

// Fetches files of one commit into the cache.
class Fetcher {
 public:
  Fetcher(const HubOptions& options, const RepoRef& ref, const std::string& commit,
          Progress& progress)
      : options_(options),
        ref_(ref),
        commit_(commit),
        cache_(options.cache_dir, ref.repo),
        progress_(progress) {}

  // Makes every one of `files` a file of the snapshot; returns the bytes downloaded.
  uint64_t fetch(const std::vector<std::string>& files) {
    progress_.add_files(files.size());
    std::vector<std::string> missing;
    for (const std::string& f : files) {
      if (cache_.has_file(commit_, f)) {
        progress_.file_done(f);
      } else {
        missing.push_back(f);
      }
    }
    if (missing.empty()) return 0;
    std::atomic<bool> cancel{false};
    std::vector<FileMetadata> meta(missing.size());
    parallel_for(missing.size(), options_.parallel_downloads, options_, cancel,
                 [&](size_t i, HttpClient& client) {
                   meta[i] =
                       fetch_file_metadata(client, options_, ref_, commit_, missing[i], &cancel);
                   if (!fs::exists(cache_.blob(meta[i].etag)) && first_sight(meta[i].etag))
                     progress_.add_total(meta[i].size);
                 });
    std::atomic<uint64_t> downloaded{0};
    parallel_for(missing.size(), options_.parallel_downloads, options_, cancel,
                 [&](size_t i, HttpClient& client) {
                   const std::string& file = missing[i];
                   const FileMetadata& m = meta[i];
                   BlobDownload d{m.location,
                                  m.etag,
                                  m.size,
                                  file,
                                  cache_.blob(m.etag),
                                  cache_.incomplete(m.etag),
                                  cache_.lock(m.etag)};
                   downloaded += download_blob(
                       client, options_, d, [&](int64_t n) { progress_.add_bytes(file, n); },
                       &cancel);
                   cache_.link(commit_, file, m.etag);  // only once its blob is whole
                   progress_.file_done(file);
                 });
    return downloaded;
  }

  const RepoCache& cache() const { return cache_; }

 private:
  // True the first time `etag` is seen: files of the same contents share one blob and one download.
  bool first_sight(const std::string& etag) {
    const std::lock_guard lock(seen_mutex_);
    return seen_.insert(etag).second;
  }

  const HubOptions& options_;
  const RepoRef& ref_;
  const std::string& commit_;
  RepoCache cache_;
  Progress& progress_;
  std::mutex seen_mutex_;
  std::set<std::string> seen_;
};

PullResult result_for(const RepoRef& ref, const std::string& commit, const RepoCache& cache,
                      const Selection& selection, std::vector<std::string> files) {
  PullResult r;
  r.repo = ref.repo;
  r.revision = ref.revision;
  r.commit = commit;
  r.snapshot = cache.snapshot(commit);
  r.format = selection.format;
  r.model_path =
      selection.format == WeightsFormat::kGguf ? cache.pointer(commit, selection.gguf) : r.snapshot;
  r.files = std::move(files);
  return r;
}

}  // namespace

std::optional<PullResult> find_cached(const RepoRef& ref, const HubOptions& options,
                                      std::string* why) {
  const RepoCache cache(options.cache_dir, ref.repo);
  const std::optional<std::string> commit =
      is_commit_hash(ref.revision) ? std::optional(ref.revision) : cache.read_ref(ref.revision);
  auto missing = [&](const std::string& reason) -> std::optional<PullResult> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  if (!commit) {
    std::error_code ec;
    return missing(
        fs::exists(cache.folder(), ec)
            ? fmt::format("the cache holds {} but not its revision '{}'", ref.repo, ref.revision)
            : fmt::format("{} is not in the hub cache {}", ref.repo, options.cache_dir.string()));
  }
  const std::vector<std::string> files = snapshot_files(cache.snapshot(*commit));
  if (files.empty())
    return missing(fmt::format("the cache has no files of {} at commit {}", ref.repo, *commit));
  try {
    const Selection selection = select_files(files, ref);
    std::vector<std::string> model_files = selection.files;
    if (!selection.index.empty()) {
      const Json index = read_json_file(cache.pointer(*commit, selection.index).string());
      for (std::string& shard : index_shards(index, files, ref, selection.index))
        model_files.push_back(std::move(shard));
    }
    PullResult r = result_for(ref, *commit, cache, selection, std::move(model_files));
    r.from_cache = true;
    return r;
  } catch (const Error& e) {
    return missing(fmt::format("the cached snapshot of {} at commit {} is incomplete: {}",
                               ref.to_string(), *commit, e.what()));
  }
}

PullResult pull(const RepoRef& ref, const HubOptions& options, const ProgressCallback& callback) {
  if (options.offline) {
    std::string why;
    if (auto cached = find_cached(ref, options, &why)) return *cached;
    fail(ErrorKind::kNotFound,
         "HF_HUB_OFFLINE is set, so strata reads only the hub cache, and {}; unset HF_HUB_OFFLINE "
         "and run strata pull {} to download it",
         why, ref.to_string());
  }

  RepoInfo info;
  {
    HttpClient client(options);
    try {
      info = fetch_repo_info(client, options, ref);
    } catch (const TransportError& e) {
      std::string why;
      if (auto cached = find_cached(ref, options, &why)) {
        log::warn("{} cannot be reached ({}); using the cached {} at commit {}", options.endpoint,
                  e.what(), ref.to_string(), cached->commit);
        return *cached;
      }
      fail(ErrorKind::kIo, "cannot reach {} for {}: {}; and {}", options.endpoint, ref.to_string(),
           e.what(), why);
    }
  }

  const Selection selection = select_files(info.files, ref);
  Progress progress(ref.repo, callback);
  Fetcher fetcher(options, ref, info.commit, progress);
  std::vector<std::string> files = selection.files;
  uint64_t downloaded = fetcher.fetch(files);
  if (!selection.index.empty()) {
    const Json index =
        read_json_file(fetcher.cache().pointer(info.commit, selection.index).string());
    const std::vector<std::string> shards = index_shards(index, info.files, ref, selection.index);
    downloaded += fetcher.fetch(shards);
    files.insert(files.end(), shards.begin(), shards.end());
  }
  // The ref last: it names a commit whose snapshot now holds the model.
  if (ref.revision != info.commit && fetcher.cache().read_ref(ref.revision) != info.commit)
    fetcher.cache().write_ref(ref.revision,
                              info.commit);  // (a read-only cache that has it all works)
  PullResult r = result_for(ref, info.commit, fetcher.cache(), selection, std::move(files));
  r.bytes_downloaded = downloaded;
  return r;
}

fs::path resolve(const Reference& ref, const HubOptions& options,
                 const ProgressCallback& progress) {
  if (ref.kind == Reference::Kind::kLocal) return ref.path;
  return pull(ref.repo, options, progress).model_path;
}

}  // namespace strata::hub
