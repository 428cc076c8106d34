// The sequence: order the draft (downloads, unit files, reload, stops and starts, removals),
// checking disk, GPU memory and ports at every step (feasibility.h) against the host as the
// steps before it leave it (host_ledger.h).
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/units.h"
#include "planners/draft.h"
#include "planners/feasibility.h"
#include "planners/fronts.h"
#include "planners/gates.h"
#include "planners/host_ledger.h"
#include "planners/on_demand.h"
#include "planners/plan_index.h"
#include "planners/preflight.h"
#include "planners/prewarm.h"
#include "planners/standby.h"

namespace berth {
namespace {

std::map<std::string, uint64_t> ClaimBytes(const std::map<std::string, LlamaClaim>& claims) {
  std::map<std::string, uint64_t> out;
  for (const auto& [unit, c] : claims) out[unit] = c.total();
  return out;
}

class Sequencer {
 public:
  Sequencer(const Desired& d, const PlanIndex& index, Draft* draft, Plan* plan)
      : d_(d),
        o_(index.observed()),
        index_(index),
        draft_(*draft),
        plan_(plan),
        host_(d, index, ClaimBytes(draft->llama_claims)) {
    // The first stop and the first restart of each unit, and its enables and disables.
    for (const Transition& t : draft_.stops) stop_of_.emplace(t.unit, &t);
    stops_left_ = stop_of_.size();
    for (const Transition& t : draft_.starts)
      if (t.kind == ActionKind::kRestart) restart_of_.emplace(t.unit, &t);
    for (size_t k = 0; k < draft_.enables.size(); ++k)
      enables_of_[draft_.enables[k].unit].push_back(k);
    for (size_t k = 0; k < draft_.disables.size(); ++k)
      disables_of_[draft_.disables[k].unit].push_back(k);
  }

  void Run() {
    // Room for the steps from the start: 33,000 actions (432 bytes each) in a vector that
    // doubles held three times their size while it moved, the peak of a plan of 10,000
    // services. A start usually brings five (its checks, prewarm, start and health gate); more
    // gates or a front grow the vector as before.
    plan_->actions.reserve(draft_.downloads.size() + draft_.unit_writes.size() + 1 +
                           draft_.stops.size() + 5 * draft_.starts.size() + draft_.enables.size() +
                           draft_.socket_stops.size() + draft_.socket_starts.size() +
                           draft_.disables.size() + draft_.model_removals.size() +
                           draft_.unit_removals.size() + 1);
    plan_->notes = std::move(draft_.notes);
    plan_->warnings = o_.warnings;
    for (const auto& w : draft_.warnings) plan_->warnings.push_back(w);
    for (auto& p : draft_.problems) plan_->problems.push_back(p);
    Downloads();
    Preflights();
    UnitFiles();
    FrontWrites();
    // On-demand sockets: closed before anything stops (no request wakes what the plan stops),
    // opened once every server they may wake has its unit, and its GPUs counted as if all ran.
    for (Action& a : draft_.socket_stops) EmitSocketStop(std::move(a));
    Transitions();
    for (Action& a : draft_.socket_starts) {
      std::string unit = a.unit;
      Emit(std::move(a));
      EmitEnables(unit);
    }
    for (Problem& p : OnDemandGpuProblems(d_, host_)) plan_->problems.push_back(std::move(p));
    FrontFinals();
    BootState();
    Removals();
    // A state-only service of unknown port may serve what this plan leaves dark.
    for (Disruption& dis : plan_->disruptions)
      if (!dis.until_step) dis.unknown_port_starts = unknown_port_starts_;
  }

 private:
  // The step of the action emitted (0-based, like every step of the plan).
  size_t Emit(Action a) {
    plan_->actions.push_back(std::move(a));
    return plan_->actions.size() - 1;
  }
  // The step the next Emit gives (0-based).
  size_t NextStep() const { return plan_->actions.size(); }

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
      Emit(std::move(a));  // the draft's actions are moved into the plan, not copied
      if (short_of && !reported) {
        reported = true;
        plan_->problems.push_back(*short_of);
      }
    }
    plan_->disk_needed = needed;
    std::vector<PlannedDownload>().swap(draft_.downloads);  // moved into the plan: let go
  }

