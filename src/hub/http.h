// A thin HTTP client over libcurl for the hub: one request at a time per client (a client per
// thread), responses' headers by lower-case name, bodies kept or streamed to a sink, and the retry
// policy (429, 408 and 5xx answers and cut-off transfers are tried again after a backoff).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "hub/options.h"

namespace strata::hub {

struct HttpResponse {
  long status = 0;
  std::string reason;  // the status line's text, e.g. "Not Found"
  // The last response's headers (after redirects followed), names in lower case.
  std::map<std::string, std::string, std::less<>> headers;
  std::string body;  // the body when no sink took it (an error's body: its first 64 KiB)
  std::string url;   // where the request ended, after redirects

  std::string header(std::string_view name) const;  // "" when absent
};

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  bool follow_redirects = true;
  // A 2xx answer's body goes here chunk by chunk instead of into `body`; the response so far (its
  // status and headers) comes along. Returning false aborts the transfer (an Error of kind kIo);
  // what it throws aborts it too, and perform() throws that.
  std::function<bool(std::string_view chunk, const HttpResponse& response)> sink;
};

// A request that got no complete HTTP answer: no connection, cut off, stalled. Worth retrying.
class TransportError : public Error {
 public:
  TransportError(const std::string& message, bool connect_failed)
      : Error(ErrorKind::kIo, message), connect_failed_(connect_failed) {}
  // The server could not be reached at all (refused, unresolved, connect timeout).
  bool connect_failed() const { return connect_failed_; }

 private:
  bool connect_failed_;
};

class HttpClient {
 public:
  explicit HttpClient(const HubOptions& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // One request; throws TransportError when no answer came. `cancel`, when set, aborts it.
  HttpResponse perform(const HttpRequest& request, const std::atomic<bool>* cancel = nullptr);

 private:
  const HubOptions& options_;
  void* curl_;
};

// True for answers worth another try: 408, 429 and 5xx.
bool retryable_status(long status);

// How long to wait before retry `attempt` (1, 2, ...): the response's Retry-After when it has one
// (seconds), else backoff_initial_s doubled per attempt; never more than backoff_max_s.
double backoff_seconds(const HubOptions& options, int attempt, const HttpResponse* response);

// Sleeps `seconds`, waking early when `cancel` is set.
void sleep_for(double seconds, const std::atomic<bool>* cancel);

// `request` tried up to options.max_retries more times while the answer is retryable or the
// transfer fails; returns the last answer (which may still be an error status), or throws the last
// TransportError.
HttpResponse perform_with_retries(HttpClient& client, const HubOptions& options,
                                  const HttpRequest& request,
                                  const std::atomic<bool>* cancel = nullptr);

// "scheme://host[:port]" of a URL, for comparing origins and resolving "/path" redirects.
std::string url_origin(std::string_view url);

// Percent-encodes `text` for a URL path; '/' stays when `keep_slash`.
std::string url_encode(std::string_view text, bool keep_slash);

}  // namespace strata::hub
