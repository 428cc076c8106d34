// The front's admin seam: route, hold, drain and read the counters of the HAProxy that holds a
// public port (core/front.h, planners/front_render.h names its proxies and servers).
// HaproxyAdmin speaks HAProxy's stats socket, one command per connection; its answers are
// untrusted text, read bounded, parsed without exceptions.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/front.h"
#include "core/status.h"

namespace berth {

/// One server of the front's backend, from `show stat`.
struct FrontServerStats {
  std::string name;
  /// HAProxy's status column: "no check" (ready, unchecked), "DRAIN", "MAINT", ...
  std::string status;
  int64_t current_sessions = 0;  // scur
  int64_t total_sessions = 0;    // stot
  int64_t responses_5xx = 0;     // hrsp_5xx
  int64_t retries = 0;           // wretr
  int64_t redispatches = 0;      // wredis
  int64_t queued = 0;            // qcur
};

/// The front's counters from `show stat`.
struct FrontStats {
  int64_t requests = 0;          // the public frontend's req_tot
  int64_t responses_5xx = 0;     // the public frontend's hrsp_5xx (503s past the hold bound too)
  int64_t current_sessions = 0;  // the public frontend's scur
  int64_t retries = 0;           // the backend's wretr
  int64_t redispatches = 0;      // the backend's wredis
  int64_t queued = 0;            // the backend's qcur
  /// The backend's servers, model servers and `hold`, in HAProxy's order.
  std::vector<FrontServerStats> servers;
  /// A routed front's model servers (`route: model`), as "model-NAME/SERVER"
  /// (kRoutedBackendPrefix), its backends' `hold` left out, in HAProxy's order.
  std::vector<std::string> routed;

  /// The server named `name`, or nullptr.
  const FrontServerStats* Server(std::string_view name) const;
};

/// `show stat`'s CSV, for the proxies named in planners/front_render.h. Columns are found by
/// the header's names; an empty number is 0. Never throws: a missing header or column, a
/// row shorter than the header (a cut answer) or a number that is not one give
/// InvalidArgument naming the line.
Result<FrontStats> ParseShowStat(std::string_view csv);

/// The configuration file `file_text` of a front as what the running front serves (`running`,
/// its `show stat`): unchanged when the two agree; else with a last line saying what runs
/// ("# berth: the running front ..."), so that it differs from every configuration berth renders
/// and the plan writes and reloads it; and when only the server routed to differs, with its
/// first line (kFrontActiveLine) naming the one the running front routes to (a rollback routed
/// back at run time, a route a kill cut short), so that the plan starts from what serves. A
/// routed front's file is compared by its model backends' servers (FrontStats::routed).
std::string FrontAsRunning(const std::string& file_text, const FrontStats& running);

/// What berth does to the front during a switch.
class FrontControl {
 public:
  virtual ~FrontControl() = default;
  /// `server` ready, then every other server of the backend (`hold` too) in maintenance: new
  /// requests go to `server` (held ones within a hold round); streams open elsewhere go on.
  virtual Status Route(const std::string& server) = 0;
  /// The hold server ready, then every other ready server draining: new requests are held
  /// (for the spec's hold_ms at most), open streams finish.
  virtual Status Hold() = 0;
  /// `server` draining: it takes no new request; its open streams go on.
  virtual Status Drain(const std::string& server) = 0;
  /// The streams `server` carries now (scur).
  virtual Result<int64_t> Sessions(const std::string& server) = 0;
  /// What the ready path answers: 200 (true) or 503 (false, draining).
  virtual Status SetReady(bool ready) = 0;
  virtual Result<FrontStats> Stats() = 0;
};

/// The front seam as the executor gets it (ExecutorDeps::connect_front, reload_front), bound by
/// the composition root: HAProxy in berth (providers/front/haproxy_live.h), fakes in tests.
/// The front whose admin socket is `socket` (`master`: its master socket, "" when unknown).
using FrontConnector = std::function<std::unique_ptr<FrontControl>(const std::string& socket,
                                                                   const std::string& master)>;
/// Reloads the front of the master socket `master` seamlessly and returns once the new worker
/// answers on `admin`, waiting on `clock` (the pass's: a signal ends the wait).
using FrontReloader =
    std::function<Status(const std::string& master, const std::string& admin, Clock& clock)>;

struct HaproxyAdminOptions {
  /// The admin (stats) socket, FrontSpec::admin_socket (required).
  std::string socket;
  /// The longest one command may take, connect to last byte (default 5 s).
  std::chrono::milliseconds timeout{5000};
  /// The longest answer read (default 1 MiB); a longer one is an error.
  size_t max_answer_bytes = 1 << 20;
};

/// One command on HAProxy's unix CLI socket `options.socket`, the whole answer (bounded,
/// within the timeout). The command may hold no newline or ';'.
Result<std::string> HaproxyCommand(const HaproxyAdminOptions& options, const std::string& command);

/// FrontControl over HAProxy's stats socket. Never throws; every error names the socket and
/// the command.
class HaproxyAdmin : public FrontControl {
 public:
  explicit HaproxyAdmin(HaproxyAdminOptions options) : options_(std::move(options)) {}

  Status Route(const std::string& server) override;
  Status Hold() override;
  Status Drain(const std::string& server) override;
  Result<int64_t> Sessions(const std::string& server) override;
  Status SetReady(bool ready) override;
  Result<FrontStats> Stats() override;

  /// One CLI command (no newline or ';' in it), its whole answer.
  Result<std::string> Command(const std::string& command) {
    return HaproxyCommand(options_, command);
  }

 private:
  Status SetState(const std::string& backend, const std::string& server, const char* state);

  HaproxyAdminOptions options_;
};

/// HAProxy's master CLI (FrontSpec::master_socket): seamless reloads, confirmed.
///
/// Verified on 2.6.12: at start and at each reload the master re-executes itself; while it
/// does, its CLI refuses connections and SIGUSR2 is ignored, so a reload asked for then (by
/// the CLI or by `systemctl reload`'s SIGUSR2) is lost without a word. Reload() therefore
/// reads the master's reload counter (`show proc`), asks, and waits for the counter to move,
/// asking again when it does not.
class HaproxyMaster {
 public:
  explicit HaproxyMaster(HaproxyAdminOptions options) : options_(std::move(options)) {}
  struct Reloads {
    int64_t done = 0;    // reloads the master made
    int64_t failed = 0;  // of them, reloads whose new configuration did not load
  };
  /// The master line of `show proc`.
  Result<Reloads> Count();
  /// Reloads and waits (polling every 100 ms on `clock`) until the master counts it, at most
  /// `timeout`. A reload that the master counts as failed (a configuration that does not load:
  /// the old worker keeps serving) is FailedPrecondition.
  Status Reload(Clock& clock, std::chrono::milliseconds timeout);

 private:
  HaproxyAdminOptions options_;
};

/// `show proc`'s master line: "PID master RELOADS [failed: N] UPTIME VERSION".
Result<HaproxyMaster::Reloads> ParseShowProc(std::string_view text);

/// Polls `front` every `interval` until `server` carries no stream (Ok), or `timeout` passes
/// (Unavailable saying how many are left). A failed read of the counters ends the wait with it.
Status WaitForNoSessions(FrontControl& front, const std::string& server, Clock& clock,
                         std::chrono::milliseconds timeout,
                         std::chrono::milliseconds interval = std::chrono::milliseconds(500));

}  // namespace berth
