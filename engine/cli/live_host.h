// The live host's seams, connected once per pass: systemd over D-Bus, the journal, the unit
// directory, the health probe, the model store, and the observer that joins them with the
// store, ports, GPUs and the Hub. The CLI hands LiveReconcilerDeps to the Reconciler.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/desired.h"
#include "core/observed.h"
#include "core/status.h"
#include "engine/apply/model_store.h"
#include "engine/apply/reconciler.h"
#include "providers/health/health_probe.h"
#include "providers/health/smoke_client.h"
#include "providers/health/standby_client.h"
#include "providers/host/command_runner.h"
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

class LiveHost {
 public:
  explicit LiveHost(HostAccess access) : access_(std::move(access)) {}
  /// Binds the seams to `desired` (its unit directory and store) and connects to systemd. A
  /// host without systemd can still be observed: the seams then say why in systemd_error.
  Result<HostSeams> Connect(const Desired& desired);

 private:
  HostAccess access_;
  std::unique_ptr<SdJournalReader> journal_;
  std::unique_ptr<SystemdManager> systemd_;
  std::unique_ptr<UnitFileStore> unit_files_;
  std::unique_ptr<HostObserver> observer_;
  std::unique_ptr<CurlHealthProbe> health_;
  CurlSmokeClient smoke_;
  CurlStandbyClient standby_;
  PosixCommandRunner commands_;
  std::unique_ptr<HubModelStore> models_;
};

/// The Reconciler's collaborators for this host: `host` connects, gethostname() names it, the
/// real clock (`clock` null) or the one given.
ReconcilerDeps LiveReconcilerDeps(LiveHost* host, Reporter* reporter, Clock* clock = nullptr);

/// This machine's host name.
std::string LocalHostname();

/// The folder of berth's engine-check programs, found from this process's executable
/// (/proc/self/exe): <its folder>/engine-check/ (a build tree), else
/// <its folder>/../libexec/berth/engine-check/ (an install); "" when neither holds
/// vllm_check.py (PlanOptions::engine_check_dir).
std::string FindEngineCheckDir();

/// This process's executable (/proc/self/exe) when it is berth (its file is named berth): what
/// the units of on-demand services run (PlanOptions::berth_executable); nullopt in another
/// program (a test binary planning in-process), which leaves /usr/bin/berth.
std::optional<std::string> BerthExecutable();

}  // namespace berth
