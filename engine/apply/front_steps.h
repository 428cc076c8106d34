// The front steps of a plan (planners/fronts.h): write a front's configuration and reload it
// seamlessly, route it to a backend or hold, wait for a backend to drain, turn its readiness
// path. Run by the executor through the front seam (FrontConnector, FrontReloader:
// providers/front/haproxy_admin.h), which a plan with front steps needs.
#pragma once

#include <functional>
#include <string>

#include "core/clock.h"
#include "core/plan.h"
#include "core/status.h"
#include "providers/front/haproxy_admin.h"
#include "providers/host/command_runner.h"

namespace berth {

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
  Status Route(const std::string& socket, const std::string& master, int port,
               const std::string& server);
  /// A front step without the front seam bound: an error naming the front.
  static Status NoSeam(const FrontStep& a);
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
