// The live host's providers, connected once per command: systemd over D-Bus, the journal, the
// unit directory, and the observer that joins them with the store, ports, GPUs and the Hub.
#pragma once

#include <memory>
#include <string>

#include "engine/core/desired.h"
#include "engine/core/observed.h"
#include "engine/core/status.h"
#include "providers/systemd/journal.h"
#include "providers/systemd/systemd_manager.h"
#include "providers/systemd/unit_files.h"

namespace berth {

/// Where the live host is reached (production defaults; tests point them at a sandbox).
struct HostAccess {
  std::string bus_address;  // "" = the system bus (DBUS_SYSTEM_BUS_ADDRESS is honoured)
  std::string journal_dir;  // "" = the local journal
  std::string nvml_library = "libnvidia-ml.so.1";  // dlopen name or path
  /// berth's records, read by `observe` so a saved observation carries the state serial that
  /// a plan made from it is later checked against; "" = $BERTH_STATE_DIR or /var/lib/berth.
  std::string state_dir;
};

struct LiveHost {
  std::unique_ptr<SdJournalReader> journal;
  std::unique_ptr<SystemdManager> systemd;
  std::unique_ptr<UnitFileStore> unit_files;
  std::string nvml_library;
  std::string systemd_error;  // why systemd is not connected, when it is not

  /// Connects to systemd; on failure the host can still be observed (units unknown).
  Status Connect(const HostAccess& access, const Desired& desired);
  /// Observes what `desired` names (and berth's own units), with berth's `state` records.
  Result<Observed> Observe(const Desired& desired, const BerthState& state = {});
};

}  // namespace berth
