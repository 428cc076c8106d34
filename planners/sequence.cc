// The sequence: order the draft (downloads, unit files, reload, stops and starts, removals),
// checking disk, GPU memory and ports at every step (feasibility.h) against the host as the
// steps before it leave it (host_ledger.h).
#include <algorithm>
#include <map>
#include <set>

#include "engine/core/units.h"
#include "planners/draft.h"
#include "planners/feasibility.h"
#include "planners/gates.h"
#include "planners/host_ledger.h"
#include "planners/preflight.h"

namespace berth {
namespace {

class Sequencer {
 public:
  Sequencer(const Desired& d, const Observed& o, Draft draft, Plan* plan)
      : d_(d), o_(o), draft_(std::move(draft)), plan_(plan), host_(d, o) {}

  void Run() {
    plan_->notes = draft_.notes;
    plan_->warnings = o_.warnings;
    for (const auto& w : draft_.warnings) plan_->warnings.push_back(w);
    for (auto& p : draft_.problems) plan_->problems.push_back(p);
    Downloads();
    Preflights();
    UnitFiles();
    Transitions();
    BootState();
    Removals();
    // A state-only service of unknown port may serve what this plan leaves dark.
    for (Disruption& dis : plan_->disruptions)
      if (dis.until_step == 0 && !unknown_port_starts_.empty()) dis.caveat = unknown_port_starts_;
  }

 private:
  int Emit(Action a) {
    plan_->actions.push_back(std::move(a));
    return static_cast<int>(plan_->actions.size());
  }
  int NextStep() const { return static_cast<int>(plan_->actions.size()) + 1; }

  void Downloads() {
    DiskBudget disk{o_.store.free_bytes, d_.host.reserve_bytes, o_.store.path};
    plan_->disk_free = disk.free;
    plan_->disk_reserve = disk.reserve;
    uint64_t needed = 0;
    bool reported = false;
    for (PlannedDownload& download : draft_.downloads) {
      Action& a = download.action;
      needed += a.requires_.disk_bytes;
      if (!download.size_known) plan_->disk_known = false;
      std::optional<Problem> short_of = DiskShortfall(disk, needed, NextStep());
      if (a.requires_.disk_bytes > 0 && !short_of)
        a.detail += " (fits: " + FormatBytes(disk.free) + " free, reserve " +
                    FormatSize(disk.reserve) + ")";
      Emit(a);
      if (short_of && !reported) {
        reported = true;
        plan_->problems.push_back(*short_of);
      }
    }
    plan_->disk_needed = needed;
  }

  // Before anything goes dark (after the downloads the checks may need, before the first unit
  // write): what was observed of each started service's model, and its own preflight command.
  // The engine check of each started service comes first: the engine's own validation of the
  // argv and environment its unit will run with.
  void Preflights() {
    std::string unchecked;
    for (const Transition& t : draft_.starts) {
      for (Problem& p : ModelPreflight(t, draft_.models, host_)) plan_->problems.push_back(p);
      if (!t.spec) continue;
      auto exec = draft_.execs.find(t.unit);
      if (draft_.engine_check_dir && WantsEngineCheck(*t.spec) && exec != draft_.execs.end()) {
        if (!draft_.engine_check_dir->empty())
          Emit(EngineCheckAction(*t.spec, t.address, exec->second));
        else
          unchecked += (unchecked.empty() ? "" : ", ") + t.address;
      }
      if (std::optional<Action> a = PreflightAction(*t.spec, t.address)) Emit(*a);
    }
    if (!unchecked.empty())
      plan_->warnings.push_back(
          "no engine check for " + unchecked +
          ": berth's engine-check programs are not installed next to it (engine-check/ beside "
          "the berth executable, or ../libexec/berth/engine-check/), so a configuration the "
          "engine refuses is found only after the stop. Reinstall berth, or set preflight: "
          "{engine: off} on the service to say so");
  }

