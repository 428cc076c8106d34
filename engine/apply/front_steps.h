// The front steps of a plan (planners/fronts.h): write a front's configuration and reload it
// seamlessly, route it to a backend or hold, wait for a backend to drain, turn its readiness
// path. Run by the executor through the FrontControl seam (providers/front/haproxy_admin.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/plan.h"
#include "core/status.h"
#include "providers/front/haproxy_admin.h"
#include "providers/host/command_runner.h"

namespace berth {

/// The front whose admin socket is `socket`: HaproxyAdmin in berth, a fake in tests.
using FrontConnector = std::function<std::unique_ptr<FrontControl>(const std::string& socket)>;
/// Reloads the front of the master socket `master` seamlessly and returns once the new worker
/// answers on `admin` (a fake in tests).
using FrontReloader = std::function<Status(const std::string& master, const std::string& admin)>;

/// HaproxyAdmin on `socket`.
std::unique_ptr<FrontControl> ConnectHaproxy(const std::string& socket);
/// `reload` on HAProxy's master CLI, then waits (at most `timeout`) until a worker with another
/// pid answers `show info` on the admin socket: the new configuration serves.
Status ReloadHaproxy(const std::string& master, const std::string& admin,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// The requests in flight on `server` in every worker of the front (through the master CLI's
/// `show proc` and `@!PID show stat`): the current worker and those a reload left finishing.
Result<int64_t> SessionsInEveryWorker(const std::string& master, const std::string& server);

class FrontSteps {
 public:
  /// `say`: a line for the progress of each thing done (null: silent).
  /// `commands`: runs HAProxy's check of a new configuration (null: a PosixCommandRunner).
  FrontSteps(FrontConnector connect, FrontReloader reload, Clock* clock,
             std::function<void(const std::string&)> say, CommandRunner* commands = nullptr)
      : connect_(std::move(connect)),
        reload_(std::move(reload)),
        clock_(clock),
        say_(std::move(say)),
        commands_(commands) {}
  /// One front step (kWriteFront, kRoute, kDrain, kReady).
  Status Run(ActionKind kind, const FrontStep& step);
  /// The undo of a switch behind a front: route it back to `server` (a backend, or "hold").
  Status RouteBack(const FrontStep& front, const std::string& server);

 private:
  Status Write(const FrontStep& a);
  Status Route(const std::string& socket, int port, const std::string& server);
  Status Drain(const FrontStep& a);
  Status Ready(const FrontStep& a);
  void Say(const std::string& line) {
    if (say_) say_(line);
  }

  FrontConnector connect_;
  FrontReloader reload_;
  Clock* clock_;
  std::function<void(const std::string&)> say_;
  CommandRunner* commands_;
};

}  // namespace berth
