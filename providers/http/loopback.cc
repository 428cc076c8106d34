// The only place berth's loopback clients set libcurl options: CURLcode becomes an
// operator-facing detail here.
#include "providers/http/loopback.h"

#include <curl/curl.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/untrusted_text.h"
#include "providers/http/curl_easy.h"
#include "providers/http/curl_global.h"

namespace berth {
namespace {

std::string Why(CURLcode code, long os_errno, const char* errbuf, const LoopbackLimits& l) {
  const std::string said = errbuf[0] ? errbuf : curl_easy_strerror(code);
  switch (code) {
    case CURLE_COULDNT_CONNECT:
      if (os_errno != 0 && os_errno != ECONNREFUSED)
        return std::string("cannot connect (") + std::strerror(static_cast<int>(os_errno)) + ")";
      return "connection refused (nothing listens on that port; is the service running, still "
             "starting, or on another port?)";
    case CURLE_OPERATION_TIMEDOUT:
      return "timed out (" + std::to_string(l.connect_timeout_ms) + " ms to connect, " +
             std::to_string(l.total_timeout_ms) +
             " ms in all; the server accepts but does not answer: overloaded or hung?)";
    case CURLE_COULDNT_RESOLVE_HOST:
      return "cannot resolve the host (a loopback address is expected)";
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      return "the connection closed without an answer (" + said + ")";
    default:
      return said;
  }
}

}  // namespace

LoopbackAnswer LoopbackRequest(const std::string& method, const std::string& url,
                               const std::string& body, const LoopbackLimits& limits) {
  CurlGlobalInit();
  LoopbackAnswer a;
  const std::string where = method + " " + url + ": ";
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> json(
      curl_slist_append(nullptr, "Content-Type: application/json"), &curl_slist_free_all);
  if (!curl || !json) {
    a.error = where + "cannot start an HTTP client (out of memory?)";
    return a;
  }
  CURL* c = curl.get();
  BoundedBody answer;
  answer.limit = limits.max_body_bytes;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, limits.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, limits.total_timeout_ms);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "berth/" BERTH_VERSION);
  if (method == "POST") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    if (!body.empty()) curl_easy_setopt(c, CURLOPT_HTTPHEADER, json.get());
  }
  WriteInto(c, &answer);
  CURLcode code = curl_easy_perform(c);
  a.status = ResponseStatus(c);
  curl_off_t us = 0;
  curl_easy_getinfo(c, CURLINFO_TOTAL_TIME_T, &us);
  a.elapsed_ms = static_cast<uint64_t>(us / 1000);
  a.body = std::move(answer.text);
  long os_errno = 0;
  curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
  if (answer.truncated)
    a.error = where + "the answer is longer than " + std::to_string(answer.limit) + " bytes";
  else if (code != CURLE_OK)
    a.error = where + EscapeLine(Why(code, os_errno, errbuf, limits));
  return a;
}

std::string LoopbackUrl(const std::string& host, int port, const std::string& path) {
  return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port) + path;
}

}  // namespace berth
