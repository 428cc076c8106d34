#include "providers/health/health_probe.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/untrusted_text.h"

namespace berth {
namespace {

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

HealthResult CurlHealthProbe::Probe(const std::string& host, int port, const std::string& path,
                                    const std::string& served_name) {
  HealthResult r;
  std::string health_url =
      LoopbackUrl(host, port, (path.empty() || path[0] != '/' ? "/" : "") + path);
  LoopbackAnswer h = LoopbackRequest("GET", health_url, "", options_);
  r.health_status = static_cast<int>(h.status);
  if (h.status == 0) {
    r.detail = h.error;
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
  std::string models_url = LoopbackUrl(host, port, "/v1/models");
  LoopbackAnswer m = LoopbackRequest("GET", models_url, "", options_);
  if (!m.error.empty()) {
    r.detail = m.error;
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
