// The Hugging Face hub's HTTP API, the parts a download needs: a revision's commit and file list
// (GET {endpoint}/api/models/{repo}/revision/{revision}), a file's metadata (HEAD
// {endpoint}/{repo}/resolve/{commit}/{path}: X-Repo-Commit, X-Linked-Etag or ETag, X-Linked-Size or
// Content-Length, and Location where an LFS file redirects to its blob), and the hub's errors
// turned into clear ones.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "hub/http.h"
#include "hub/options.h"
#include "hub/reference.h"

namespace strata::hub {

struct RepoInfo {
  std::string commit;              // the revision's commit hash
  std::vector<std::string> files;  // every file's path in the repository, as listed
};

// The commit and files of `ref.revision` of `ref.repo`. Errors: 401/403 (a token is needed, or the
// token has no access), 404 (no such repository or revision), and 429/5xx after the retries.
RepoInfo fetch_repo_info(HttpClient& client, const HubOptions& options, const RepoRef& ref,
                         const std::atomic<bool>* cancel = nullptr);

struct FileMetadata {
  std::string etag;      // without quotes: a git blob id, or an LFS file's sha256
  uint64_t size = 0;     // bytes
  std::string commit;    // X-Repo-Commit
  std::string location;  // where to GET it: the blob URL an LFS file redirects to, or the file's
};

// A file's metadata at `commit` of `ref.repo` (HEAD on its resolve URL; "/..." redirects of a
// renamed repository followed, a redirect elsewhere is the download's location). `ref` names the
// request in errors.
FileMetadata fetch_file_metadata(HttpClient& client, const HubOptions& options, const RepoRef& ref,
                                 const std::string& commit, const std::string& path,
                                 const std::atomic<bool>* cancel = nullptr);

// {endpoint}/{repo}/resolve/{revision}/{path}, encoded.
std::string resolve_url(const HubOptions& options, const std::string& repo,
                        const std::string& revision, const std::string& path);

// The request headers every hub request carries: the token (only to the endpoint's own origin,
// never to a CDN a file redirects to) and Accept-Encoding: identity (sizes and hashes are of the
// bytes).
std::vector<std::string> hub_headers(const HubOptions& options, const std::string& url);

// What went wrong, for an answer that is not a success: throws a strata::Error saying it in the
// hub's terms. `file` is "" for a repository request.
[[noreturn]] void fail_response(const HttpResponse& response, const HubOptions& options,
                                const RepoRef& ref, const std::string& file);

// The ETag header's value as a blob name: W/ and quotes removed.
std::string normalize_etag(std::string_view etag);

}  // namespace strata::hub