  void UnitFiles() {
    for (auto& w : draft_.unit_writes) Emit(w);
    if (!draft_.unit_writes.empty() || draft_.reload_pending) {
      Action r;
      r.kind = ActionKind::kDaemonReload;
      r.address = "systemd";
      size_t n = draft_.unit_writes.size();
      r.reason = n ? Reason::kUnitFilesChanged : Reason::kPendingReload;
      r.detail = n ? std::to_string(n) + " unit file" + (n == 1 ? "" : "s") + " changed"
                   : "systemd reports unit files changed on disk";
      Emit(r);
      reloaded_ = true;
    }
  }

  bool Pending(const std::string& unit) const {
    for (const auto& s : draft_.stops)
      if (s.unit == unit && !stopped_.count(unit)) return true;
    return false;
  }

  PendingUnits Pendings() const {
    return {[this](const std::string& u) { return Pending(u); },
            [this](const std::string& u) { return PendingRestart(u) != nullptr; }};
  }

  // The restart of `unit` when it is still to come.
  const Transition* PendingRestart(const std::string& unit) const {
    if (stopped_.count(unit) || started_.count(unit)) return nullptr;
    for (const auto& s : draft_.starts)
      if (s.unit == unit && s.kind == ActionKind::kRestart) return &s;
    return nullptr;
  }

  const Transition* PendingStop(const std::string& unit) const {
    for (const auto& s : draft_.stops)
      if (s.unit == unit) return &s;
    return nullptr;
  }

  // What a stop gives back, in words: "8 × 73.7 GiB on GPU 0-7 and port 8000".
  static std::string Describe(const std::map<int, uint64_t>& gpu_bytes,
                              const std::vector<int>& ports) {
    std::string what;
    if (!gpu_bytes.empty()) {
      std::vector<int> gpus;
      uint64_t per = 0;
      bool same = true;
      for (const auto& [i, b] : gpu_bytes) {
        gpus.push_back(i);
        same = same && (per == 0 || per == b);
        per = b;
      }
      what = (same ? std::to_string(gpus.size()) + " × " + FormatGiB(per) : std::string("memory")) +
             " on GPU " + GpuList(gpus);
    }
    for (int p : ports)
      what += (what.empty() ? "" : " and ") + std::string("port ") + std::to_string(p);
    return what;
  }

