// One HTTP request to a model server on this host: the health probe, the smoke request and
// vLLM's sleep routes all go through it. http only, no proxy (loopback), no redirects, every
// answer bounded in size and in time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace berth {

struct LoopbackLimits {
  long connect_timeout_ms = 2000;           // to establish the TCP connection
  long total_timeout_ms = 10000;            // connect to last byte
  size_t max_body_bytes = size_t{4} << 20;  // a longer answer is cut off and is an error
};

struct LoopbackAnswer {
  long status = 0;          // the HTTP status; 0 when no status line came
  std::string body;         // at most max_body_bytes
  std::string error;        // "" when the whole answer came in time, else "GET <url>: why" (one
                            // escaped line, for the operator)
  uint64_t elapsed_ms = 0;  // connect to last byte, or to the failure
};

/// `method` is "GET" or "POST"; a POST sends `body` (as JSON when not empty). Safe from any
/// thread.
LoopbackAnswer LoopbackRequest(const std::string& method, const std::string& url,
                               const std::string& body, const LoopbackLimits& limits);

/// "http://<host>:<port><path>", an IPv6 literal in brackets.
std::string LoopbackUrl(const std::string& host, int port, const std::string& path);

}  // namespace berth
