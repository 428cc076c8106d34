#include "providers/health/smoke_client.h"

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/untrusted_text.h"
#include "providers/http/loopback.h"

namespace berth {
namespace {

// A server's text on one line, bounded, cut on a character boundary, every control and stray
// byte shown as \xNN: it reaches the journal, state.json and the operator's terminal.
std::string Snippet(const std::string& text) { return Excerpt(text, 200); }

bool Blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

}  // namespace

bool SmokeAnswerText(const std::string& body, const std::string& api, std::string* text,
                     std::string* error) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *error = "not JSON";
    return false;
  }
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
      j["choices"].empty() || !j["choices"][0].is_object()) {
    *error = "no \"choices\" list with an entry";
    return false;
  }
  const nlohmann::json& c = j["choices"][0];
  const nlohmann::json* t = nullptr;
  if (api == "chat") {
    if (c.contains("message") && c["message"].is_object() && c["message"].contains("content"))
      t = &c["message"]["content"];
  } else if (c.contains("text")) {
    t = &c["text"];
  }
  if (t == nullptr || t->is_null()) {
    *text = "";
    return true;  // no text is empty text
  }
  if (!t->is_string()) {
    *error = api == "chat" ? "choices[0].message.content is not a string"
                           : "choices[0].text is not a string";
    return false;
  }
  *text = t->get<std::string>();
  return true;
}

SmokeResult CurlSmokeClient::Send(const std::string& host, int port, const SmokeRequest& req) {
  SmokeResult r;
  bool chat = req.api == "chat";
  std::string url = LoopbackUrl(host, port, chat ? "/v1/chat/completions" : "/v1/completions");
  nlohmann::json payload = {
      {"model", req.model}, {"max_tokens", req.max_tokens}, {"stream", false}};
  if (chat)
    payload["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", req.prompt}}});
  else
    payload["prompt"] = req.prompt;
  LoopbackAnswer a = LoopbackRequest(
      "POST", url, DumpJson(payload),
      {options_.connect_timeout_ms, static_cast<long>(req.timeout_ms), options_.max_body_bytes});
  r.elapsed_ms = a.elapsed_ms;
  r.http_status = static_cast<int>(a.status);
  if (!a.error.empty()) {
    r.detail = a.error;
    return r;
  }
  const std::string where = "POST " + url;
  if (r.http_status != 200) {
    r.detail = where + ": HTTP " + std::to_string(r.http_status) + " (expected 200): '" +
               Snippet(a.body) + "'";
    return r;
  }
  std::string text, error;
  if (!SmokeAnswerText(a.body, req.api, &text, &error)) {
    r.detail = where + ": a malformed answer (" + error + "): '" + Snippet(a.body) + "'";
    return r;
  }
  r.text = Snippet(text);
  if (Blank(text)) {
    r.detail = where + ": HTTP 200 with empty text ('" + Snippet(a.body) + "')";
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace berth
