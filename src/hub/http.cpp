// libcurl behind HttpClient: an easy handle per client, reused so that its connections are kept.
#include "hub/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "core/log.h"

namespace strata::hub {

namespace {

constexpr size_t kMaxErrorBody = 64 << 10;

// What libcurl's callbacks see of one request.
struct Transfer {
  HttpResponse response;
  const HttpRequest* request = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  bool sink_refused = false;
  bool cancelled = false;
  std::exception_ptr sink_error;  // what the sink threw, rethrown once libcurl has returned
};

std::string trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  return std::string(s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1));
}

// A header line, or a status line starting the next response (after a redirect or a 100).
size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    t->response.headers.clear();
    const size_t sp = line.find(' ');
    if (sp != std::string_view::npos) {
      t->response.status = std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
      t->response.reason = sp + 5 <= line.size() ? trim(line.substr(sp + 5)) : "";
    }
    return line.size();
  }
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::ranges::transform(name, name.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    t->response.headers[name] = trim(line.substr(colon + 1));
  }
  return line.size();
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->cancel != nullptr && t->cancel->load()) {
    t->cancelled = true;
    return 0;
  }
  const bool success = t->response.status >= 200 && t->response.status < 300;
  if (success && t->request->sink) {
    try {
      if (!t->request->sink(std::string_view(data, n), t->response)) {
        t->sink_refused = true;
        return 0;
      }
    } catch (...) {  // never through libcurl's C frames
      t->sink_error = std::current_exception();
      return 0;
    }
    return n;
  }
  if (t->response.body.size() < kMaxErrorBody || success)
    t->response.body.append(data,
                            success ? n : std::min(n, kMaxErrorBody - t->response.body.size()));
  return n;
}

// Called about once a second while idle too, so a cancel is noticed in a stalled transfer.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->cancel != nullptr && t->cancel->load()) {
    t->cancelled = true;
    return 1;
  }
  return 0;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string HttpResponse::header(std::string_view name) const {
  const auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

HttpClient::HttpClient(const HubOptions& options) : options_(options) {
  global_init();
  curl_ = curl_easy_init();
  check(curl_ != nullptr, ErrorKind::kInternal, "libcurl could not start a session");
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpResponse HttpClient::perform(const HttpRequest& request, const std::atomic<bool>* cancel) {
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);  // keeps the connections
  Transfer t;
  t.request = &request;
  t.cancel = cancel;
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, options_.user_agent.c_str());
  if (request.method == "HEAD") curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  // A custom Authorization header is not sent on to another host when a redirect is followed.
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout_s * 1000));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>(std::lround(options_.stall_timeout_s))));
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);

  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  char* effective = nullptr;
  curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &effective);
  t.response.url = effective != nullptr ? effective : request.url;
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (status != 0) t.response.status = status;

  if (t.sink_error) std::rethrow_exception(t.sink_error);
  if (t.cancelled) fail(ErrorKind::kIo, "the download of {} was cancelled", request.url);
  if (t.sink_refused) fail(ErrorKind::kIo, "writing what {} sent failed", request.url);
  if (code != CURLE_OK) {
    const bool connect_failed = code == CURLE_COULDNT_CONNECT ||
                                code == CURLE_COULDNT_RESOLVE_HOST ||
                                code == CURLE_COULDNT_RESOLVE_PROXY ||
                                (code == CURLE_OPERATION_TIMEDOUT && t.response.status == 0);
    throw TransportError(fmt::format("{} {} failed: {}", request.method, request.url,
                                     error[0] != '\0' ? error : curl_easy_strerror(code)),
                         connect_failed);
  }
  return t.response;
}

bool retryable_status(long status) { return status == 408 || status == 429 || status >= 500; }

double backoff_seconds(const HubOptions& options, int attempt, const HttpResponse* response) {
  double wait = options.backoff_initial_s * std::pow(2.0, std::max(0, attempt - 1));
  if (response != nullptr) {
    const std::string retry_after = response->header("retry-after");
    char* end = nullptr;
    const double seconds = std::strtod(retry_after.c_str(), &end);
    if (!retry_after.empty() && end != nullptr && *end == '\0' && seconds >= 0) wait = seconds;
  }
  return std::min(wait, options.backoff_max_s);
}

void sleep_for(double seconds, const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(seconds));
  for (Clock::time_point now = Clock::now(); now < until; now = Clock::now()) {
    if (cancel != nullptr && cancel->load()) return;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(50), until - now));
  }
}

HttpResponse perform_with_retries(HttpClient& client, const HubOptions& options,
                                  const HttpRequest& request, const std::atomic<bool>* cancel) {
  for (int attempt = 1;; ++attempt) {
    const bool last = attempt > options.max_retries;
    try {
      HttpResponse response = client.perform(request, cancel);
      if (!retryable_status(response.status) || last) return response;
      const double wait = backoff_seconds(options, attempt, &response);
      log::warn("{} {}: HTTP {}, trying again in {:.1f} s", request.method, request.url,
                response.status, wait);
      sleep_for(wait, cancel);
    } catch (const TransportError& e) {
      if (last || e.connect_failed()) throw;  // nobody there: the caller may fall back to the cache
      const double wait = backoff_seconds(options, attempt, nullptr);
      log::warn("{}; trying again in {:.1f} s", e.what(), wait);
      sleep_for(wait, cancel);
    }
    if (cancel != nullptr && cancel->load())
      fail(ErrorKind::kIo, "the request {} was cancelled", request.url);
  }
}

std::string url_origin(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return "";
  const size_t path = url.find_first_of("/?#", scheme + 3);
  return std::string(url.substr(0, path));
}

std::string url_encode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace strata::hub
