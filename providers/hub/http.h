// HTTP for the Hub over libcurl: one request at a time, manual redirects, retries that honour
// Retry-After and RateLimit, and a token that is only ever sent to the Hub's own host.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/core/status.h"
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

/// "scheme://host:port" of a URL, for same-origin checks.
std::string OriginOf(const std::string& url);
/// Resolves a Location against the URL it came from (absolute, or path-only).
std::string ResolveLocation(const std::string& base, const std::string& location);
/// Milliseconds to wait before retrying a 429/503, from Retry-After (seconds) or RateLimit
/// ("...;r=0;t=N"); 0 when neither says.
long RetryAfterMs(const HttpResponse& r);
/// Percent-encodes for a URL path segment; keeps '/' when `keep_slash`.
std::string UrlEncode(const std::string& s, bool keep_slash);

class HubHttp {
 public:
  explicit HubHttp(HubOptions options);
  ~HubHttp();
  HubHttp(const HubHttp&) = delete;
  HubHttp& operator=(const HubHttp&) = delete;

  /// One request; redirects are not followed. The token goes only to the endpoint's origin.
  Result<HttpResponse> Do(const std::string& method, const std::string& url,
                          const std::vector<std::string>& headers = {});
  /// Do() with retries for transport errors, 408, 429 and 5xx; `what` names the request in errors.
  Result<HttpResponse> DoWithRetry(const std::string& method, const std::string& url,
                                   const std::string& what);
  const HubOptions& options() const { return opt_; }

  /// Curl setup shared with the downloader: timeouts, CA bundle, user agent, auth for `url`.
  /// `handle` is a CURL*; `headers` receives the curl_slist* to free after the transfer.
  void Configure(void* handle, const std::string& url, const std::vector<std::string>& extra,
                 void** headers) const;

 private:
  HubOptions opt_;
  void* curl_ = nullptr;  // CURL*, reused for keep-alive
};

/// The message an operator sees for a Hub error response: what happened and what to do.
Status HubError(const HttpResponse& r, const std::string& what, bool have_token);

}  // namespace berth