  // Before anything goes dark (after the downloads the checks may need, before the first unit
  // write): what was observed of each started service's model, and its own preflight command.
  // The engine check of each started service comes first: the engine's own validation of the
  // argv and environment its unit will run with.
  void Preflights() {
    std::string unchecked;
    for (const Transition& t : draft_.starts) {
      // A wake starts nothing: the server that sleeps was checked and loaded when it started.
      if (t.kind == ActionKind::kWake) continue;
      for (Problem& p : ModelPreflight(t, draft_.models, host_)) plan_->problems.push_back(p);
      if (!t.spec) continue;
      auto exec = draft_.execs.find(t.unit);
      if (draft_.engine_check_dir && WantsEngineCheck(*t.spec) && exec != draft_.execs.end()) {
        if (!draft_.engine_check_dir->empty()) {
          // Each started unit's exec is read here alone: moved into its check, not copied.
          Emit(EngineCheckAction(*t.spec, t.address, std::move(exec->second)));
          draft_.execs.erase(exec);
        } else
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
    for (auto& w : draft_.unit_writes) {
      if (w.As<UnitFileStep>().replaces) replaced_files_.insert(w.unit);
      Emit(std::move(w));
    }
    if (!draft_.unit_writes.empty() || draft_.reload_pending) {
      Action r = MakeAction(ActionKind::kDaemonReload);
      r.address = "systemd";
      size_t n = draft_.unit_writes.size();
      r.reason = n ? Reason::kUnitFilesChanged : Reason::kPendingReload;
      r.detail = n ? std::to_string(n) + " unit file" + (n == 1 ? "" : "s") + " changed"
                   : "systemd reports unit files changed on disk";
      Emit(r);
      reloaded_ = true;
    }
    std::vector<Action>().swap(draft_.unit_writes);  // moved into the plan: let go
  }

  bool Pending(const std::string& unit) const {
    return stop_of_.count(unit) && !stopped_.count(unit);
  }

  PendingUnits Pendings() const {
    return {[this](const std::string& u) { return Pending(u); },
            [this](const std::string& u) { return PendingRestart(u) != nullptr; }, stops_left_ > 0};
  }

  // The restart of `unit` when it is still to come.
  const Transition* PendingRestart(const std::string& unit) const {
    if (stopped_.count(unit) || started_.count(unit)) return nullptr;
    auto it = restart_of_.find(unit);
    return it == restart_of_.end() ? nullptr : it->second;
  }

  const Transition* PendingStop(const std::string& unit) const {
    auto it = stop_of_.find(unit);
    return it == stop_of_.end() ? nullptr : it->second;
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
  // undo waits for after starting it again (port 0: berth knows none). A standby that may
  // sleep (SleepInsteadOfStop) is put to sleep instead, and the undo wakes it.
  Replaced EmitStop(const Transition& t, const ServiceSpec* for_spec) {
    const std::string for_service = for_spec ? for_spec->name : "";
    const int for_port = for_spec && for_spec->port ? *for_spec->port : 0;
    uint64_t weights = 0;
    std::string no_sleep;
    const bool sleep = SleepInsteadOfStop(t, for_spec, o_.memory, draft_.models, asleep_bytes_,
                                          &weights, &no_sleep);
    if (!no_sleep.empty())
      plan_->notes.push_back({t.address, no_sleep + "; it is stopped instead", "no standby"});
    Action a = MakeAction(sleep ? ActionKind::kSleep : ActionKind::kStop);
    a.address = t.address;
    a.unit = t.unit;
    a.reason = sleep ? Reason::kStandby : for_spec ? Reason::kFreesResources : t.reason;
    if (!sleep) a.As<ServiceStep>().for_service = for_service;
    Replaced replaced;
    replaced.address = t.address;
    replaced.unit = t.unit;
    replaced.stop_step = plan_->actions.size();
    replaced.asleep = sleep;
    if (for_spec && t.spec && t.spec->port)
      replaced.gate = HealthGate(*t.spec, t.address, draft_.reported_names, "").As<HealthStep>();
    if (sleep && replaced.gate.port) {
      // The undo wakes it where its health gate dials, within its health timeout, and at least
      // a minute: a wake moves its weights back onto the GPUs.
      replaced.wake.host = replaced.gate.host;
      replaced.wake.port = replaced.gate.port;
      replaced.wake.timeout_ms = std::max<uint64_t>(replaced.gate.timeout_ms, 60000);
    }
    Resources freed = host_.Release(t.unit);
    if (sleep) {
      // Asleep, it keeps its port and a residue on each GPU (StandbyResidual).
      Resources kept;
      kept.ports = freed.ports;
      StandbyStep& st = a.As<StandbyStep>();
      st.host = t.spec->DialHost();
      st.port = *t.spec->port;
      st.level = 1;
      st.timeout_ms = t.spec->health.timeout_ms;
      st.memory_bytes = weights;
      for (auto& [i, b] : freed.gpu_bytes) {
        uint64_t residual = host_.HasGpu(i) ? StandbyResidual(host_.Total(i)) : 0;
        st.gpus.push_back(i);
        st.residual_bytes = std::max(st.residual_bytes, residual);
        kept.gpu_bytes[i] = std::min(b, residual);
        b -= kept.gpu_bytes[i];
      }
      if (st.gpus.empty()) st.gpus = t.spec->gpus;
      if (st.residual_bytes == 0)
        st.residual_bytes = StandbyResidual(d_.host.gpus ? d_.host.gpus->memory_bytes : 0);
      host_.Hold(t.unit, kept);
      asleep_bytes_ += weights;
      a.frees.gpu_bytes = freed.gpu_bytes;
      const std::string what = Describe(freed.gpu_bytes, {});
      const ObservedMemory& mem = o_.memory;
      a.detail = "standby: sleep: put to sleep, not stopped" +
                 (what.empty() ? std::string()
                               : "; frees " + what + (for_spec ? " for " + for_service : "")) +
                 "; its " + FormatBytes(weights) + " of weights kept in host memory (" +
                 FormatBytes(mem.available_bytes) + " available, margin " +
                 FormatBytes(PrewarmMargin(mem.total_bytes)) +
                 "); a switch back or a rollback wakes it in seconds (" + t.detail + ")";
    } else if (!for_spec) {
      a.frees = freed;
      std::string what = Describe(freed.gpu_bytes, freed.ports);
      a.detail = t.detail + (what.empty() ? "" : "; frees " + what);
    } else {
      a.frees = freed;
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
    size_t step = Emit(a);
    if (stopped_.insert(t.unit).second && stop_of_.count(t.unit)) --stops_left_;
    // Behind a front the backend port is nobody's to miss: the front holds or routes (below).
    // Nor an on-demand server's, behind its socket: the socket's stop closes the clients' port
    // (EmitSocketStop); while it listens, the next request starts the server again.
    if (t.spec && (t.spec->front_port || t.spec->on_demand)) return replaced;
    // Asleep, a server keeps its port open and answers 503 to every completion: dark as well.
    const std::string gone = sleep ? " put to sleep" : " stopped";
    for (int p : freed.ports) {
      Disruption dis;
      dis.port = p;
      dis.from_step = step;
      dis.service = t.address;
      if (for_spec && p == for_port) {
        dis.reason = t.unit + gone + " to make room for " + for_service;
        open_.push_back(plan_->disruptions.size());
      } else if (for_spec) {
        dis.reason = t.unit + gone + " (" + t.detail + ") to make room for " + for_service +
                     (for_port ? ", which serves port " + std::to_string(for_port) : std::string());
      } else {
        dis.reason = t.unit + gone + " (" + t.detail + ")";
      }
      plan_->disruptions.push_back(dis);
    }
    return replaced;
  }

  // The stop of an on-demand service's socket: its port goes dark for good.
  void EmitSocketStop(Action a) {
    Disruption dis;
    for (const auto& [name, s] : d_.services)
      if (s.on_demand && OnDemandSocketName(name) == a.unit) {
        dis.port = s.on_demand->public_port;
        dis.service = "service/" + name;
      }
    dis.reason = a.unit + " stopped (" + a.detail + ")";
    dis.from_step = Emit(std::move(a));
    if (dis.port) plan_->disruptions.push_back(std::move(dis));
  }

  void EmitStart(const Transition& t) {
    const ServiceSpec& s = *t.spec;
    // A restart whose unit was stopped earlier to free a port is a start now.
    bool restart = t.kind == ActionKind::kRestart && !stopped_.count(t.unit);
    // A wake of a service stopped earlier in the plan (to free a port) is a start now.
    bool wake = t.kind == ActionKind::kWake && !stopped_.count(t.unit);
    Action a = MakeAction(restart ? ActionKind::kRestart
                          : wake  ? ActionKind::kWake
                          : t.kind == ActionKind::kRestart || t.kind == ActionKind::kWake
                              ? ActionKind::kStart
                              : t.kind);
    a.address = t.address;
    a.unit = t.unit;
    a.reason = t.reason;
    started_.insert(t.unit);
    Resources claim;
    if (host_.gpus_known())
      for (int i : s.gpus)
        if (uint64_t bytes = host_.HasGpu(i) ? host_.Claim(s, i) : 0) claim.gpu_bytes[i] = bytes;
    if (s.port) claim.ports.push_back(*s.port);
    std::string where;
    if (!s.gpus.empty()) where = "GPU " + GpuList(s.gpus);
    if (s.port)
      where += (where.empty() ? "" : ", ") + std::string("port ") + std::to_string(*s.port);
    a.detail = (where.empty() ? "" : where + ": ") + t.detail;
    if (auto c = draft_.llama_claims.find(t.unit); c != draft_.llama_claims.end())
      a.detail += "; claims " + FormatGiB(c->second.total()) + " per GPU, derived from its " +
                  "GGUF file: " + c->second.words;
    // A restart closes the ports the unit serves now (which may differ from its new port).
    std::vector<int> closed;
    if (restart) closed = host_.Release(t.unit).ports;
    if (restart && s.port && closed.empty()) closed.push_back(*s.port);
    if (s.front_port) closed.clear();  // the front holds its port (FrontSwitchBegin)
    a.requires_ = claim;
    if (wake) {
      // It holds its port and a residue while asleep; awake, what a start claims.
      host_.Release(t.unit);
      StandbyStep& st = a.As<StandbyStep>();
      st.host = s.DialHost();
      st.port = s.port.value_or(0);
      st.timeout_ms = s.health.timeout_ms;
      st.gpus = s.gpus;
    } else {
      a.As<ServiceStep>().gpus = s.gpus;
    }
    size_t step = Emit(a);
    host_.Hold(t.unit, claim);
    for (int p : closed) {
      Disruption dis;
      dis.port = p;
      dis.from_step = step;
      dis.service = t.address;
      if (s.port && p == *s.port) {
        dis.reason = "restart of " + t.unit;
        // Behind a front that routes by model, the front keeps the public port and retries
        // the model's requests (up to its hold) while the server is away.
        if (auto f = d_.fronts.find(s.routed_port); f != d_.fronts.end()) {
          dis.port = s.routed_port;
          dis.front_mode = "held";
          dis.hold_ms = f->second.hold_ms;
          dis.reason = "requests for " + s.ServedName() + " wait at the front while " + t.unit +
                       " restarts; the port's other models are served";
        }
        open_.push_back(plan_->disruptions.size());
      } else {
        dis.reason = "restart of " + t.unit + " moves it from port " + std::to_string(p) +
                     (s.port ? " to port " + std::to_string(*s.port) : std::string());
      }
      plan_->disruptions.push_back(dis);
    }
    if (!s.port) unknown_port_starts_.push_back(step);
    size_t until = step;
    if (s.port) until = Emit(HealthGate(s, t.address, draft_.reported_names));
    // The gates after the health gate (smoke); the port serves again at the health gate.
    for (Action& g : GatesAfterHealth(d_.host, s, t.address, draft_.reported_names))
      Emit(std::move(g));
    for (size_t idx : open_) plan_->disruptions[idx].until_step = until;
    open_.clear();
    // A port left dark earlier is served again once the service now on it is healthy.
    if (s.port) EndDark(*s.port, until);
  }

  // Ends at step `until` every disruption of `port` still open (no until_step).
  void EndDark(int port, size_t until) {
    for (; dark_indexed_ < plan_->disruptions.size(); ++dark_indexed_)
      dark_of_[plan_->disruptions[dark_indexed_].port].push_back(dark_indexed_);
    auto it = dark_of_.find(port);
    if (it == dark_of_.end()) return;
    for (size_t k : it->second) {
      Disruption& dis = plan_->disruptions[k];
      if (!dis.until_step) dis.until_step = until;
    }
    dark_of_.erase(it);
  }

  void Transitions() {
    std::vector<const Transition*> remaining;
    // The fronts first: every route of a switch behind one needs it running.
    for (const auto& t : draft_.starts)
      if (t.spec && t.spec->is_front) remaining.push_back(&t);
    for (const auto& t : draft_.starts)
      if (!t.spec || !t.spec->is_front) remaining.push_back(&t);
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
      // Behind a front, what it replaces is the front's other backend, on another port.
      if (pick->spec->strategy == Strategy::kStopFirst && pick->spec->front_port)
        for (const auto& [name, other] : d_.services)
          if (&other != pick->spec && other.front_port == pick->spec->front_port &&
              Pending(other.UnitName()) &&
              std::find(stops.begin(), stops.end(), other.UnitName()) == stops.end())
            stops.push_back(other.UnitName());
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
      FrontSwitchBegin(*pick, stops, &sw);
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
      for (size_t k = sw.start + 1; k < plan_->actions.size(); ++k) {
        if (!IsGate(plan_->actions[k].kind)) continue;
        sw.gates.push_back(k);
        if (plan_->actions[k].kind == ActionKind::kWaitHealthy && !sw.health_gate)
          sw.health_gate = k;
      }
      FrontSwitchEnd(*pick, &sw);
      // Boot state follows once the new service is healthy: a replacement that fails (and is
      // rolled back) leaves what a reboot brings up as it was.
      EmitEnables(pick->unit);
      for (const auto& u : stops) EmitDisables(u);
      for (const auto& u : replaced_after_) EmitDisables(u);
      replaced_after_.clear();
      for (size_t k = sw.start; k < plan_->actions.size(); ++k) sw.steps.push_back(k);
      const Action& start = plan_->actions[sw.start];
      sw.mode = start.kind == ActionKind::kRestart ? SwitchMode::kInPlace
                : !sw.replaces.empty()             ? SwitchMode::kStopFirst
                : old_stops_later                  ? SwitchMode::kStartFirst
                                                   : SwitchMode::kFresh;
      // An in-place update of a unit file berth replaces: the undo writes the old one back.
      // (Every unit write comes before the first start: UnitFiles.)
      sw.restores_unit = start.kind == ActionKind::kRestart && replaced_files_.count(sw.unit);
      // Behind a front: held (the front holds while the old stops or restarts), or
      // make-before-break (the old one drains and stops after the route).
      if (sw.front_port)
        sw.mode = sw_held_  ? SwitchMode::kHold
                  : sw_mbb_ ? SwitchMode::kMakeBeforeBreak
                            : SwitchMode::kFresh;
      plan_->switches.push_back(std::move(sw));
    }
    for (const auto& t : draft_.stops)
      if (!stopped_.count(t.unit)) {
        FrontStopBegin(t);
        EmitStop(t, nullptr);
        EmitDisables(t.unit);
      }
  }

  // The enable or disable of `unit` in `list` (a re-enable: its disable, then its enable), once;
  // `of`: unit -> its actions in `list`. Not disruptive: nothing stops or starts.
  void EmitBoot(const std::vector<Action>& list,
                const std::unordered_map<std::string, std::vector<size_t>>& of,
                const std::string& unit) {
    if (booted_.count(unit)) return;
    auto it = of.find(unit);
    if (it == of.end()) return;
    for (size_t k : it->second) Emit(list[k]);
    booted_.insert(unit);
  }
  void EmitEnables(const std::string& unit) { EmitBoot(draft_.enables, enables_of_, unit); }
  void EmitDisables(const std::string& unit) { EmitBoot(draft_.disables, disables_of_, unit); }

  // Enables and disables of units that neither start nor stop in this plan (a running service
  // that was never enabled; a stopped one still enabled; one whose file is removed next).
  void BootState() {
    for (const Action& a : draft_.enables) EmitEnables(a.unit);
    for (const Action& a : draft_.disables) EmitDisables(a.unit);
  }

  // ---- Fronts (planners/fronts.h) ----
  // Each front's configuration as the plan starts: every backend the manifest puts behind
  // it, routing to what serves now. Written (and reloaded, when the front runs) before any
  // switch, so that a new backend is a server of the front before it is routed to.
  void FrontWrites() {
    for (const auto& [port, decl] : d_.fronts) {
      route_[port] = ActiveNow(d_, o_, port);
      FrontSpec spec = FrontOf(d_, port, route_[port]);
      std::string text = FrontConfigText(spec);
      auto now = o_.front_configs.find(port);
      written_[port] = now == o_.front_configs.end() ? "" : now->second;
      if (std::string why = FrontProblem(spec); !why.empty()) {
        Problem p;
        p.step = NextStep();
        p.resource = "front " + std::to_string(port);
        p.message = "the front of port " + std::to_string(port) + " cannot be configured: " + why;
        plan_->problems.push_back(p);
      }
      if (written_[port] == text) continue;
      const ObservedUnit* u = index_.Unit(FrontServiceName(port) + ".service");
      bool running = u && u->IsUp();
      std::string why = now == o_.front_configs.end() ? "new front configuration"
                        : now->second.find("\n# berth: ") != std::string::npos
                            ? "the running front differs from its configuration file"
                            : "the front's backends changed";
      Emit(WriteFrontAction(d_, spec, why, running));
      written_[port] = text;
    }
  }

  const FrontDecl* FrontOfService(const ServiceSpec* s) const {
    if (!s || !s->front_port) return nullptr;
    auto it = d_.fronts.find(s->front_port);
    return it == d_.fronts.end() ? nullptr : &it->second;
  }

  // Routes the front of `port` to `server` and, when another backend served, drains it.
  void RouteFront(int port, const std::string& server, const std::string& why) {
    const FrontDecl& decl = d_.fronts.at(port);
    FrontSpec spec = FrontOf(d_, port, route_[port]);
    std::string before = route_[port];
    Emit(RouteAction(d_.host, spec, server, why));
    route_[port] = server;
    if (before != kHoldServer && before != server) drain_[port] = before;
    (void)decl;
  }

  // A backend the front routed away from: its requests in flight finish before it stops.
  void DrainBefore(int port) {
    auto it = drain_.find(port);
    if (it == drain_.end()) return;
    Emit(DrainAction(d_.host, FrontOf(d_, port, route_[port]), d_.fronts.at(port), it->second));
    drain_.erase(it);
  }

  // Before a switch behind a front stops or restarts what serves: the front holds new
  // requests instead (they wait for the new backend), and the old one drains.
  void FrontSwitchBegin(const Transition& pick, const std::vector<std::string>& stops, Switch* sw) {
    sw_held_ = sw_mbb_ = false;
    const FrontDecl* decl = FrontOfService(pick.spec);
    if (!decl) return;
    int port = decl->port;
    sw->front_port = port;
    sw->front_socket = FrontSocketPath(d_.host, port);
    sw->backend_port = pick.spec->port.value_or(0);
    sw->undo_route = route_[port];
    bool restart = pick.kind == ActionKind::kRestart && !stopped_.count(pick.unit);
    bool stops_server = restart;
    for (const auto& u : stops)
      if (route_[port] != kHoldServer && d_.services.count(route_[port]) &&
          d_.services.at(route_[port]).UnitName() == u)
        stops_server = true;
    if (!stops_server) {
      mbb_[port] = route_[port] != kHoldServer && route_[port] != pick.spec->name;
      return;
    }
    mbb_[port] = false;
    sw_held_ = true;
    held_from_[port] = NextStep();
    size_t first = plan_->actions.size();
    if (!decl->ready_path.empty())
      Emit(ReadyAction(d_.host, FrontOf(d_, port, route_[port]), *decl, false));
    RouteFront(port, std::string(kHoldServer),
               "while " + pick.spec->name + (restart ? " restarts" : " starts"));
    DrainBefore(port);
    for (size_t k = first; k < plan_->actions.size(); ++k) sw->steps.push_back(k);
  }

  // After its gates: the front routes to the new backend; a backend it replaces that still
  // runs (make-before-break) drains, then stops.
  void FrontSwitchEnd(const Transition& pick, Switch* sw) {
    const FrontDecl* decl = FrontOfService(pick.spec);
    if (!decl) return;
    int port = decl->port;
    std::string old = route_[port];
    RouteFront(port, pick.spec->name, "it passed its gates");
    size_t routed = NextStep() - 1;
    if (held_from_.count(port)) {
      Disruption dis;
      dis.port = port;
      dis.from_step = held_from_[port];
      dis.until_step = routed;
      dis.service = pick.address;
      dis.front_mode = "held";
      dis.hold_ms = decl->hold_ms;
      dis.reason = "requests wait while " + pick.spec->name + " starts";
      plan_->disruptions.push_back(dis);
      held_from_.erase(port);
      if (!decl->ready_path.empty())
        Emit(ReadyAction(d_.host, FrontOf(d_, port, route_[port]), *decl, true));
      return;
    }
    if (mbb_[port] && old != kHoldServer && d_.services.count(old)) {
      const ServiceSpec& was = d_.services.at(old);
      DrainBefore(port);
      if (const Transition* st = PendingStop(was.UnitName()); st && !stopped_.count(st->unit)) {
        sw->replaces.push_back(EmitStop(*st, pick.spec));
        replaced_after_.push_back(st->unit);
        sw_mbb_ = true;
      }
      Disruption dis;
      dis.port = port;
      dis.from_step = routed;
      dis.until_step = routed;
      dis.service = pick.address;
      dis.front_mode = "none";
      dis.reason =
          "make-before-break" +
          (pick.spec->gpus.empty() ? std::string() : " on GPU " + GpuList(pick.spec->gpus)) + ": " +
          pick.spec->name + " started beside " + old +
          ", the front routes to it after its gates, then " + old + " drains and stops";
      plan_->disruptions.push_back(dis);
    }
    drain_.erase(port);
  }

  // A stop of what a front routes to, with nothing replacing it: the front holds instead.
  void FrontStopBegin(const Transition& t) {
    const FrontDecl* decl = FrontOfService(t.spec);
    if (!decl || route_[decl->port] != t.spec->name) return;
    RouteFront(decl->port, std::string(kHoldServer), t.spec->name + " stops");
    DrainBefore(decl->port);
  }

  // Each front's configuration as the plan leaves it: routing to the backend wanted running.
  // The route itself happened at run time (the admin socket); the file follows, so that the
  // next reload keeps it.
  void FrontFinals() {
    for (const auto& [port, decl] : d_.fronts) {
      std::string want = ActiveWanted(d_, port);
      if (route_[port] != want) {
        const ServiceSpec& s = d_.services.at(want == kHoldServer ? route_[port] : want);
        const ObservedUnit* u = index_.Unit(s.UnitName());
        bool up = want == kHoldServer || (u && u->IsUp() && !stopped_.count(s.UnitName()));
        if (up) RouteFront(port, want, "the front's route as the manifest wants it");
      }
      std::string text = FrontConfigText(FrontOf(d_, port, route_[port]));
      if (text == written_[port]) continue;
      Emit(WriteFrontAction(d_, FrontOf(d_, port, route_[port]),
                            "the front's configuration as this plan leaves it", false));
      written_[port] = text;
    }
  }

  void Removals() {
    for (auto& a : draft_.model_removals) Emit(std::move(a));
    for (auto& a : draft_.unit_removals) {
      if (reloaded_) a.detail += "; systemd forgets the unit at its next reload";
      Emit(std::move(a));
    }
    if (!reloaded_ && !draft_.unit_removals.empty()) {
      Action r = MakeAction(ActionKind::kDaemonReload);
      r.address = "systemd";
      r.reason = Reason::kUnitFilesChanged;
      size_t n = draft_.unit_removals.size();
      r.detail = std::to_string(n) + " unit file" + (n == 1 ? "" : "s") + " removed";
      Emit(r);
    }
  }

  const Desired& d_;
  const Observed& o_;
  const PlanIndex& index_;
  Draft& draft_;  // what is placed is moved out of it
  Plan* plan_;
  HostLedger host_;
  // Unit -> its first stop, its first restart (in draft_), its enables and disables (indexes in
  // draft_.enables, draft_.disables).
  std::unordered_map<std::string, const Transition*> stop_of_;
  std::unordered_map<std::string, const Transition*> restart_of_;
  std::unordered_map<std::string, std::vector<size_t>> enables_of_;
  std::unordered_map<std::string, std::vector<size_t>> disables_of_;
  std::unordered_set<std::string> replaced_files_;  // units whose existing file a write replaces
  // Port -> its disruptions that may still be open (EndDark), for disruptions[0, dark_indexed_).
  std::unordered_map<int, std::vector<size_t>> dark_of_;
  size_t dark_indexed_ = 0;
  bool reloaded_ = false;
  std::set<std::string> stopped_;
  size_t stops_left_ = 0;                    // units of stop_of_ not in stopped_ (Pending)
  std::set<std::string> started_;            // units whose start or restart is emitted
  std::set<std::string> booted_;             // units whose enable or disable is emitted
  std::vector<size_t> open_;                 // disruptions waiting for the next health gate
  std::vector<size_t> unknown_port_starts_;  // Disruption::unknown_port_starts
  // Fronts, by public port: the server each routes to as the steps so far leave it, the
  // backend to drain before its stop, where a hold began, whether the switch under way is
  // make-before-break, and the configuration text on disk as the steps so far leave it.
  std::map<int, std::string> route_;
  std::map<int, std::string> drain_;
  std::map<int, size_t> held_from_;
  std::map<int, bool> mbb_;
  std::map<int, std::string> written_;
  std::vector<std::string> replaced_after_;  // units a make-before-break switch stopped
  bool sw_held_ = false;                     // the switch being placed holds its front
  bool sw_mbb_ = false;                      // the switch being placed is make-before-break
  uint64_t asleep_bytes_ = 0;  // host memory the plan's sleeps take so far (the sleeps' ledger)
};

}  // namespace

void Sequence(const Desired& d, const PlanIndex& index, Draft* draft, Plan* plan) {
  const Observed& o = index.observed();
  std::string why = o.gpu_error.empty() ? std::string("GPUs not observed") : o.gpu_error;
  if (!o.gpus_known && d.host.gpus) {
    draft->warnings.push_back("GPU memory checked against the manifest's host.gpus (" +
                              std::to_string(d.host.gpus->count) + " × " +
                              FormatGiB(d.host.gpus->memory_bytes) +
                              "), counting only berth's running services: " + why);
  } else if (!o.gpus_known) {
    draft->warnings.push_back("GPU memory checks skipped: " + why +
                              " (state host.gpus in the manifest to check against it)");
  }
  if (!o.ports_known)
    draft->warnings.push_back(
        "port checks limited to berth's own services: listening ports "
        "not observed");
  Sequencer(d, index, draft, plan).Run();
}

}  // namespace berth
