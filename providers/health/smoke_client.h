// The smoke gate's request: one completion (or chat) request to a model server that must
// answer with non-empty text. A gate after the health gate (see planners/gates.h).
#pragma once

#include <cstdint>
#include <string>

namespace berth {

struct SmokeRequest {
  std::string api = "completions";  // "completions" or "chat"
  std::string model;                // the served model name
  std::string prompt;
  int max_tokens = 16;
  uint64_t timeout_ms = 60000;  // the whole request, connect to last byte
};

/// The outcome of one request. Never an error: a server that does not answer fails the gate.
struct SmokeResult {
  bool ok = false;      // HTTP 200 and non-empty text
  int http_status = 0;  // 0 if no answer
  std::string text;     // what the model returned (cut to 200 characters)
  std::string detail;   // why not ok, for the operator: what came back
  uint64_t elapsed_ms = 0;
};

class SmokeClient {
 public:
  virtual ~SmokeClient() = default;
  /// POST http://<host>:<port>/v1/completions (or /v1/chat/completions) with the prompt and
  /// max_tokens, not streamed; ok when it answers 200 and choices[0] has non-blank text
  /// (text, or message.content for chat). Safe to call from several threads.
  virtual SmokeResult Send(const std::string& host, int port, const SmokeRequest& request) = 0;
};

struct CurlSmokeClientOptions {
  long connect_timeout_ms = 2000;           // to establish the TCP connection
  size_t max_body_bytes = size_t{1} << 20;  // a longer answer fails the gate as malformed
};

/// The real one: a LoopbackRequest within the request's timeout.
class CurlSmokeClient : public SmokeClient {
 public:
  explicit CurlSmokeClient(CurlSmokeClientOptions options = {}) : options_(options) {}
  SmokeResult Send(const std::string& host, int port, const SmokeRequest& request) override;

 private:
  CurlSmokeClientOptions options_;
};

/// The text of an OpenAI completion or chat answer (choices[0].text or .message.content), or
/// false with `error` saying what is malformed. Public for tests.
bool SmokeAnswerText(const std::string& body, const std::string& api, std::string* text,
                     std::string* error);

}  // namespace berth
