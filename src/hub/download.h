// Downloading one blob into the cache: into blobs/{etag}.incomplete, resumed with an HTTP Range
// from what is already there after a dropped connection (or a killed process), retried on 429, 408
// and 5xx answers, its size checked and an LFS file's sha256 (its etag) verified, then renamed to
// blobs/{etag}. A file that fails the check is removed, never renamed. A lock (flock on
// .locks/.../{etag}.lock, the file huggingface_hub locks too) keeps two writers of one blob apart.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "hub/http.h"
#include "hub/options.h"

namespace strata::hub {

struct BlobDownload {
  std::string url;                   // where to GET it (after the hub's redirect)
  std::string etag;                  // its name in blobs/; 64 hex digits: the sha256 to verify
  uint64_t size = 0;                 // the bytes it must have
  std::string file;                  // its path in the repository, for messages
  std::filesystem::path blob;        // blobs/{etag}
  std::filesystem::path incomplete;  // blobs/{etag}.incomplete
  std::filesystem::path lock;        // .locks/.../{etag}.lock
};

// Makes `d.blob` exist with the right contents (returns at once when it does). `on_bytes(n)` is
// told of every n bytes written (and of bytes already there when resuming); returns the bytes
// downloaded.
uint64_t download_blob(HttpClient& client, const HubOptions& options, const BlobDownload& d,
                       const std::function<void(int64_t)>& on_bytes,
                       const std::atomic<bool>* cancel = nullptr);

// The sha256 of a file's contents, as 64 lower-case hex digits.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace strata::hub
