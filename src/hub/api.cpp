// The hub API requests, and its answers read: repo info JSON, file metadata headers, errors (the
// hub names them in X-Error-Code: RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo).
#include "hub/api.h"

#include "core/json.h"

namespace strata::hub {

namespace {

// The hub's own words for an error: X-Error-Message, else a JSON body's "error".
std::string server_message(const HttpResponse& r) {
  if (std::string m = r.header("x-error-message"); !m.empty()) return m;
  try {
    const Json body = Json::parse(r.body);
    if (body.is_object() && body.contains("error") && body["error"].is_string())
      return body["error"].get<std::string>();
  } catch (const std::exception&) {
  }
  return "";
}

}  // namespace

std::string resolve_url(const HubOptions& options, const std::string& repo,
                        const std::string& revision, const std::string& path) {
  return fmt::format("{}/{}/resolve/{}/{}", options.endpoint, repo, url_encode(revision, false),
                     url_encode(path, true));
}

std::vector<std::string> hub_headers(const HubOptions& options, const std::string& url) {
  std::vector<std::string> headers = {"Accept-Encoding: identity"};
  if (!options.token.empty() && url_origin(url) == url_origin(options.endpoint))
    headers.push_back("Authorization: Bearer " + options.token);
  return headers;
}

std::string normalize_etag(std::string_view etag) {
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  while (etag.starts_with('"')) etag.remove_prefix(1);
  while (etag.ends_with('"')) etag.remove_suffix(1);
  return std::string(etag);
}

void fail_response(const HttpResponse& r, const HubOptions& options, const RepoRef& ref,
                   const std::string& file) {
  const std::string code = r.header("x-error-code");
  std::string said = server_message(r);
  if (!said.empty()) said = " (the hub said: " + said + ")";
  const std::string where = options.endpoint;
  const std::string token_hint =
      options.token.empty() ? "no token was sent: set HF_TOKEN to a Hugging Face access token"
                            : "the token in HF_TOKEN has no access to it";
  if (code == "RepoNotFound" || (r.status == 404 && code.empty() && file.empty()))
    fail(ErrorKind::kNotFound,
         "repository {} not found on {} (HTTP {}): it does not exist, or it is private or gated "
         "and {}{}",
         ref.repo, where, r.status, token_hint, said);
  if (r.status == 401)
    fail(ErrorKind::kInvalidInput,
         "{} needs a token to download{} (HTTP 401: {}): {}; a gated model also needs its "
         "conditions accepted at {}/{}{}",
         ref.repo, file.empty() ? "" : " " + file, code == "GatedRepo" ? "gated" : "unauthorized",
         options.token.empty() ? token_hint : "the token in HF_TOKEN was refused: check it", where,
         ref.repo, said);
  if (r.status == 403)
    fail(ErrorKind::kInvalidInput,
         "the token in HF_TOKEN has no access to {} (HTTP 403{}): accept its conditions at {}/{} "
         "or use a token with read access{}",
         ref.repo, code == "GatedRepo" ? ", gated" : "", where, ref.repo, said);
  if (code == "RevisionNotFound" || (r.status == 404 && file.empty()))
    fail(ErrorKind::kNotFound, "revision '{}' not found in {} on {} (HTTP {}){}", ref.revision,
         ref.repo, where, r.status, said);
  if (r.status == 404)
    fail(ErrorKind::kNotFound, "file '{}' not found in {} at revision {} (HTTP 404){}", file,
         ref.repo, ref.revision, said);
  if (r.status == 429)
    fail(ErrorKind::kIo,
         "{} is limiting the rate of requests (HTTP 429) and still was after {} retries: try "
         "again later{}{}",
         where, options.max_retries,
         options.token.empty() ? " (a token in HF_TOKEN raises the limit)" : "", said);
  if (r.status >= 500)
    fail(ErrorKind::kIo, "{} answered HTTP {} {} for {}{} after {} retries{}", where, r.status,
         r.reason, ref.repo, file.empty() ? "" : "/" + file, options.max_retries, said);
  fail(ErrorKind::kIo, "unexpected answer HTTP {} {} from {}{}", r.status, r.reason, r.url, said);
}

RepoInfo fetch_repo_info(HttpClient& client, const HubOptions& options, const RepoRef& ref,
                         const std::atomic<bool>* cancel) {
  HttpRequest request;
  request.url = fmt::format("{}/api/models/{}/revision/{}", options.endpoint, ref.repo,
                            url_encode(ref.revision, false));
  request.headers = hub_headers(options, request.url);
  const HttpResponse r = perform_with_retries(client, options, request, cancel);
  if (r.status != 200) fail_response(r, options, ref, "");
  RepoInfo info;
  try {
    const Json body = Json::parse(r.body);
    info.commit = body.at("sha").get<std::string>();
    for (const Json& sibling : body.at("siblings"))
      info.files.push_back(sibling.at("rfilename").get<std::string>());
  } catch (const std::exception& e) {
    fail(ErrorKind::kIo, "{} answered {} with something that is not a hub's repository info: {}",
         options.endpoint, request.url, e.what());
  }
  check(is_commit_hash(info.commit), ErrorKind::kIo,
        "{} gave '{}' as the commit of {}@{}: not a commit hash", options.endpoint, info.commit,
        ref.repo, ref.revision);
  return info;
}

FileMetadata fetch_file_metadata(HttpClient& client, const HubOptions& options, const RepoRef& ref,
                                 const std::string& commit, const std::string& path,
                                 const std::atomic<bool>* cancel) {
  HttpRequest request;
  request.method = "HEAD";
  request.url = resolve_url(options, ref.repo, commit, path);
  request.follow_redirects = false;
  HttpResponse r;
  for (int redirects = 0;; ++redirects) {
    request.headers = hub_headers(options, request.url);
    r = perform_with_retries(client, options, request, cancel);
    const std::string location = r.header("location");
    // A renamed repository answers with a redirect to its new path on the same host: follow it.
    if (r.status >= 300 && r.status < 400 && location.starts_with('/') && redirects < 5) {
      request.url = url_origin(request.url) + location;
      continue;
    }
    break;
  }
  if (r.status >= 400 || r.status < 200) fail_response(r, options, ref, path);
  FileMetadata m;
  m.commit = r.header("x-repo-commit");
  std::string etag = r.header("x-linked-etag");
  if (etag.empty()) etag = r.header("etag");
  m.etag = normalize_etag(etag);
  const bool redirect = r.status >= 300 && r.status < 400;
  std::string size = r.header("x-linked-size");
  if (size.empty() && !redirect) size = r.header("content-length");
  m.location = redirect ? r.header("location") : request.url;
  check(!m.commit.empty(), ErrorKind::kIo,
        "{} did not say the commit of {} (no X-Repo-Commit header): is HF_ENDPOINT a Hugging Face "
        "hub?",
        options.endpoint, request.url);
  // A blob name must be a plain file name.
  check(!m.etag.empty() && m.etag.find_first_of("/\\") == std::string::npos && m.etag != "." &&
            m.etag != "..",
        ErrorKind::kIo, "{} gave no usable ETag for {} ('{}')", options.endpoint, request.url,
        etag);
  check(!size.empty() && size.find_first_not_of("0123456789") == std::string::npos, ErrorKind::kIo,
        "{} gave no size for {}", options.endpoint, request.url);
  check(!m.location.empty(), ErrorKind::kIo, "{} redirected {} to nowhere", options.endpoint,
        request.url);
  m.size = std::stoull(size);
  return m;
}

}  // namespace strata::hub
