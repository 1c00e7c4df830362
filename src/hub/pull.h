// Getting a model from the hub into the cache, and finding it there: the hub layer's entry points.
// `pull` asks the hub for the revision's commit and files, picks the model's files (hub/select.h),
// and fetches those the snapshot lacks, several at a time (hub/download.h); a progress callback
// follows it, so the CLI can draw a bar and a server can stream it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hub/options.h"
#include "hub/reference.h"
#include "hub/select.h"

namespace strata::hub {

struct PullProgress {
  std::string repo;            // org/name
  size_t files_total = 0;      // the model's files (grows once an index names its shards)
  size_t files_done = 0;       // of them, in the snapshot
  uint64_t bytes_total = 0;    // bytes to download (grows as their sizes are learnt)
  uint64_t bytes_done = 0;     // of them, on disk (a resumed file's earlier bytes count)
  std::string file;            // the file this report is about
  bool file_finished = false;  // `file` has just landed in the snapshot
};

// Called from the download threads, one call at a time, at most about ten times a second but for
// every finished file.
using ProgressCallback = std::function<void(const PullProgress&)>;

struct PullResult {
  std::string repo;
  std::string revision;
  std::string commit;
  std::filesystem::path snapshot;    // {cache}/models--org--name/snapshots/{commit}
  std::filesystem::path model_path;  // what loads: the snapshot folder, or its GGUF file
  WeightsFormat format = WeightsFormat::kSafetensors;
  std::vector<std::string> files;  // the model's files in the snapshot
  uint64_t bytes_downloaded = 0;
  bool from_cache = false;  // the hub was not asked (offline) or could not be reached
};

// The model `ref` names, in the cache: what is missing is downloaded (nothing is, when the snapshot
// has it all). Offline (options.offline), only the cache is read. When the hub cannot be reached,
// a complete cached snapshot of the revision is used. Every failure is a strata::Error that says
// what to do, and no partial file is left under a final name.
PullResult pull(const RepoRef& ref, const HubOptions& options,
                const ProgressCallback& progress = {});

// The model `ref` names as the cache holds it, without asking the hub: nullopt, with the reason in
// `why`, when the revision is not cached or its snapshot lacks the model's files.
std::optional<PullResult> find_cached(const RepoRef& ref, const HubOptions& options,
                                      std::string* why = nullptr);

// The path a model loads from: a local reference as given; a repository through pull().
std::filesystem::path resolve(const Reference& ref, const HubOptions& options,
                              const ProgressCallback& progress = {});

}  // namespace strata::hub
