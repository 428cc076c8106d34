// HTTP for the Hub over libcurl: one request at a time, manual redirects, the one retry policy
// (providers/http/retry_policy.h) honouring Retry-After and RateLimit, and a token that is only
// ever sent to the Hub's own host.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "providers/http/retry_policy.h"
#include "providers/http/url.h"
#include "providers/hub/hub_types.h"

namespace berth {

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names, last value wins
  std::string body;
  std::string url;  // the URL that answered
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

/// Milliseconds to wait before retrying a 429/503, from Retry-After (seconds) or RateLimit
/// ("...;r=0;t=N"); 0 when neither says.
long RetryAfterMs(const HttpResponse& r);

/// The retry policy `options` ask for (attempts, backoff, its cap).
RetryPolicy RetryPolicyOf(const HubOptions& options);

/// The most bytes berth reads of a Hub API answer: a page of a tree listing (1000 entries of a
/// few hundred bytes on the real Hub, 32 MiB leaves a hundred times that), and any other answer
/// (a revision's info lists every file's name: 16 MiB is some 200,000 names). A longer answer is
/// refused with an error, whatever its Content-Length says, and never held in memory.
constexpr size_t kMaxTreePageBytes = size_t{32} << 20;
constexpr size_t kMaxApiBodyBytes = size_t{16} << 20;

class HubHttp {
 public:
  explicit HubHttp(HubOptions options);
  ~HubHttp();
  HubHttp(const HubHttp&) = delete;
  HubHttp& operator=(const HubHttp&) = delete;

  /// One request; redirects are not followed. The token goes only to the endpoint's origin.
  /// A transport error (or a refused protocol, or a body over `max_body` bytes) is an
  /// Unavailable status.
  Result<HttpResponse> Do(const std::string& method, const std::string& url,
                          const std::vector<std::string>& headers = {},
                          size_t max_body = kMaxApiBodyBytes);
  /// Do() retried under RetryPolicyOf(options()) while Classify() says kRetryable or
  /// kRateLimited; any other answer is returned as it is. `what` names the request in errors.
  /// A Hub that cannot be reached (its name does not resolve, it refuses the connection) is
  /// asked once, not retried; once it is found unreachable, or its retries ran
  /// out (attempts, or options().retry_budget_ms), every later request to it fails at once with
  /// that error (unreachable() says so) and nothing more is sent.
  Result<HttpResponse> DoWithRetry(const std::string& method, const std::string& url,
                                   const std::string& what, size_t max_body = kMaxApiBodyBytes);
  const HubOptions& options() const { return opt_; }
  /// Why the Hub counts as unreachable for the rest of this object's life; Ok while it does not.
  const Status& unreachable() const { return unreachable_; }
  /// Requests sent (attempts included) since construction.
  int requests_sent() const { return requests_sent_; }
  /// True when `url` is on the Hub's own origin (the token goes there, and nowhere else).
  bool IsHub(const std::string& url) const;

  /// Curl setup shared with the downloader: http/https only, timeouts, CA bundle, user agent,
  /// auth for `url`. `handle` is a CURL*; `headers` receives the curl_slist* to free after the
  /// transfer.
  void Configure(void* handle, const std::string& url, const std::vector<std::string>& extra,
                 void** headers) const;

 private:
  Result<HttpResponse> Perform(const std::string& method, const std::string& url,
                               const std::vector<std::string>& headers, size_t max_body,
                               int* curl_code);
  HubOptions opt_;
  std::string hub_origin_;
  Status unreachable_;
  long waited_ms_ = 0;  // backoffs slept, against options().retry_budget_ms
  int requests_sent_ = 0;
  void* curl_ = nullptr;  // CURL*, reused for keep-alive
};

/// The message an operator sees for a Hub error response: what happened and what to do. Chosen
/// by the status (Classify) and the Hub's X-Error-Code, never by the wording of a message.
Status HubError(const HttpResponse& r, const std::string& what, bool have_token);

}  // namespace berth
