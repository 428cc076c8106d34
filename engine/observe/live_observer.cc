#include "engine/observe/live_observer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>

#include "core/front.h"
#include "core/hf_cache.h"
#include "core/read_file.h"
#include "providers/front/haproxy_admin.h"
#include "providers/health/standby_client.h"
#include "providers/host/page_cache.h"
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

namespace {

std::string Short(const std::string& commit) { return commit.substr(0, 7); }

/// What the plan of model `m` goes on without the Hub, in words: berth.lock's pin, the
/// manifest's commit or the store's ref, and whether the store has it complete.
std::string PlannedWithoutHub(const Desired& desired, const std::string& name, const ModelSpec& m,
                              const Observed& o) {
  std::string commit, from;
  if (IsCommit(m.revision)) {
    commit = m.revision;
    from = "the manifest's commit ";
  } else if (const LockEntry* pin = desired.PinFor(m)) {
    commit = pin->commit;
    from = "berth.lock's ";
  } else if (const ObservedRepo* repo = o.FindRepo(m.repo_id)) {
    for (const auto& rev : repo->revisions)
      if (std::find(rev.refs.begin(), rev.refs.end(), m.revision) != rev.refs.end())
        commit = rev.commit;
    from = "the store's " + m.revision + " ";
  }
  std::string out = "model/" + name;
  if (commit.empty()) return out + " unresolved (not pinned in berth.lock, not in the store)";
  out += " at " + from + Short(commit);
  return out + (CompleteInStore(o, m.repo_id, commit) ? " (complete in the store)"
                                                      : " (not complete in the store)");
}

}  // namespace

