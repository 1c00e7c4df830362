// The Hugging Face cache layout, shared with huggingface_hub (so either finds what the other
// fetched):
//   {cache}/models--org--name/blobs/{etag}                  file contents, named by ETag (an LFS
//                                                           file's sha256, else its git blob id)
//   {cache}/models--org--name/snapshots/{commit}/{path}     relative symlinks: ../../blobs/{etag}
//                                                           (one more ../ per folder in path)
//   {cache}/models--org--name/refs/{revision}               the revision's commit hash
//   {cache}/.locks/models--org--name/{etag}.lock            held (flock) while a blob is written
// A blob is written as blobs/{etag}.incomplete and renamed only when whole and verified, so no
// partial file ever carries a final name.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace strata::hub {

class RepoCache {
 public:
  RepoCache(std::filesystem::path cache_dir, const std::string& repo);

  const std::filesystem::path& folder() const { return folder_; }
  std::filesystem::path blob(const std::string& etag) const;
  std::filesystem::path incomplete(const std::string& etag) const;  // blob(etag) + ".incomplete"
  std::filesystem::path lock(const std::string& etag) const;
  std::filesystem::path snapshot(const std::string& commit) const;
  std::filesystem::path pointer(const std::string& commit, const std::string& file) const;

  // refs/{revision}'s commit; nullopt when absent or not a commit hash.
  std::optional<std::string> read_ref(const std::string& revision) const;
  // Writes refs/{revision} atomically (a temporary file renamed over it).
  void write_ref(const std::string& revision, const std::string& commit) const;
  // True when the snapshot has `file` and it leads to an existing file.
  bool has_file(const std::string& commit, const std::string& file) const;
  // snapshots/{commit}/{file} -> ../../blobs/{etag} (relative), replacing what was there.
  void link(const std::string& commit, const std::string& file, const std::string& etag) const;

 private:
  std::filesystem::path cache_dir_;
  std::filesystem::path folder_;
};

// What the cache holds, for `strata ls`.
struct CachedSnapshot {
  std::string commit;
  std::vector<std::string> refs;  // the revisions naming this commit
  std::filesystem::path path;
};

struct CachedRepo {
  std::string repo;  // org/name
  std::filesystem::path folder;
  std::vector<CachedSnapshot> snapshots;  // by commit
};

// The model repositories under `cache_dir` (models--*/), by name; none when it does not exist.
std::vector<CachedRepo> scan_cache(const std::filesystem::path& cache_dir);

// Every file of a snapshot whose blob is there, as a repository path ("a/b.gguf"), sorted.
std::vector<std::string> snapshot_files(const std::filesystem::path& snapshot);

// The repository's cached files: its folder and its lock folder. Returns the bytes freed (the
// blobs' sizes); throws kNotFound when the cache does not hold the repository.
uint64_t remove_repo(const std::filesystem::path& cache_dir, const std::string& repo);

}  // namespace strata::hub