  // Stops `t`. `for_spec`: the service whose start needs what it frees (nullptr: a stop the
  // manifest asks for on its own). The detail says what it frees for that service, and apart
  // from that, what it frees and the ports that go dark with it. Returns what the stop replaces
  // for the switch of `for_spec`: its step and the stopped service's own health gate, which an
  // undo waits for after starting it again (port 0: berth knows none).
  Replaced EmitStop(const Transition& t, const ServiceSpec* for_spec) {
    const std::string for_service = for_spec ? for_spec->name : "";
    const int for_port = for_spec && for_spec->port ? *for_spec->port : 0;
    Action a;
    a.kind = ActionKind::kStop;
    a.address = t.address;
    a.unit = t.unit;
    a.reason = for_spec ? Reason::kFreesResources : t.reason;
    a.for_service = for_service;
    Replaced replaced;
    replaced.address = t.address;
    replaced.unit = t.unit;
    replaced.stop_step = plan_->actions.size();
    replaced.gate.kind = ActionKind::kWaitHealthy;
    replaced.gate.address = t.address;
    replaced.gate.unit = t.unit;
    if (for_spec && t.spec && t.spec->port)
      replaced.gate = HealthGate(*t.spec, t.address, draft_.reported_names, "");
    Resources freed = host_.Release(t.unit);
    a.frees = freed;
    if (!for_spec) {
      std::string what = Describe(freed.gpu_bytes, freed.ports);
      a.detail = t.detail + (what.empty() ? "" : "; frees " + what);
    } else {
      std::map<int, uint64_t> used_gpu, other_gpu;
      for (const auto& [i, b] : freed.gpu_bytes) {
        bool used =
            std::find(for_spec->gpus.begin(), for_spec->gpus.end(), i) != for_spec->gpus.end();
        (used ? used_gpu : other_gpu)[i] = b;
      }
      std::vector<int> used_ports, dark_ports;
      for (int p : freed.ports) (p == for_port ? used_ports : dark_ports).push_back(p);
      std::string used = Describe(used_gpu, used_ports);
      std::string other = Describe(other_gpu, {});
      std::string dark;
      for (size_t k = 0; k < dark_ports.size(); ++k)
        dark += (k == 0                       ? ""
                 : k + 1 == dark_ports.size() ? " and "
                                              : ", ") +
                std::to_string(dark_ports[k]);
      a.detail = "frees " + (used.empty() ? std::string("its resources") : used) + " for " +
                 for_service + (other.empty() ? "" : "; also frees " + other) +
                 (dark.empty()             ? ""
                  : dark_ports.size() == 1 ? "; port " + dark + " goes dark with it"
                                           : "; ports " + dark + " go dark with it") +
                 " (" + t.detail + ")";
    }
    int step = Emit(a);
    stopped_.insert(t.unit);
    for (int p : freed.ports) {
      Disruption dis;
      dis.port = p;
      dis.from_step = step;
      dis.service = t.address;
      if (for_spec && p == for_port) {
        dis.reason = t.unit + " stopped to make room for " + for_service;
        open_.push_back(plan_->disruptions.size());
      } else if (for_spec) {
        dis.reason = t.unit + " stopped (" + t.detail + ") to make room for " + for_service +
                     (for_port ? ", which serves port " + std::to_string(for_port) : std::string());
      } else {
        dis.reason = t.unit + " stopped (" + t.detail + ")";
      }
      plan_->disruptions.push_back(dis);
    }
    return replaced;
  }

  void EmitStart(const Transition& t) {
    const ServiceSpec& s = *t.spec;
    // A restart whose unit was stopped earlier to free a port is a start now.
    bool restart = t.kind == ActionKind::kRestart && !stopped_.count(t.unit);
    Action a;
    a.kind = restart || t.kind != ActionKind::kRestart ? t.kind : ActionKind::kStart;
    a.address = t.address;
    a.unit = t.unit;
    a.reason = t.reason;
    started_.insert(t.unit);
    Resources claim;
    if (host_.gpus_known())
      for (int i : s.gpus)
        if (host_.HasGpu(i) && GpuClaim(s, host_.Total(i)) > 0)
          claim.gpu_bytes[i] = GpuClaim(s, host_.Total(i));
    if (s.port) claim.ports.push_back(*s.port);
    std::string where;
    if (!s.gpus.empty()) where = "GPU " + GpuList(s.gpus);
    if (s.port)
      where += (where.empty() ? "" : ", ") + std::string("port ") + std::to_string(*s.port);
    a.detail = (where.empty() ? "" : where + ": ") + t.detail;
    // A restart closes the ports the unit serves now (which may differ from its new port).
    std::vector<int> closed;
    if (restart) closed = host_.Release(t.unit).ports;
    if (restart && s.port && closed.empty()) closed.push_back(*s.port);
    a.requires_ = claim;
    a.gpus = s.gpus;
    int step = Emit(a);
    host_.Hold(t.unit, claim);
    for (int p : closed) {
      Disruption dis;
      dis.port = p;
      dis.from_step = step;
      dis.service = t.address;
      if (s.port && p == *s.port) {
        dis.reason = "restart of " + t.unit;
        open_.push_back(plan_->disruptions.size());
      } else {
        dis.reason = "restart of " + t.unit + " moves it from port " + std::to_string(p) +
                     (s.port ? " to port " + std::to_string(*s.port) : std::string());
      }
      plan_->disruptions.push_back(dis);
    }
    if (!s.port)
      unknown_port_starts_ += (unknown_port_starts_.empty() ? "" : "; ") + t.address +
                              " starts at step " + std::to_string(step) +
                              " on a port berth does not know";
    int until = step;
    if (s.port) until = Emit(HealthGate(s, t.address, draft_.reported_names));
    // The gates after the health gate (smoke); the port serves again at the health gate.
    for (Action& g : GatesAfterHealth(s, t.address, draft_.reported_names)) Emit(std::move(g));
    for (size_t idx : open_) plan_->disruptions[idx].until_step = until;
    open_.clear();
    // A port left dark earlier is served again once the service now on it is healthy.
    if (s.port)
      for (Disruption& dis : plan_->disruptions)
        if (dis.port == *s.port && dis.until_step == 0) dis.until_step = until;
  }