void LiveObserver::AskHub(const Desired& desired, Observed* o) {
  if (opt_.offline || EnvTrue("HF_HUB_OFFLINE")) return;
  HubOptions hub = opt_.hub;
  if (!hub.clock) hub.clock = opt_.clock;
  if (opt_.hub_retry_budget_ms > 0 &&
      (hub.retry_budget_ms == 0 || hub.retry_budget_ms > opt_.hub_retry_budget_ms))
    hub.retry_budget_ms = opt_.hub_retry_budget_ms;
  HubHttp http(hub);
  // Models planned without the Hub once it could not be reached: said in one warning.
  std::vector<std::string> without_hub;
  auto ask = [&](const std::string& name, const ModelSpec& m, const std::string& revision) {
    if (!http.unreachable().ok()) return std::string();
    auto snap = ResolveSnapshot(http, m.repo_id, revision);
    if (!snap.ok()) {
      if (http.unreachable().ok())  // this model's own problem (no such repo, a gated one)
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
    if (!http.unreachable().ok()) {
      without_hub.push_back(PlannedWithoutHub(desired, name, m, *o));
      continue;
    }
    // Pinned behind upstream (berth.lock): what the plan needs is the pinned commit's listing,
    // unless that commit is already complete here. Upstream's answer only shows that it moved.
    const LockEntry* pin = desired.PinFor(m);
    if (pin && !upstream.empty() && upstream != pin->commit &&
        !CompleteInStore(*o, m.repo_id, pin->commit))
      ask(name, m, pin->commit);
  }
  if (without_hub.empty()) return;
  std::string planned;
  for (const auto& w : without_hub) planned += (planned.empty() ? "" : ", ") + w;
  o->warnings.push_back(http.unreachable().message() +
                        "; planned without it, from berth.lock and the store: " + planned +
                        ". Check the network and HF_ENDPOINT; on a host that cannot reach the "
                        "Hub, set HF_HUB_OFFLINE=1 and pin the models with berth lock where it "
                        "can");
}

namespace {

// Host memory, and how much of the weights of the manifest's models the page cache holds now
// (what a prewarm would not need to read): the third ledger beside disk and GPU memory.
void ObserveMemory(const Desired& desired, const std::string& proc_root, Observed* o) {
  Result<MemInfo> mem = ReadMemInfo(proc_root + "/meminfo");
  if (mem.ok()) {
    o->memory.known = true;
    o->memory.total_bytes = mem->total_bytes;
    o->memory.available_bytes = mem->available_bytes;
  } else {
    o->memory.error = mem.status().message();
  }
  // One pass over the store (a scan of every repo per model is quadratic at 10,000 models).
  std::set<std::string> wanted;
  for (const auto& [key, model] : desired.models) wanted.insert(model.repo_id);
  for (ObservedRepo& repo : o->store.repos) {
    if (!wanted.count(repo.repo_id)) continue;
    for (ObservedRevision& rev : repo.revisions) {
      if (!rev.complete || !rev.weights_bytes) continue;
      auto files = SafetensorsFiles(SnapshotPath(o->store.path, repo.repo_id, rev.commit));
      if (!files.ok() || files->empty()) continue;
      Result<Residency> r = PageCacheResidency(*files);
      if (r.ok()) rev.resident_bytes = r->resident_bytes;
    }
  }
}

}  // namespace

void LiveObserver::AskStandbys(const Desired& desired, Observed* o) {
  if (!opt_.standby) return;
  for (const auto& [name, s] : desired.services) {
    if (s.standby != Standby::kSleep || !s.port) continue;
    const ObservedUnit* u = o->FindUnit(s.UnitName());
    if (!u || !u->IsActive()) continue;
    Result<bool> asleep = opt_.standby->IsSleeping(s.DialHost(), *s.port, 2000);
    if (asleep.ok())
      o->sleeping[u->name] = *asleep;
    else
      o->warnings.push_back("service/" + name + " (standby: sleep): berth cannot tell whether it " +
                            "sleeps: " + asleep.status().message() +
                            "; the plan takes it as awake");
  }
}

Result<Observed> LiveObserver::Observe(const Desired& desired) {
  Observed o;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) o.hostname = host;
  const double now = (opt_.clock ? *opt_.clock : RealClock()).UnixNow();
  o.observed_at = Rfc3339(now);

  std::string store = desired.host.store.empty() ? DefaultStorePath() : desired.host.store;
  auto scanned = ScanStore(store);
  if (!scanned.ok()) return scanned.status().WithContext("observing the model store " + store);
  o.store = std::move(scanned).value();
  o.store.path = store;
  // The model files of the manifest's llama-server services: what they claim of GPU memory is
  // derived from their metadata and tensor lists.
  std::map<std::string, std::set<std::string>> gguf_files;
  for (const auto& [name, s] : desired.services) {
    if (!s.has_engine || s.engine != EngineKind::kLlamaServer || s.llama.model_file.empty())
      continue;
    if (auto m = desired.models.find(s.model); m != desired.models.end())
      gguf_files[m->second.repo_id].insert(s.llama.model_file);
  }
  ReadGgufModels(gguf_files, PosixStoreFs(), &o.store);
  ObserveMemory(desired, opt_.proc_root, &o);

  std::vector<std::string> names;
  for (const auto& [name, s] : desired.services)
    for (std::string& unit : s.UnitNames()) names.push_back(std::move(unit));
  if (opt_.systemd) {
    auto units = ObserveUnits(*opt_.systemd, *opt_.unit_files, names);
    if (!units.ok()) return units.status().WithContext("observing systemd units");
    o.units = std::move(units).value();
    // Decided now, with the moment it was seen: a saved observation keeps what was seen.
    MarkCrashLoops(&o.units, static_cast<uint64_t>(now * 1e6));
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
  // Each front's configuration as berth last wrote it: what the plan compares with the one it
  // renders, and which backend it routed to.
  for (const auto& [port, front] : desired.fronts) {
    std::string path = desired.host.front_dir + "/" + std::to_string(port) + ".cfg";
    FileReadOptions bounded;
    bounded.max_bytes = kMaxFrontConfigBytes;
    Result<std::string> text = ReadRegularFile(path, bounded);
    if (text.ok()) {
      // The file is what the front loads at its next start or reload; what it serves now is
      // its admin socket's to say (a reload refused, a kill between the write and the reload,
      // a hand edit, a rollback's route).
      std::string seen = std::move(text).value();
      const ObservedUnit* unit = o.FindUnit(FrontUnitName(port));
      if (unit && unit->IsUp()) {
        HaproxyAdminOptions admin;
        admin.socket = desired.host.front_dir + "/" + std::to_string(port) + ".sock";
        Result<FrontStats> running = HaproxyAdmin(admin).Stats();
        if (running.ok())
          seen = FrontAsRunning(seen, *running);
        else
          o.warnings.push_back(
              "the front of port " + std::to_string(port) +
              " runs but did not say what it serves: " + running.status().message());
      }
      o.front_configs[port] = std::move(seen);
    } else if (text.status().code() != Status::Code::kNotFound)
      o.warnings.push_back("the front of port " + std::to_string(port) + ": " +
                           text.status().message() + "; berth writes it again");
  }
  AskStandbys(desired, &o);
  AskHub(desired, &o);
  GpuProbeOptions gpu = opt_.gpu;
  gpu.proc_root = opt_.proc_root;
  ApplyGpuObservation(ObserveGpus(gpu), &o);
  return o;
}

}  // namespace berth
