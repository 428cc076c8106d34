// What an HTTP answer (or its absence) means for the caller: one table for the Hub client, the
// downloader and their retries, so that no decision depends on the wording of a message.
#pragma once

#include <curl/curl.h>

namespace berth {

/// Which server answered: the Hub itself (API, /resolve), or the CDN a /resolve redirected to.
enum class HttpOrigin { kHub, kCdn };

enum class HttpOutcome {
  kOk,            // 2xx
  kRedirect,      // 3xx: the caller follows Location (manually, with a hop limit)
  kRetryable,     // a transport error, 408 or 500/502/503/504: back off and try again
  kRateLimited,   // 429: wait as Retry-After / RateLimit say, then try again
  kUnauthorized,  // Hub 401: no token, a refused token, or a gated/private repo
  kForbidden,     // Hub 403: the token has no access (gated, disabled)
  kNotFound,      // 404: repo, revision or file (the X-Error-Code says which)
  kUrlExpired,    // CDN 400/401/403/410: the signed URL is refused; resolve it again
  kFatal,         // anything else: a refused protocol, a bad certificate, 416, other 4xx/5xx
};

/// `status` is the HTTP status (0 when none came), `code` the transfer's CURLcode. A transport
/// error wins over any status: a body cut short is retried whatever its status line said.
HttpOutcome Classify(long status, CURLcode code, HttpOrigin origin);

/// "kRetryable" and so on, for logs and test messages.
const char* OutcomeName(HttpOutcome outcome);

}  // namespace berth
