// The smoke request over libcurl: CURLcode becomes an operator-facing detail here.
#include "providers/health/smoke_client.h"

#include <curl/curl.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/untrusted_text.h"
#include "providers/http/curl_easy.h"
#include "providers/http/curl_global.h"

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

CurlSmokeClient::CurlSmokeClient(CurlSmokeClientOptions options) : options_(options) {
  CurlGlobalInit();
}

SmokeResult CurlSmokeClient::Send(const std::string& host, int port, const SmokeRequest& req) {
  SmokeResult r;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) {
    r.detail = "cannot start an HTTP client (curl_easy_init failed: out of memory?)";
    return r;
  }
  bool chat = req.api == "chat";
  std::string url = "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                    ":" + std::to_string(port) +
                    (chat ? "/v1/chat/completions" : "/v1/completions");
  nlohmann::json payload = {
      {"model", req.model}, {"max_tokens", req.max_tokens}, {"stream", false}};
  if (chat)
    payload["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", req.prompt}}});
  else
    payload["prompt"] = req.prompt;
  std::string post = DumpJson(payload);
  BoundedBody body;
  body.limit = options_.max_body_bytes;
  char errbuf[CURL_ERROR_SIZE] = {0};
  struct curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  RestrictToHttp(c);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, options_.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout_ms));
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, post.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(post.size()));
  WriteInto(c, &body);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "berth-smoke/" BERTH_VERSION);
  auto t0 = std::chrono::steady_clock::now();
  CURLcode code = curl_easy_perform(c);
  r.elapsed_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  curl_slist_free_all(headers);
  r.http_status = static_cast<int>(ResponseStatus(c));
  const std::string where = "POST " + url;
  if (body.truncated) {
    r.detail = where + ": the answer is longer than " + std::to_string(body.limit) + " bytes";
    return r;
  }
  if (code != CURLE_OK) {
    std::string why = code == CURLE_OPERATION_TIMEDOUT
                          ? "no complete answer within " + std::to_string(req.timeout_ms) + " ms"
                      : code == CURLE_COULDNT_CONNECT
                          ? std::string("connection refused (nothing listens on port ") +
                                std::to_string(port) + ")"
                          : std::string(errbuf[0] ? errbuf : curl_easy_strerror(code));
    r.detail = where + ": " + why;
    return r;
  }
  if (r.http_status != 200) {
    r.detail = where + ": HTTP " + std::to_string(r.http_status) + " (expected 200): '" +
               Snippet(body.text) + "'";
    return r;
  }
  std::string text, error;
  if (!SmokeAnswerText(body.text, req.api, &text, &error)) {
    r.detail = where + ": a malformed answer (" + error + "): '" + Snippet(body.text) + "'";
    return r;
  }
  r.text = Snippet(text);
  if (Blank(text)) {
    r.detail = where + ": HTTP 200 with empty text ('" + Snippet(body.text) + "')";
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace berth
