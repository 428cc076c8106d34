// The real SystemdManager over sd-bus. The only place berth includes systemd/sd-bus.h.
#pragma once

#include <memory>
#include <string>

#include "providers/systemd/systemd_manager.h"

namespace berth {

struct SdBusOptions {
  /// D-Bus address; "" = the system bus (honours DBUS_SYSTEM_BUS_ADDRESS).
  std::string address;
  /// Used to add the unit's last log lines to failures; may be null.
  JournalReader* journal = nullptr;
  /// How many journal lines a failure message carries.
  int journal_lines = 15;
};

/// Connects to systemd. Fails with a message that says which bus and what to check.
Result<std::unique_ptr<SystemdManager>> ConnectSystemd(const SdBusOptions& options);

}  // namespace berth
