// The only user of libcurl for health probes: CURLcode becomes an operator-facing detail here.
#include "providers/health/health_probe.h"

#include <curl/curl.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/untrusted_text.h"
#include "providers/http/curl_easy.h"
#include "providers/http/curl_global.h"

namespace berth {
namespace {

struct HttpAnswer {
  bool answered = false;  // a status line came back
  long status = 0;
  std::string body;
  std::string error;  // when !answered or the body was cut off: what went wrong
};

std::string CurlErrorText(CURLcode code, long os_errno, const char* errbuf, const std::string& host,
                          int port, const CurlHealthProbeOptions& o) {
  std::string where = host + ":" + std::to_string(port);
  switch (code) {
    case CURLE_COULDNT_CONNECT:
      if (os_errno != 0 && os_errno != ECONNREFUSED)
        return std::string("cannot connect (") + std::strerror(static_cast<int>(os_errno)) + ")";
      return "connection refused (nothing listens on " + where +
             "; is the service running, still starting, or on another port?)";
    case CURLE_OPERATION_TIMEDOUT:
      return "timed out (" + std::to_string(o.connect_timeout_ms) + " ms to connect, " +
             std::to_string(o.total_timeout_ms) + " ms in all; the server at " + where +
             " accepts but does not answer: overloaded or hung?)";
    case CURLE_COULDNT_RESOLVE_HOST:
      return "cannot resolve host '" + host + "' (probes expect a loopback address)";
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      return std::string("the connection closed without an answer (") +
             (errbuf[0] ? errbuf : curl_easy_strerror(code)) + ")";
    default:
      return std::string(errbuf[0] ? errbuf : curl_easy_strerror(code));
  }
}

HttpAnswer Get(CURL* curl, const std::string& url, const std::string& host, int port,
               const CurlHealthProbeOptions& o) {
  HttpAnswer a;
  BoundedBody body;
  body.limit = o.max_body_bytes;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  RestrictToHttp(curl);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, o.connect_timeout_ms);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, o.total_timeout_ms);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  WriteInto(curl, &body);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "berth-health/" BERTH_VERSION);
  CURLcode code = curl_easy_perform(curl);
  a.status = ResponseStatus(curl);
  a.answered = a.status != 0;
  a.body = std::move(body.text);
  if (body.truncated) {
    a.error = "the answer is longer than " + std::to_string(o.max_body_bytes) + " bytes";
  } else if (code != CURLE_OK) {
    long os_errno = 0;
    curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno);
    a.error = CurlErrorText(code, os_errno, errbuf, host, port, o);
  }
  return a;
}

/// Ids of data[] in an OpenAI /v1/models answer, or an error saying what is malformed.
bool ModelIds(const std::string& text, std::vector<std::string>* ids, std::string* error) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *error = "not JSON";
    return false;
  }
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
    *error = "no \"data\" array";
    return false;
  }
  for (const auto& m : j["data"]) {
    if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) {
      *error = "a data[] entry without a string \"id\"";
      return false;
    }
    ids->push_back(m["id"].get<std::string>());
  }
  return true;
}

std::string Snippet(const std::string& text) { return Excerpt(text, 80); }

}  // namespace

CurlHealthProbe::CurlHealthProbe(CurlHealthProbeOptions options) : options_(options) {
  CurlGlobalInit();
}

HealthResult CurlHealthProbe::Probe(const std::string& host, int port, const std::string& path,
                                    const std::string& served_name) {
  HealthResult r;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) {
    r.detail = "cannot start an HTTP client (curl_easy_init failed: out of memory?)";
    return r;
  }
  // An IPv6 literal needs brackets in a URL.
  std::string base = "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                     ":" + std::to_string(port);
  std::string health_url = base + (path.empty() || path[0] != '/' ? "/" : "") + path;

  HttpAnswer h = Get(curl.get(), health_url, host, port, options_);
  r.health_status = static_cast<int>(h.status);
  if (!h.answered) {
    r.detail = "GET " + health_url + ": " + h.error;
    return r;
  }
  if (h.status != 200) {
    r.detail = "GET " + health_url + ": HTTP " + std::to_string(h.status) +
               (h.status == 503 ? " (the server is up but not ready: still loading the model?)"
                                : " (expected 200)");
    return r;
  }

  if (served_name.empty()) {
    r.healthy = true;
    return r;
  }
  std::string models_url = base + "/v1/models";
  HttpAnswer m = Get(curl.get(), models_url, host, port, options_);
  if (!m.error.empty()) {
    r.detail = "GET " + models_url + ": " + m.error;
    return r;
  }
  if (m.status != 200) {
    r.detail = "GET " + models_url + ": HTTP " + std::to_string(m.status) +
               " (expected 200 and an OpenAI model list; is this a vLLM/OpenAI-compatible server?)";
    return r;
  }
  std::vector<std::string> ids;
  std::string error;
  if (!ModelIds(m.body, &ids, &error)) {
    r.detail =
        "GET " + models_url + ": malformed model list (" + error + "): '" + Snippet(m.body) + "'";
    return r;
  }
  for (const auto& id : ids) r.model_listed = r.model_listed || id == served_name;
  if (!r.model_listed) {
    std::string list;
    for (const auto& id : ids) list += (list.empty() ? "" : ", ") + id;
    r.detail = "/v1/models lists [" + list + "], not '" + served_name +
               "' (another server on this port, or a different --served-model-name?)";
    return r;
  }
  r.healthy = true;
  return r;
}

}  // namespace berth
