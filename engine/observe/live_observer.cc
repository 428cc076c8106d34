#include "engine/observe/live_observer.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "providers/host/ports.h"
#include "providers/store/store_scan.h"
#include "providers/systemd/observe_units.h"

namespace berth {

std::string DefaultStorePath() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HF_HOME"); h && *h) return std::string(h) + "/hub";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.cache/huggingface/hub";
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
  auto units = ObserveUnits(*opt_.systemd, *opt_.unit_files, names);
  if (!units.ok()) return units.status().WithContext("observing systemd units");
  o.units = std::move(units).value();

  auto ports = ObserveListeningPorts(opt_.proc_root);
  if (ports.ok()) {
    o.ports = std::move(ports).value();
  } else {
    o.ports_known = false;
  }
  // GPUs: NVML observation is not part of this build; the plan says its GPU checks are skipped.
  o.gpus_known = false;
  o.gpu_error = "GPU observation (NVML) is not available in this berth build";
  return o;
}

}  // namespace berth