  void Transitions() {
    std::vector<const Transition*> remaining;
    for (const auto& t : draft_.starts) remaining.push_back(&t);
    while (!remaining.empty()) {
      // Prefer a start that needs no stop (new before old); else the first by name.
      const Transition* pick = nullptr;
      StartNeeds need;
      PendingUnits pending = Pendings();
      for (const Transition* t : remaining) {
        if (t->spec->strategy == Strategy::kStopFirst && !ReplacedBy(*t, host_, pending).empty())
          continue;
        StartNeeds n = NeedsOf(*t, host_, pending);
        if (n.stops.empty() && n.problems.empty()) {
          pick = t;
          need = n;
          break;
        }
      }
      if (!pick) {
        pick = remaining.front();
        need = NeedsOf(*pick, host_, pending);
      }
      remaining.erase(std::find(remaining.begin(), remaining.end(), pick));
      std::vector<std::string> stops = need.stops;
      if (pick->spec->strategy == Strategy::kStopFirst)
        for (const auto& u : ReplacedBy(*pick, host_, pending))
          if (std::find(stops.begin(), stops.end(), u) == stops.end()) stops.push_back(u);
      if (pick->spec->strategy == Strategy::kStartFirst && !need.stops.empty()) {
        Problem p;
        p.step = NextStep();
        p.resource = "strategy";
        std::string runs, why;
        for (size_t k = 0; k < need.stops.size(); ++k)
          runs += (k == 0 ? "" : k + 1 == need.stops.size() ? " and " : ", ") + need.stops[k];
        for (const auto& w : need.why) why += (why.empty() ? "" : "; ") + w;
        p.message = pick->address + " has strategy: start-first, but it cannot start while " +
                    runs + (need.stops.size() == 1 ? " runs: " : " run: ") + why +
                    ". Use strategy: auto or stop-first";
        plan_->problems.push_back(p);
      }
      // What it replaces and stops only after its gates (new before old).
      bool old_stops_later = false;
      if (pick->spec->strategy != Strategy::kStopFirst)
        for (const auto& u : ReplacedBy(*pick, host_, pending))
          old_stops_later =
              old_stops_later ||
              (PendingStop(u) && std::find(stops.begin(), stops.end(), u) == stops.end());
      std::sort(stops.begin(), stops.end());
      Switch sw;
      sw.address = pick->address;
      sw.unit = pick->unit;
      for (const auto& u : stops) {
        const Transition* st = PendingStop(u);
        if (!st) st = PendingRestart(u);
        if (!st) continue;
        sw.replaces.push_back(EmitStop(*st, pick->spec));
        sw.steps.push_back(sw.replaces.back().stop_step);
      }
      for (Problem& p : need.problems) {
        p.step = NextStep();
        plan_->problems.push_back(p);
      }
      sw.start = plan_->actions.size();
      EmitStart(*pick);
      for (size_t k = sw.start + 1; k < plan_->actions.size(); ++k)
        if (IsGate(plan_->actions[k].kind)) sw.gates.push_back(k);
      // Boot state follows once the new service is healthy: a replacement that fails (and is
      // rolled back) leaves what a reboot brings up as it was.
      EmitBoot(draft_.enables, pick->unit);
      for (const auto& u : stops) EmitBoot(draft_.disables, u);
      for (size_t k = sw.start; k < plan_->actions.size(); ++k) sw.steps.push_back(k);
      const Action& start = plan_->actions[sw.start];
      sw.mode = start.kind == ActionKind::kRestart ? SwitchMode::kInPlace
                : !sw.replaces.empty()             ? SwitchMode::kStopFirst
                : old_stops_later                  ? SwitchMode::kStartFirst
                                                   : SwitchMode::kFresh;
      // An in-place update of a unit file berth replaces: the undo writes the old one back.
      sw.restores_unit = start.kind == ActionKind::kRestart &&
                         std::any_of(plan_->actions.begin(),
                                     plan_->actions.begin() + static_cast<std::ptrdiff_t>(sw.start),
                                     [&](const Action& w) {
                                       return w.kind == ActionKind::kWriteUnit &&
                                              w.unit == sw.unit && w.reason != Reason::kUnitMissing;
                                     });
      plan_->switches.push_back(std::move(sw));
    }
    for (const auto& t : draft_.stops)
      if (!stopped_.count(t.unit)) {
        EmitStop(t, nullptr);
        EmitBoot(draft_.disables, t.unit);
      }
  }

