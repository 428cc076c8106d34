// Naming the processes a GPU probe found: their command name and owning systemd unit, from /proc.
#pragma once

#include <string>
#include <vector>

#include "core/observed.h"

namespace berth {

/// The process's command name from `proc_root`/PID/comm, or "" when it is gone or unreadable.
std::string CommOfPid(int pid, const std::string& proc_root);

/// Fills unit (UnitOfPid) and name (comm, when readable; else the name already there) of every
/// process of every GPU.
void AttributeProcesses(const std::string& proc_root, std::vector<ObservedGpu>* gpus);

}  // namespace berth
