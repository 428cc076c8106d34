// Fronts (desired.h FrontDecl): the HAProxy configuration of each fronted port, and the steps a
// switch behind a front takes instead of closing the port: write the configuration (reloaded
// seamlessly), route the front to a backend (or to its hold), drain the old backend, turn the
// readiness path. Pure: the planner's; the executor runs them through providers/front.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/desired.h"
#include "core/front.h"
#include "core/observed.h"
#include "core/plan.h"

namespace berth {

/// The server of every front that answers nobody: a request routed to it waits (HAProxy
/// retries) until a real backend is routed to, or the front's hold bound passes.
inline constexpr std::string_view kHoldServer = kFrontHoldServer;
/// The first line of every configuration berth writes names the server it routes to, so that
/// the next plan knows what served when it was written: "# berth-front-active: NAME".
inline constexpr std::string_view kActiveLine = kFrontActiveLine;

/// The front of `port` with every service of the manifest behind it as a backend (by name),
/// routing to `active` (a backend's name, or kHoldServer), and its paths in host.front_dir. A
/// front that routes by model (FrontDecl::route_by_model) serves every running service on
/// its port by its served name instead, and `active` is not used.
FrontSpec FrontOf(const Desired& d, int port, const std::string& active);
/// The configuration file berth writes for it: the active line, then the HAProxy config; a
/// comment saying why when HAProxy's configuration cannot be rendered (the plan then has a
/// problem: FrontProblem).
std::string FrontConfigText(const FrontSpec& spec);
/// Why the configuration of `spec` cannot be rendered; "" when it can.
std::string FrontProblem(const FrontSpec& spec);
std::string FrontConfigPath(const HostSpec& host, int port);  // <front_dir>/<port>.cfg
std::string FrontSocketPath(const HostSpec& host, int port);  // <front_dir>/<port>.sock

/// The server the front of `port` routes to now, as the configuration berth last wrote says,
/// when that service is still a backend of it; kHoldServer otherwise (no file, a file that
/// names none, a service the manifest dropped).
std::string ActiveNow(const Desired& d, const Observed& o, int port);
/// The server it must route to once the plan is done: the backend wanted running on `port`,
/// else kHoldServer.
std::string ActiveWanted(const Desired& d, int port);

/// The HAProxy the front of `port` runs (its service's command), which checks its configuration.
std::string FrontHaproxy(const Desired& d, int port);
/// kWriteFront: write the configuration text (unit_content) to its file (front_config) once
/// `haproxy` (FrontHaproxy) takes it, and when `reload` (the front runs), reload the front
/// seamlessly through its master socket (a refused reload puts the old file back).
Action WriteFrontAction(const Desired& d, const FrontSpec& spec, const std::string& why,
                        bool reload);
/// kRoute: the front of `spec.port` sends new requests to `server` (a backend, or kHoldServer);
/// every other server drains (its requests in flight finish).
Action RouteAction(const HostSpec& host, const FrontSpec& spec, const std::string& server,
                   const std::string& why);
/// kDrain: wait until the front has no request in flight on `server`, at most the front's
/// drain bound (then berth goes on: the stop that follows ends them).
Action DrainAction(const HostSpec& host, const FrontSpec& spec, const FrontDecl& decl,
                   const std::string& server);
/// kReady: the front's readiness path answers 200 (`ready`) or 503; turning it 503 waits the
/// front's ready lead, so that an outside load balancer moves traffic away first.
Action ReadyAction(const HostSpec& host, const FrontSpec& spec, const FrontDecl& decl, bool ready);

}  // namespace berth