  // The enable or disable of `unit` in `list` (a re-enable: its disable, then its enable), once.
  // Not disruptive: nothing stops or starts.
  void EmitBoot(const std::vector<Action>& list, const std::string& unit) {
    if (booted_.count(unit)) return;
    bool emitted = false;
    for (const Action& a : list)
      if (a.unit == unit) {
        emitted = true;
        Emit(a);
      }
    if (emitted) booted_.insert(unit);
  }

  // Enables and disables of units that neither start nor stop in this plan (a running service
  // that was never enabled; a stopped one still enabled; one whose file is removed next).
  void BootState() {
    for (const Action& a : draft_.enables) EmitBoot(draft_.enables, a.unit);
    for (const Action& a : draft_.disables) EmitBoot(draft_.disables, a.unit);
  }

  void Removals() {
    for (auto& a : draft_.model_removals) Emit(a);
    for (auto& a : draft_.unit_removals) {
      if (reloaded_) a.detail += "; systemd forgets the unit at its next reload";
      Emit(a);
    }
    if (!reloaded_ && !draft_.unit_removals.empty()) {
      Action r;
      r.kind = ActionKind::kDaemonReload;
      r.address = "systemd";
      r.reason = Reason::kUnitFilesChanged;
      size_t n = draft_.unit_removals.size();
      r.detail = std::to_string(n) + " unit file" + (n == 1 ? "" : "s") + " removed";
      Emit(r);
    }
  }

  const Desired& d_;
  const Observed& o_;
  Draft draft_;
  Plan* plan_;
  HostLedger host_;
  bool reloaded_ = false;
  std::set<std::string> stopped_;
  std::set<std::string> started_;    // units whose start or restart is emitted
  std::set<std::string> booted_;     // units whose enable or disable is emitted
  std::vector<size_t> open_;         // disruptions waiting for the next health gate
  std::string unknown_port_starts_;  // "service/x starts at step 2 on a port berth does not know"
};

}  // namespace

void Sequence(const Desired& d, const Observed& o, Draft draft, Plan* plan) {
  std::string why = o.gpu_error.empty() ? std::string("GPUs not observed") : o.gpu_error;
  if (!o.gpus_known && d.host.gpus) {
    draft.warnings.push_back("GPU memory checked against the manifest's host.gpus (" +
                             std::to_string(d.host.gpus->count) + " × " +
                             FormatGiB(d.host.gpus->memory_bytes) +
                             "), counting only berth's running services: " + why);
  } else if (!o.gpus_known) {
    draft.warnings.push_back("GPU memory checks skipped: " + why +
                             " (state host.gpus in the manifest to check against it)");
  }
  if (!o.ports_known)
    draft.warnings.push_back(
        "port checks limited to berth's own services: listening ports "
        "not observed");
  Sequencer(d, o, std::move(draft), plan).Run();
}

}  // namespace berth
