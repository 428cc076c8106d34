// vLLM's sleep-mode routes over libcurl: CURLcode and HTTP statuses become operator-facing words
// here.
#include "providers/health/standby_client.h"

#include <curl/curl.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "core/untrusted_text.h"
#include "providers/http/curl_easy.h"
#include "providers/http/curl_global.h"

namespace berth {
namespace {

std::string Url(const std::string& host, int port, const std::string& path) {
  return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port) + path;
}

// What an answer other than 200 means for a sleep-mode route, in words.
std::string Refused(long status, const std::string& body) {
  std::string why = "HTTP " + std::to_string(status) + " ('" + Excerpt(body, 200) + "')";
  if (status == 404)
    why +=
        ": the server has no sleep-mode routes (vLLM serves them only with "
        "VLLM_SERVER_DEV_MODE=1, which berth renders for standby: sleep)";
  return why;
}

}  // namespace

Result<bool> ParseIsSleeping(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("not JSON: '" + Excerpt(body, 200) + "'");
  if (!j.is_object() || !j.contains("is_sleeping") || !j["is_sleeping"].is_boolean())
    return Status::InvalidArgument("no boolean \"is_sleeping\": '" + Excerpt(body, 200) + "'");
  return j["is_sleeping"].get<bool>();
}

CurlStandbyClient::CurlStandbyClient(CurlStandbyClientOptions options) : options_(options) {
  CurlGlobalInit();
}

Status CurlStandbyClient::Call(const std::string& method, const std::string& host, int port,
                               const std::string& path, uint64_t timeout_ms, long* http_status,
                               std::string* out) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return Status::Internal("cannot start an HTTP client (curl_easy_init failed)");
  const std::string url = Url(host, port, path);
  BoundedBody body;
  body.limit = options_.max_body_bytes;
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  RestrictToHttp(c);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, options_.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  if (method == "POST") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
  }
  WriteInto(c, &body);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "berth-standby/" BERTH_VERSION);
  CURLcode code = curl_easy_perform(c);
  *http_status = ResponseStatus(c);
  const std::string where = method + " " + url;
  if (body.truncated)
    return Status::Unavailable(where + ": the answer is longer than " + std::to_string(body.limit) +
                               " bytes");
  if (code != CURLE_OK) {
    std::string why =
        code == CURLE_OPERATION_TIMEDOUT
            ? "no complete answer within " + std::to_string(timeout_ms) + " ms"
        : code == CURLE_COULDNT_CONNECT
            ? "connection refused (nothing listens on port " + std::to_string(port) + ")"
            : std::string(errbuf[0] ? errbuf : curl_easy_strerror(code));
    return Status::Unavailable(where + ": " + EscapeLine(why));
  }
  *out = std::move(body.text);
  return Status::Ok();
}

Status CurlStandbyClient::Sleep(const std::string& host, int port, int level, uint64_t timeout_ms) {
  long status = 0;
  std::string body;
  const std::string path = "/sleep?level=" + std::to_string(level);
  BERTH_RETURN_IF_ERROR(Call("POST", host, port, path, timeout_ms, &status, &body));
  if (status != 200)
    return Status::Unavailable("POST " + Url(host, port, path) + ": " + Refused(status, body));
  return Status::Ok();
}

Status CurlStandbyClient::WakeUp(const std::string& host, int port, uint64_t timeout_ms) {
  long status = 0;
  std::string body;
  BERTH_RETURN_IF_ERROR(Call("POST", host, port, "/wake_up", timeout_ms, &status, &body));
  if (status != 200)
    return Status::Unavailable("POST " + Url(host, port, "/wake_up") + ": " +
                               Refused(status, body));
  return Status::Ok();
}

Result<bool> CurlStandbyClient::IsSleeping(const std::string& host, int port, uint64_t timeout_ms) {
  long status = 0;
  std::string body;
  BERTH_RETURN_IF_ERROR(Call("GET", host, port, "/is_sleeping", timeout_ms, &status, &body));
  const std::string where = "GET " + Url(host, port, "/is_sleeping");
  if (status != 200) return Status::Unavailable(where + ": " + Refused(status, body));
  Result<bool> asleep = ParseIsSleeping(body);
  if (!asleep.ok()) return Status::Unavailable(where + ": " + asleep.status().message());
  return asleep;
}

}  // namespace berth
