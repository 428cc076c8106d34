// What every easy handle berth makes shares: http and https only (for requests and for
// redirects), and response headers read through libcurl's header API (curl_easy_header), never
// parsed by hand.
#pragma once

#include <curl/curl.h>

#include <map>
#include <string>

namespace berth {

/// Restricts `easy` to http and https, for the request and for any redirect it follows: a
/// Location naming file://, ftp:// and the like fails with CURLE_UNSUPPORTED_PROTOCOL.
void RestrictToHttp(CURL* easy);

/// The value of response header `name` (any case) of the last response of `easy`, "" when it
/// has none. Works from a write callback, once the headers of that response are in.
std::string ResponseHeader(CURL* easy, const char* name);

/// Every header of the last response of `easy`: names lower-cased, the last value of a
/// repeated name.
std::map<std::string, std::string> ResponseHeaders(CURL* easy);

/// The HTTP status of the last response of `easy`, 0 when none came.
long ResponseStatus(CURL* easy);

/// A response body read into memory up to `limit` bytes: past it, `truncated` is set and the
/// transfer stops (CURLE_WRITE_ERROR). Untrusted answers are never read whole.
struct BoundedBody {
  std::string text;
  size_t limit = 0;
  bool truncated = false;
};

/// Points `easy`'s write callback at `body`.
void WriteInto(CURL* easy, BoundedBody* body);

}  // namespace berth
