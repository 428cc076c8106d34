// Who listens on which TCP port: the kernel's socket tables joined with each process's fds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/observed.h"
#include "core/status.h"

namespace berth {

/// Every TCP socket in LISTEN state (IPv4 and IPv6) of this network namespace, with the
/// processes that hold it: one entry per (port, address, pid), sorted by port, address, pid.
/// A socket no readable process holds (another user's, when not root) is still reported, with
/// pid 0 and empty process and unit: the port is taken all the same. Reads
/// `proc_root`/net/tcp{,6}, then one pass over `proc_root`/[0-9]*/fd (readlink only), comm and
/// cgroup of the owners. Processes that vanish or cannot be read are skipped. Error only when
/// neither socket table can be read.
Result<std::vector<ListeningPort>> ObserveListeningPorts(const std::string& proc_root = "/proc");

/// "0100007F" (net/tcp) -> "127.0.0.1"; 32 hex digits (net/tcp6) -> "::1" etc. "" if malformed.
std::string DecodeProcNetAddress(std::string_view hex);

}  // namespace berth
