// Health: is a model server up, and does it serve the model berth started it for?
// One HTTP probe over loopback: the service's health path, then the OpenAI model list.
#pragma once

#include <string>

#include "providers/http/loopback.h"

namespace berth {

/// The outcome of one probe. Never an error: an unreachable server is an unhealthy one.
struct HealthResult {
  bool healthy = false;       // health answered 200 and /v1/models lists the served name
  int health_status = 0;      // HTTP status of the health path; 0 if no answer
  bool model_listed = false;  // /v1/models lists the served name in data[].id
  std::string detail;         // why not healthy, for the operator; "" when healthy. E.g.
                              // "GET http://127.0.0.1:8000/health: connection refused (...)"
};

class HealthProbe {
 public:
  virtual ~HealthProbe() = default;
  /// One probe: GET http://<host>:<port><path> must answer 200, then GET
  /// http://<host>:<port>/v1/models must list `served_name` in data[].id. The model list is
  /// asked only when the health path answered 200, and not at all when `served_name` is ""
  /// (a state-only service, whose served name berth does not know). Safe to call from several
  /// threads.
  virtual HealthResult Probe(const std::string& host, int port, const std::string& path,
                             const std::string& served_name) = 0;
};

/// The real probe: one LoopbackRequest per GET, each within `options` (per request).
class CurlHealthProbe : public HealthProbe {
 public:
  explicit CurlHealthProbe(LoopbackLimits options = {}) : options_(options) {}
  HealthResult Probe(const std::string& host, int port, const std::string& path,
                     const std::string& served_name) override;

 private:
  LoopbackLimits options_;
};

}  // namespace berth
