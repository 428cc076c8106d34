#include "engine/apply/live_host.h"

#include "engine/observe/live_observer.h"
#include "providers/systemd/sdbus_manager.h"

namespace berth {

Status LiveHost::Connect(const HostAccess& access, const Desired& desired) {
  journal = std::make_unique<SdJournalReader>(access.journal_dir);
  unit_files = std::make_unique<UnitFileStore>(desired.host.unit_dir);
  nvml_library = access.nvml_library;
  SdBusOptions opts;
  opts.address = access.bus_address;
  opts.journal = journal.get();
  auto mgr = ConnectSystemd(opts);
  if (!mgr.ok()) {
    systemd_error = mgr.status().message();
    return mgr.status();
  }
  systemd = std::move(mgr).value();
  return Status::Ok();
}

Result<Observed> LiveHost::Observe(const Desired& desired, const BerthState& state) {
  LiveObserverOptions o;
  o.systemd = systemd.get();
  o.systemd_error = systemd_error;
  o.unit_files = unit_files.get();
  o.hub = HubOptionsFromEnvironment();
  o.gpu.nvml_library = nvml_library;
  auto observed = LiveObserver(o).Observe(desired);
  if (observed.ok()) observed->state = state;
  return observed;
}

}  // namespace berth
