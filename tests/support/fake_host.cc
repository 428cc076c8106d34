#include "tests/support/fake_host.h"

#include <algorithm>
#include <stdexcept>

#include "core/hash.h"
#include "core/hf_cache.h"
#include "core/unit_marker.h"
#include "core/units.h"
#include "planners/host_ledger.h"
#include "planners/unit_render.h"

namespace berth::testing {

std::string Commit(const std::string& tag) {
  std::string c;
  while (c.size() < 40) c += tag;
  return c.substr(0, 40);
}

std::vector<std::string> Steps(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& a : plan.actions)
    out.push_back(std::string(ActionKindName(a.kind)) + " " + a.address + " " +
                  ReasonName(a.reason));
  return out;
}

ObservedUnit& FakeHost::Unit(const std::string& name) {
  for (auto& u : o_.units)
    if (u.name == name) return u;
  ObservedUnit u;
  u.name = name;
  u.load_state = "not-found";
  u.active_state = "inactive";
  u.sub_state = "dead";
  o_.units.push_back(u);
  return o_.units.back();
}

uint64_t FakeHost::DownloadSize(const DownloadStep& a, const Desired& d) const {
  (void)d;
  uint64_t size = 0;
  if (const HubInfo* hub = o_.FindHub(a.repo_id, a.revision))
    for (const auto& f : hub->files)
      if (FileWanted(f.path, a.include, a.exclude)) size += f.size;
  return size;
}

void FakeHost::Download(const DownloadStep& a, const Desired& d) {
  std::string commit = a.commit.empty() ? Commit("f") : a.commit;
  uint64_t size = DownloadSize(a, d);
  for (const auto& [n, m] : d.models)
    if (m.repo_id == a.repo_id && m.size_hint && size == 0) size = *m.size_hint;
  ObservedRepo* repo = nullptr;
  for (auto& r : o_.store.repos)
    if (r.repo_id == a.repo_id) repo = &r;
  if (!repo) {
    o_.store.repos.push_back({a.repo_id, {}});
    repo = &o_.store.repos.back();
  }
  ObservedRevision* rev = nullptr;
  for (auto& r : repo->revisions)
    if (r.commit == commit) rev = &r;
  if (!rev) {
    repo->revisions.push_back({commit,
                               {},
                               false,
                               0,
                               std::nullopt,
                               std::nullopt,
                               std::nullopt,
                               std::nullopt,
                               std::nullopt});
    rev = &repo->revisions.back();
  }
  for (auto& r : repo->revisions) {
    auto it = std::find(r.refs.begin(), r.refs.end(), a.revision);
    if (it != r.refs.end()) r.refs.erase(it);
  }
  if (!a.revision.empty() && a.revision != commit) rev->refs.push_back(a.revision);
  rev->complete = true;
  rev->bytes_present += size;
  rev->bytes_total = rev->bytes_present;
  o_.store.free_bytes -= std::min(o_.store.free_bytes, size);
  o_.state.models[a.repo_id].push_back(commit);
}

void FakeHost::Start(const std::string& unit, const Desired& d) {
  ObservedUnit& u = Unit(unit);
  if (u.load_state == "not-found") throw std::runtime_error("start of a missing unit " + unit);
  u.active_state = "active";
  u.sub_state = "running";
  u.main_pid = next_pid_++;
  u.invocation_id = "1nv0" + std::to_string(u.main_pid);  // new on every (re)start
  // A unit berth did not write serves where it served before (its file says so, not berth).
  auto before = held_by_foreign_.find(unit);
  if (!u.managed && before != held_by_foreign_.end()) {
    for (ListeningPort p : before->second.ports) {
      p.pid = u.main_pid;
      o_.ports.push_back(p);
    }
    for (auto [index, p] : before->second.gpus) {
      p.pid = u.main_pid;
      for (auto& g : o_.gpus)
        if (g.index == index) {
          g.processes.push_back(p);
          g.memory_used += p.used_bytes;
        }
    }
    return;
  }
  for (const auto& [name, s] : d.services) {
    if (s.UnitName() != unit) continue;
    for (int i : s.gpus)
      for (auto& g : o_.gpus)
        if (g.index == i) {
          uint64_t claim = GpuClaim(s, g.memory_total);
          g.processes.push_back({u.main_pid, claim, unit, "fake"});
          g.memory_used += claim;
        }
    if (s.port) o_.ports.push_back({*s.port, s.bind, u.main_pid, "fake", unit});
  }
}

void FakeHost::Stop(const std::string& unit) {
  ObservedUnit& u = Unit(unit);
  o_.sleeping.erase(unit);
  u.active_state = "inactive";
  u.sub_state = "dead";
  u.main_pid = 0;
  if (!u.managed) {
    Held& held = held_by_foreign_[unit];
    held = {};
    for (const auto& p : o_.ports)
      if (p.unit == unit) held.ports.push_back(p);
    for (const auto& g : o_.gpus)
      for (const auto& p : g.processes)
        if (p.unit == unit) held.gpus.emplace_back(g.index, p);
  }
  for (auto& g : o_.gpus) {
    for (const auto& p : g.processes)
      if (p.unit == unit) g.memory_used -= std::min(g.memory_used, p.used_bytes);
    std::erase_if(g.processes, [&](const GpuProcess& p) { return p.unit == unit; });
  }
  std::erase_if(o_.ports, [&](const ListeningPort& p) { return p.unit == unit; });
}

void FakeHost::RemoveModel(const std::string& repo_id, const std::string& commit) {
  for (auto& r : o_.store.repos)
    if (r.repo_id == repo_id)
      std::erase_if(r.revisions, [&](const ObservedRevision& v) {
        if (v.commit == commit) o_.store.free_bytes += v.bytes_present;
        return v.commit == commit;
      });
  std::erase_if(o_.store.repos, [](const ObservedRepo& r) { return r.revisions.empty(); });
  auto& commits = o_.state.models[repo_id];
  std::erase(commits, commit);
  if (commits.empty()) o_.state.models.erase(repo_id);
}

