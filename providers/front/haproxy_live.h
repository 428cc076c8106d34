// The real fronts, which the composition root (engine/cli/live_host.cc) binds to the front
// seam (FrontConnector, FrontReloader): HAProxy's admin socket, its requests in flight counted in
// every worker, and its seamless reload through the master socket.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "providers/front/haproxy_admin.h"

namespace berth {

/// HaproxyAdmin on `socket`; with a `master` socket, its Sessions() count every worker of the
/// front (`show proc`, then `@!PID show stat` each): the current one and those a reload left
/// finishing their streams, which the new worker's counters miss.
std::unique_ptr<FrontControl> ConnectHaproxy(const std::string& socket, const std::string& master);

/// `reload` on HAProxy's master CLI, then waits (at most `timeout`, on `clock`) until a worker
/// with another pid answers `show info` on the admin socket: the new configuration serves.
Status ReloadHaproxy(const std::string& master, const std::string& admin, Clock& clock,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace berth
