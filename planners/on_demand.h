// On-demand services (docs/operating.md "On-demand services"): the socket and proxy units
// berth renders beside the model server's, and how a plan treats them. Pure.
//
// What systemd 252 does with these parts, and why the units are as they are:
//  - The socket (Accept=no) holds the public port; its first connection starts the proxy unit,
//    the connection waiting in the backlog meanwhile.
//  - The proxy Wants= and is After= the model server, whose ExecStartPost= waits for its health:
//    the proxy's ExecStart runs once the server is healthy, or has failed. It is not Requires=:
//    a proxy whose start fails for a dependency leaves the connection in the backlog, the socket
//    triggers it again at once, and the client waits until the socket hits its trigger limit
//    and fails. So the proxy's ExecStart is `berth __wake-proxy`, which execs
//    systemd-socket-proxyd on the socket when the server answers healthy, and otherwise answers
//    each waiting connection 503 and exits: the next connection starts the server again.
//  - PartOf= the model server: a swap-group member's start stops the other member (Conflicts=),
//    and the stop job reaches that member's proxy, which would else connect to a stopped server.
//  - Swap-group members conflict and are ordered (After= on those whose names sort before):
//    Conflicts= alone runs the stop and the start at once; with an ordering edge systemd runs
//    the stop job first, whichever way the edge points.
//  - The model server has StopWhenUnneeded=yes: once the proxy exits idle
//    (--exit-idle-time), nothing wants it and systemd stops it.
#pragma once

#include <optional>
#include <string>

#include "core/desired.h"
#include "core/status.h"
#include "planners/unit_render.h"

namespace berth {

/// The socket-proxy systemd ships (Debian 12: systemd 252).
inline constexpr const char* kSocketProxyd = "/lib/systemd/systemd-socket-proxyd";

/// Where the model server of on-demand service `s` answers its health path:
/// "http://127.0.0.1:<port><path>".
std::string OnDemandHealthUrl(const ServiceSpec& s);

/// The socket unit of on-demand service `s` (OnDemandSocketName): ListenStream= on its public
/// port and bind, Service= its proxy, WantedBy=sockets.target.
Result<RenderedUnit> RenderOnDemandSocket(const ServiceSpec& s, const RenderContext& ctx);
/// The proxy unit the socket activates (OnDemandProxyName): `berth __wake-proxy` then
/// systemd-socket-proxyd --exit-idle-time=<idle_stop> 127.0.0.1:<server port>.
Result<RenderedUnit> RenderOnDemandProxy(const ServiceSpec& s, const RenderContext& ctx);

/// The units of the other members of `s`'s swap group, in name order (empty: none).
std::vector<std::string> SwapGroupConflicts(const Desired& d, const ServiceSpec& s);

/// The ListenStream= value of a socket on `bind` and `port`: "0.0.0.0:8000", "[::1]:8000".
std::string ListenAddress(const std::string& bind, int port);

/// What a first request to `s` waits, in words: "about 42s (the median of 3 starts berth
/// recorded)", or "no start recorded yet (at most its health timeout, 30m)". `unrecorded`: its
/// server's last start as systemd timed it, when `start_times_ms` lack it (a start a request
/// made, BerthState::UnrecordedStart), counted as the newest: "about 3200ms (its last start,
/// which systemd timed)", "about 4s (the median of 4 starts: 3 berth recorded and the last,
/// which systemd timed)"; the newest BerthState::kStartTimesKept in all.
std::string FirstRequestWait(const ServiceSpec& s, const std::vector<uint64_t>& start_times_ms,
                             std::optional<uint64_t> unrecorded = std::nullopt);

}  // namespace berth

#include "planners/draft.h"
#include "planners/plan_index.h"

namespace berth {

/// The plan of on-demand service `s`'s socket and proxy units: each file written when missing
/// or changed (a unit that is not this state's is a problem), the socket started and enabled
/// (state running), or stopped and disabled (stopped), or both removed (absent). And of its
/// model server, which the plan never starts nor "repairs" when it idles: a running server
/// whose unit changed is stopped (`server_restart`: the next request starts the new one),
/// and a note says whether it is idle, starting or running, its idle stop and what a first
/// request waits. `ctx` renders the units.
void PlanOnDemandUnits(const Desired& d, const PlanIndex& index, const ServiceSpec& s,
                       const RenderContext& ctx, bool server_restart, Draft* draft);

/// The problems of GPU memory should every on-demand service be woken at once, each swap group
/// counted by its largest member, beside the services that run all the time: per GPU of
/// `ledger`, the sum of the claims against its memory. Empty when GPUs are not known.
class HostLedger;
std::vector<Problem> OnDemandGpuProblems(const Desired& d, const HostLedger& ledger);

}  // namespace berth