void FakeHost::WriteUnit(const std::string& unit, const std::string& content) {
  ObservedUnit& u = Unit(unit);
  u.fragment_path = "/etc/systemd/system/" + unit;
  u.content = content;
  u.content_hash = Sha256Hex(content);
  u.managed = true;
  u.spec_hash = UnitSpecHash(content);
  u.lineage = UnitLineage(content);
  u.need_daemon_reload = u.load_state != "not-found";
  // TimeoutStopSec= as systemd reports it (TimeoutStopUSec): its default is 90 s.
  u.timeout_stop_usec = 90'000'000;
  if (size_t at = content.find("\nTimeoutStopSec="); at != std::string::npos) {
    size_t from = at + std::string_view("\nTimeoutStopSec=").size();
    auto ms =
        ParseDurationMs(std::string_view(content).substr(from, content.find('\n', from) - from));
    if (ms) u.timeout_stop_usec = *ms * 1000;
  }
  // A new file (or one replacing a file without [Install]) starts disabled; an enabled unit
  // stays enabled (its symlinks are by name).
  bool installs = content.find("\n[Install]\n") != std::string::npos;
  if (u.unit_file_state.empty() || u.unit_file_state == "static")
    u.unit_file_state = installs ? "disabled" : "static";
  if (std::find(o_.state.units.begin(), o_.state.units.end(), unit) == o_.state.units.end())
    o_.state.units.push_back(unit);
}

void FakeHost::RemoveUnit(const std::string& unit) {
  ObservedUnit& u = Unit(unit);
  u.fragment_path.clear();
  u.content.clear();
  u.content_hash.clear();
  u.managed = false;
  u.lineage.clear();
  u.spec_hash.clear();
  u.unit_file_state.clear();
  std::erase(o_.state.units, unit);
}

void FakeHost::SetUnitFileState(const std::string& unit, const std::string& state) {
  Unit(unit).unit_file_state = state;
}

void FakeHost::Reload() {
  for (auto& u : o_.units) {
    u.need_daemon_reload = false;
    u.load_state = u.HasFile() ? "loaded" : "not-found";
  }
  std::erase_if(o_.units,
                [](const ObservedUnit& u) { return u.load_state == "not-found" && !u.IsActive(); });
}

void FakeHost::CollectGarbage() {
  std::erase_if(o_.units, [](const ObservedUnit& u) { return !u.HasFile() && !u.IsActive(); });
}

void FakeHost::Apply(const Plan& plan, const Desired& d) {
  if (plan.blocked()) throw std::runtime_error("FakeHost::Apply of a blocked plan");
  for (const Action& a : plan.actions) {
    log_.push_back(std::string(ActionKindName(a.kind)) + " " +
                   (a.unit.empty() ? a.address : a.unit));
    switch (a.kind) {
      case ActionKind::kDownload:
        Download(a.As<DownloadStep>(), d);
        break;
      case ActionKind::kRemoveModel:
        RemoveModel(a.As<RemoveModelStep>().repo_id, a.As<RemoveModelStep>().commit);
        break;
      case ActionKind::kWriteUnit:
        WriteUnit(a.unit, a.As<UnitFileStep>().content);
        break;
      case ActionKind::kRemoveUnit:
        RemoveUnit(a.unit);
        break;
      case ActionKind::kDaemonReload:
        Reload();
        break;
      case ActionKind::kStart:
        Start(a.unit, d);
        break;
      case ActionKind::kStop:
        Stop(a.unit);
        break;
      case ActionKind::kRestart:
        Stop(a.unit);
        Start(a.unit, d);
        break;
      case ActionKind::kSleep: {
        // vLLM's sleep mode: the process and its port stay, its GPU memory falls to the residue
        // the step allows, and it says it sleeps.
        const StandbyStep& st = a.As<StandbyStep>();
        for (auto& g : o_.gpus)
          for (auto& p : g.processes)
            if (p.unit == a.unit && p.used_bytes > st.residual_bytes) {
              g.memory_used -= p.used_bytes - st.residual_bytes;
              p.used_bytes = st.residual_bytes;
            }
        o_.sleeping[a.unit] = true;
        break;
      }
      case ActionKind::kWake:
        // Awake: it holds what it held before its sleep (its engine's claim).
        for (const auto& [name, s] : d.services)
          if (s.UnitName() == a.unit)
            for (auto& g : o_.gpus)
              for (auto& p : g.processes)
                if (p.unit == a.unit) {
                  uint64_t claim = GpuClaim(s, g.memory_total);
                  g.memory_used += claim - std::min(claim, p.used_bytes);
                  p.used_bytes = claim;
                }
        o_.sleeping[a.unit] = false;
        break;
      case ActionKind::kWaitHealthy:
      case ActionKind::kPreflight:
      case ActionKind::kSmoke:
      case ActionKind::kFloor:
      case ActionKind::kSoak:
      case ActionKind::kReference:
      case ActionKind::kPrewarm:
      case ActionKind::kRoute:
      case ActionKind::kDrain:
      case ActionKind::kReady:
        break;
      case ActionKind::kWriteFront:
        o_.front_configs[a.As<FrontStep>().port] = a.As<FrontStep>().config_text;
        break;
      case ActionKind::kEnable:
        SetUnitFileState(a.unit, "enabled");
        break;
      case ActionKind::kDisable:
        SetUnitFileState(a.unit, "disabled");
        break;
    }
  }
  CollectGarbage();
  o_.state.serial++;
}

}  // namespace berth::testing
