// vLLM's sleep-mode routes: HTTP statuses become operator-facing words here.
#include "providers/health/standby_client.h"

#include <nlohmann/json.hpp>

#include "core/untrusted_text.h"
#include "providers/http/loopback.h"

namespace berth {
namespace {

// The body of a 200 answer to `method` `url`, or why there is none, in words.
Result<std::string> Answer200(const std::string& method, const std::string& url,
                              uint64_t timeout_ms, const CurlStandbyClientOptions& o) {
  LoopbackAnswer a = LoopbackRequest(
      method, url, "", {o.connect_timeout_ms, static_cast<long>(timeout_ms), o.max_body_bytes});
  if (!a.error.empty()) return Status::Unavailable(a.error);
  if (a.status == 200) return a.body;
  std::string why = method + " " + url + ": HTTP " + std::to_string(a.status) + " ('" +
                    Excerpt(a.body, 200) + "')";
  if (a.status == 404)
    why +=
        ": the server has no sleep-mode routes (vLLM serves them only with "
        "VLLM_SERVER_DEV_MODE=1, which berth renders for standby: sleep)";
  return Status::Unavailable(why);
}

}  // namespace

Result<bool> ParseIsSleeping(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("not JSON: '" + Excerpt(body, 200) + "'");
  if (!j.is_object() || !j.contains("is_sleeping") || !j["is_sleeping"].is_boolean())
    return Status::InvalidArgument("no boolean \"is_sleeping\": '" + Excerpt(body, 200) + "'");
  return j["is_sleeping"].get<bool>();
}

Status CurlStandbyClient::Sleep(const std::string& host, int port, int level, uint64_t timeout_ms) {
  const std::string url = LoopbackUrl(host, port, "/sleep?level=" + std::to_string(level));
  return Answer200("POST", url, timeout_ms, options_).status();
}

Status CurlStandbyClient::WakeUp(const std::string& host, int port, uint64_t timeout_ms) {
  return Answer200("POST", LoopbackUrl(host, port, "/wake_up"), timeout_ms, options_).status();
}

Result<bool> CurlStandbyClient::IsSleeping(const std::string& host, int port, uint64_t timeout_ms) {
  const std::string url = LoopbackUrl(host, port, "/is_sleeping");
  Result<std::string> body = Answer200("GET", url, timeout_ms, options_);
  if (!body.ok()) return body.status();
  Result<bool> asleep = ParseIsSleeping(*body);
  if (!asleep.ok()) return Status::Unavailable("GET " + url + ": " + asleep.status().message());
  return asleep;
}

}  // namespace berth
