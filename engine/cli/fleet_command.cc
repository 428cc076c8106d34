// berth fleet status: what every host of the manifest's fleet reported to etcd.
#include "core/clock.h"
#include "core/untrusted_text.h"
#include "engine/cli/commands.h"
#include "engine/fleet/fleet_turn.h"
#include "engine/output/fleet_view.h"
#include "manifests/loader.h"

namespace berth {

int RunFleetStatus(const std::string& manifest_path, const std::string& format, std::ostream& out,
                   std::ostream& err) {
  if (format != "text" && format != "json") {
    err << "berth fleet status: unknown output format '" << format << "' (use text or json)\n";
    return kExitError;
  }
  LoadResult loaded = LoadManifests(manifest_path);
  if (!loaded.ok()) {
    for (const auto& d : loaded.diagnostics) err << d.ToString() << "\n";
    err << "berth fleet status: " << manifest_path << " is not a valid manifest\n";
    return kExitError;
  }
  const FleetSpec& fleet = loaded.desired.fleet;
  if (!fleet.enabled()) {
    err << "berth fleet status: " << manifest_path
        << " has no fleet: section; this host acts alone (docs/manifest.md, fleet)\n";
    return kExitError;
  }
  auto etcd = ConnectFleetEtcd(fleet);
  if (!etcd.ok()) {
    err << "berth fleet status: " << etcd.status().message() << "\n";
    return kExitError;
  }
  std::vector<std::string> warnings;
  auto reports = ReadFleetReports(**etcd, fleet, &warnings);
  auto slot_kvs = (*etcd)->Range(FleetKey(fleet, "slots/"), 0, kMaxFleetSlotBytes);
  if (!reports.ok() || !slot_kvs.ok()) {
    err << "berth fleet status: fleet " << fleet.name << ": etcd cannot be reached: "
        << (reports.ok() ? slot_kvs.status() : reports.status()).message() << "\n";
    return kExitError;
  }
  std::vector<FleetSlotView> slots;
  for (const EtcdKv& kv : *slot_kvs) {
    if (kv.too_large) {
      warnings.push_back("the fleet slot at " + EscapeControl(kv.key) +
                         " is larger than 4 KiB, which no berth writes: it is left out");
      continue;
    }
    auto s = FleetSlotFromJson(kv.value, kv.key);
    if (s.ok())
      slots.push_back({EscapeControl(kv.key), *s});
    else
      warnings.push_back(s.status().message());
  }
  FleetView v =
      MakeFleetView(fleet, loaded.desired.digest, std::move(reports).value(), std::move(slots),
                    std::move(warnings), static_cast<int64_t>(RealClock().UnixNow()));
  out << (format == "json" ? FleetViewJson(v) : FleetViewText(v));
  return kExitOk;
}

int RunFleetForget(const std::string& manifest_path, const std::string& host, std::ostream& out,
                   std::ostream& err) {
  LoadResult loaded = LoadManifests(manifest_path);
  if (!loaded.ok()) {
    for (const auto& d : loaded.diagnostics) err << d.ToString() << "\n";
    err << "berth fleet forget: " << manifest_path << " is not a valid manifest\n";
    return kExitError;
  }
  const FleetSpec& fleet = loaded.desired.fleet;
  if (!fleet.enabled()) {
    err << "berth fleet forget: " << manifest_path << " has no fleet: section\n";
    return kExitError;
  }
  auto etcd = ConnectFleetEtcd(fleet);
  Status s = etcd.ok() ? ForgetFleetHost(**etcd, fleet, host) : etcd.status();
  if (!s.ok()) {
    err << "berth fleet forget: " << s.message() << "; nothing was deleted\n";
    return kExitError;
  }
  out << "fleet " << fleet.name << ": forgot " << host
      << "; the waves no longer wait for it (it reports again on its next apply)\n";
  return kExitOk;
}

}  // namespace berth
