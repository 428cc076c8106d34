// The live host: the store on disk, systemd's units and berth's unit files, listening ports.
#pragma once

#include <string>

#include "core/clock.h"
#include "core/hf_cache.h"
#include "providers/gpu/gpu_probe.h"
#include "providers/hub/hub_types.h"
#include "providers/observer.h"

namespace berth {

class StandbyClient;
class SystemdManager;
class UnitFileStore;

struct LiveObserverOptions {
  SystemdManager* systemd = nullptr;  // null: units are not observed (systemd_error says why)
  std::string systemd_error;
  UnitFileStore* unit_files = nullptr;  // required: the manifest's host.unit_dir
  std::string proc_root = "/proc";
  /// How to ask the Hub which commit a branch points at and what its files weigh.
  HubOptions hub;
  /// Do not ask the Hub (HF_HUB_OFFLINE=1 sets it too): plans use the store's refs and size:.
  bool offline = false;
  /// The time the Hub's retries may take in all while observing (default 10 s; 0: only
  /// hub.max_attempts bounds them). A Hub that cannot be reached is asked once: the first failed
  /// question ends all of them, and one warning says what was planned from berth.lock and the
  /// store instead.
  long hub_retry_budget_ms = 10000;
  /// Dates the observation (observed_at) and times the Hub's retries; null is RealClock().
  Clock* clock = nullptr;
  /// NVML library and nvidia-smi to observe GPUs with.
  GpuProbeOptions gpu;
  /// Asks the running servers of `standby: sleep` services whether they sleep; null: not asked.
  StandbyClient* standby = nullptr;
};

class LiveObserver : public HostObserver {
 public:
  explicit LiveObserver(LiveObserverOptions options) : opt_(std::move(options)) {}
  Result<Observed> Observe(const Desired& desired) override;

 private:
  void AskHub(const Desired& desired, Observed* o);
  /// Observed::sleeping: each running standby's server asked GET /is_sleeping.
  void AskStandbys(const Desired& desired, Observed* o);
  LiveObserverOptions opt_;
};

// DefaultStorePath(), once declared here, is in core/hf_cache.h (included above so that
// callers keep compiling; include it directly).

}  // namespace berth
