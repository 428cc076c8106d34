// Which systemd unit owns a process, read from its cgroup membership.
#pragma once

#include <string>
#include <string_view>

namespace berth {

/// The system service unit owning the cgroup `path` (the part after "0::" in /proc/PID/cgroup),
/// or "" if none. Rule: the innermost component ending in ".service" whose parent component is a
/// "*.slice" (units live directly under slices; deeper ".service" names are sub-cgroups of a
/// unit). The walk stops at "user@UID.service": a user manager's own units are reported as that
/// system unit. Scopes (sessions, containers) count as none. Leading prefixes from a cgroup
/// namespace (a sandboxed systemd seen from the host: "/sdsandbox.t1/system.slice/x.service")
/// are skipped by the same rule. Examples:
///   "/system.slice/vllm-x.service/payload"                 -> "vllm-x.service"
///   "/user.slice/user-0.slice/session-3.scope"             -> ""
///   "/user.slice/user-1000.slice/user@1000.service/app.slice/a.service" -> "user@1000.service"
std::string UnitOfCgroupPath(std::string_view path);

/// The system service unit owning process `pid`, from `proc_root`/PID/cgroup: the cgroup v2
/// line ("0::PATH"), else (v1 and hybrid hosts) the "N:name=systemd:PATH" line. "" if the process
/// is gone, unreadable, or not in a service.
std::string UnitOfPid(int pid, const std::string& proc_root = "/proc");

}  // namespace berth
