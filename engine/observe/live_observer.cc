#include "engine/observe/live_observer.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "engine/core/hf_cache.h"
#include "providers/host/ports.h"
#include "providers/hub/hub_api.h"
#include "providers/store/store_scan.h"
#include "providers/systemd/observe_units.h"

namespace berth {

namespace {

bool EnvTrue(const char* name) {
  const char* v = std::getenv(name);
  std::string s = v ? v : "";
  return s == "1" || s == "ON" || s == "YES" || s == "TRUE" || s == "on" || s == "yes" ||
         s == "true";
}

}  // namespace

namespace {

bool CompleteInStore(const Observed& o, const std::string& repo_id, const std::string& commit) {
  const ObservedRepo* repo = o.FindRepo(repo_id);
  if (repo)
    for (const auto& r : repo->revisions)
      if (r.commit == commit && r.complete) return true;
  return false;
}

}  // namespace

void LiveObserver::AskHub(const Desired& desired, Observed* o) {
  if (opt_.offline || EnvTrue("HF_HUB_OFFLINE")) return;
  HubHttp http(opt_.hub);
  auto ask = [&](const std::string& name, const ModelSpec& m, const std::string& revision) {
    auto snap = ResolveSnapshot(http, m.repo_id, revision);
    if (!snap.ok()) {
      o->warnings.push_back("model/" + name + ": " + snap.status().message());
      return std::string();
    }
    HubInfo info;
    info.repo_id = m.repo_id;
    info.revision = revision;
    info.commit = snap->commit;
    for (const auto& f : snap->files) info.files.push_back({f.path, f.size});
    o->hub.push_back(std::move(info));
    return snap->commit;
  };
  for (const auto& [name, m] : desired.models) {
    // A commit already complete in the store needs no question.
    if (IsCommit(m.revision) && CompleteInStore(*o, m.repo_id, m.revision)) continue;
    std::string upstream = ask(name, m, m.revision);
    // Pinned behind upstream (berth.lock): what the plan needs is the pinned commit's listing,
    // unless that commit is already complete here. Upstream's answer only shows that it moved.
    const LockEntry* pin = desired.PinFor(m);
    if (pin && !upstream.empty() && upstream != pin->commit &&
        !CompleteInStore(*o, m.repo_id, pin->commit))
      ask(name, m, pin->commit);
  }
}

Result<Observed> LiveObserver::Observe(const Desired& desired) {
  Observed o;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) o.hostname = host;
  std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  o.observed_at = when;

  std::string store = desired.host.store.empty() ? DefaultStorePath() : desired.host.store;
  auto scanned = ScanStore(store);
  if (!scanned.ok()) return scanned.status().WithContext("observing the model store " + store);
  o.store = std::move(scanned).value();
  o.store.path = store;

  std::vector<std::string> names;
  for (const auto& [name, s] : desired.services) names.push_back(s.UnitName());
  if (opt_.systemd) {
    auto units = ObserveUnits(*opt_.systemd, *opt_.unit_files, names);
    if (!units.ok()) return units.status().WithContext("observing systemd units");
    o.units = std::move(units).value();
    // Decided now, with the moment it was seen: a saved observation keeps what was seen.
    MarkCrashLoops(&o.units, static_cast<uint64_t>(now) * 1000000);
  } else {
    o.units_known = false;
    o.warnings.push_back("systemd units not observed: " + opt_.systemd_error);
  }

  auto ports = ObserveListeningPorts(opt_.proc_root);
  if (ports.ok()) {
    o.ports = std::move(ports).value();
  } else {
    o.ports_known = false;
  }
  AskHub(desired, &o);
  GpuProbeOptions gpu = opt_.gpu;
  gpu.proc_root = opt_.proc_root;
  ApplyGpuObservation(ObserveGpus(gpu), &o);
  return o;
}

}  // namespace berth
