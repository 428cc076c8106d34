// vLLM's sleep mode, as its server serves it (vllm/entrypoints/serve/dev/sleep/api_router.py at
// e7a47b82): POST /sleep?level=N, POST /wake_up, GET /is_sleeping -> {"is_sleeping": bool}. The
// routes exist only with VLLM_SERVER_DEV_MODE=1 (else 404) and sleeping needs
// --enable-sleep-mode (else 500). A `standby: sleep` service's server is asked over loopback or
// behind its front (manifests refuse another bind). The answers are untrusted: bounded, parsed
// strictly, quoted escaped.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace berth {

class StandbyClient {
 public:
  virtual ~StandbyClient() = default;
  /// POST /sleep?level=`level`: Ok once the server answered 200 (vLLM answers when it sleeps).
  virtual Status Sleep(const std::string& host, int port, int level, uint64_t timeout_ms) = 0;
  /// POST /wake_up: Ok once the server answered 200 (once awake).
  virtual Status WakeUp(const std::string& host, int port, uint64_t timeout_ms) = 0;
  /// GET /is_sleeping: what the server says of itself.
  virtual Result<bool> IsSleeping(const std::string& host, int port, uint64_t timeout_ms) = 0;
};

struct CurlStandbyClientOptions {
  long connect_timeout_ms = 2000;
  size_t max_body_bytes = 64 * 1024;  // an answer longer than this is refused as malformed
};

/// The real one: a LoopbackRequest per call.
class CurlStandbyClient : public StandbyClient {
 public:
  explicit CurlStandbyClient(CurlStandbyClientOptions options = {}) : options_(options) {}
  Status Sleep(const std::string& host, int port, int level, uint64_t timeout_ms) override;
  Status WakeUp(const std::string& host, int port, uint64_t timeout_ms) override;
  Result<bool> IsSleeping(const std::string& host, int port, uint64_t timeout_ms) override;

 private:
  CurlStandbyClientOptions options_;
};

/// The value of {"is_sleeping": bool} in `body`, or why the answer is not that. Public for tests.
Result<bool> ParseIsSleeping(const std::string& body);

}  // namespace berth
