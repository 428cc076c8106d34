// The sequence: order the draft (downloads, unit files, reload, stops and starts, removals)
// and check disk, GPU memory and ports at every step, by simulating the host step by step.
#include <algorithm>
#include <map>
#include <set>

#include "engine/core/units.h"
#include "planners/draft.h"

namespace berth {
namespace {

std::string GpuList(const std::vector<int>& gpus) {
  // "0-7", "0,2", "3"
  std::vector<int> g = gpus;
  std::sort(g.begin(), g.end());
  std::string out;
  for (size_t i = 0; i < g.size();) {
    size_t j = i;
    while (j + 1 < g.size() && g[j + 1] == g[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(g[i]);
    if (j > i + 1)
      out += "-" + std::to_string(g[j]);
    else if (j == i + 1)
      out += "," + std::to_string(g[j]);
    i = j + 1;
  }
  return out;
}

// Per-GPU claim of a service: what must be free on each of its GPUs when it starts.
uint64_t Claim(const ServiceSpec& s, uint64_t total) {
  switch (s.engine) {
    case EngineKind::kVllm:
      return static_cast<uint64_t>(s.vllm.gpu_memory_utilization * static_cast<double>(total));
    case EngineKind::kSglang:
      return static_cast<uint64_t>(s.sglang.mem_fraction_static * static_cast<double>(total));
    default:
      return s.gpu_memory.value_or(0);
  }
}

// The host's GPU memory and ports as the sequence changes them.
class HostModel {
 public:
  HostModel(const Desired& d, const Observed& o) : o_(o), known_(o.gpus_known) {
    if (!o.gpus_known && d.host.gpus) {
      // The manifest's inventory stands in for what could not be observed: berth's own running
      // services are the only claims it can count.
      known_ = true;
      for (int i = 0; i < d.host.gpus->count; ++i) total_[i] = d.host.gpus->memory_bytes;
      for (const auto& [n, s] : d.services) {
        const ObservedUnit* u = o.FindUnit(s.UnitName());
        if (!u || !u->IsActive() || !s.has_engine) continue;
        for (int i : s.gpus)
          if (total_.count(i)) held_[i][s.UnitName()] += Claim(s, total_[i]);
      }
    }
    for (const auto& g : o.gpus) {
      total_[g.index] = g.memory_total;
      uint64_t attributed = 0;
      for (const auto& p : g.processes) {
        std::string holder = p.unit.empty() ? "pid " + std::to_string(p.pid) +
                                                  (p.name.empty() ? "" : " (" + p.name + ")")
                                            : p.unit;
        held_[g.index][holder] += p.used_bytes;
        attributed += p.used_bytes;
      }
      if (g.memory_used > attributed)
        held_[g.index]["memory not attributed to any process"] += g.memory_used - attributed;
    }
    for (const auto& p : o.ports) {
      std::string holder = p.unit.empty() ? "pid " + std::to_string(p.pid) +
                                                (p.process.empty() ? "" : " (" + p.process + ")")
                                          : p.unit;
      ports_.emplace(p.port, holder);
    }
    if (!o.ports_known) {
      for (const auto& [n, s] : d.services) {
        const ObservedUnit* u = o.FindUnit(s.UnitName());
        if (s.port && u && u->IsActive()) ports_.emplace(*s.port, s.UnitName());
      }
    }
  }

  bool gpus_known() const { return known_; }
  size_t gpu_count() const { return total_.size(); }
  bool HasGpu(int i) const { return total_.count(i) > 0; }
  uint64_t Total(int i) const { return total_.at(i); }
  uint64_t Free(int i) const {
    uint64_t used = 0;
    auto it = held_.find(i);
    if (it != held_.end())
      for (const auto& [h, b] : it->second) used += b;
    return used >= total_.at(i) ? 0 : total_.at(i) - used;
  }
  const std::map<std::string, uint64_t>& Holders(int i) { return held_[i]; }
  std::string PortHolder(int port) const {
    auto it = ports_.find(port);
    return it == ports_.end() ? "" : it->second;
  }
  std::vector<int> PortsOf(const std::string& holder) const {
    std::vector<int> out;
    for (const auto& [p, h] : ports_)
      if (h == holder) out.push_back(p);
    return out;
  }
  /// Releases everything `holder` holds; returns what it gave back.
  Resources Release(const std::string& holder) {
    Resources r;
    for (auto& [i, m] : held_) {
      auto it = m.find(holder);
      if (it != m.end() && it->second > 0) r.gpu_bytes[i] = it->second;
      if (it != m.end()) m.erase(it);
    }
    for (auto it = ports_.begin(); it != ports_.end();) {
      if (it->second == holder) {
        r.ports.push_back(it->first);
        it = ports_.erase(it);
      } else {
        ++it;
      }
    }
    return r;
  }
  void Hold(const std::string& holder, const Resources& r) {
    for (const auto& [i, b] : r.gpu_bytes) held_[i][holder] += b;
    for (int p : r.ports) ports_.emplace(p, holder);
  }

 private:
  const Observed& o_;
  bool known_;
  std::map<int, uint64_t> total_;
  std::map<int, std::map<std::string, uint64_t>> held_;
  std::multimap<int, std::string> ports_;
};

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
    UnitFiles();
    Transitions();
    Removals();
  }

 private:
  int Emit(Action a) {
    plan_->actions.push_back(std::move(a));
    return static_cast<int>(plan_->actions.size());
  }
  int NextStep() const { return static_cast<int>(plan_->actions.size()) + 1; }

  void Downloads() {
    uint64_t reserve = d_.host.reserve_bytes;
    uint64_t free = o_.store.free_bytes;
    uint64_t available = free > reserve ? free - reserve : 0;
    plan_->disk_free = free;
    plan_->disk_reserve = reserve;
    uint64_t needed = 0;
    bool reported = false;
    for (Action& a : draft_.downloads) {
      needed += a.requires_.disk_bytes;
      if (a.requires_.disk_bytes == 0 && a.detail.find("size unknown") != std::string::npos)
        plan_->disk_known = false;
      bool fits = needed <= available;
      if (a.requires_.disk_bytes > 0)
        a.detail +=
            fits ? " (fits: " + FormatBytes(free) + " free, reserve " + FormatSize(reserve) + ")"
                 : "";
      int step = Emit(a);
      if (!fits && !reported) {
        reported = true;
        Problem p;
        p.step = step;
        p.resource = "disk";
        p.needed = needed;
        p.available = available;
        p.message = "downloads up to step " + std::to_string(step) + " need " +
                    FormatBytes(needed) + " but the store has " + FormatBytes(free) + " free − " +
                    FormatSize(reserve) + " reserve = " + FormatBytes(available) + ": short by " +
                    FormatBytes(needed - available) + " (" + std::to_string(needed - available) +
                    " bytes). Free space in " + o_.store.path +
                    ", lower host.reserve, or drop a model";
        plan_->problems.push_back(p);
      }
    }
    plan_->disk_needed = needed;
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

  // The stops (from draft_.stops) that `t` needs first, or a problem when even they won't do.
  struct Need {
    std::vector<std::string> stops;  // unit names
    std::vector<Problem> problems;
  };

  bool Pending(const std::string& unit) const {
    for (const auto& s : draft_.stops)
      if (s.unit == unit && !stopped_.count(unit)) return true;
    return false;
  }

  Need Needs(const Transition& t) {
    Need n;
    const ServiceSpec& s = *t.spec;
    auto add = [&](const std::string& u) {
      if (std::find(n.stops.begin(), n.stops.end(), u) == n.stops.end()) n.stops.push_back(u);
    };
    if (s.port) {
      std::string h = host_.PortHolder(*s.port);
      if (!h.empty() && h != t.unit) {
        // A holder that restarts later (ports swapped between services) is stopped first and
        // started instead of restarted.
        if (Pending(h) || PendingRestart(h)) {
          add(h);
        } else {
          Problem p;
          p.resource = "port " + std::to_string(*s.port);
          p.message = t.address + " needs port " + std::to_string(*s.port) + ", held by " + h +
                      ", which the manifest does not stop: stop it, or choose another port";
          n.problems.push_back(p);
        }
      }
    }
    if (!s.has_engine) return n;
    for (int i : s.gpus) {
      if (!host_.gpus_known()) break;
      if (!host_.HasGpu(i)) {
        Problem p;
        p.resource = "gpu " + std::to_string(i);
        p.message = t.address + " asks for GPU " + std::to_string(i) + ", which this host " +
                    "does not have (" + std::to_string(host_.gpu_count()) + " GPUs)";
        n.problems.push_back(p);
        continue;
      }
      uint64_t claim = Claim(s, host_.Total(i));
      uint64_t free = host_.Free(i);
      // A restart gives back its own memory first.
      const auto& holders = host_.Holders(i);
      if (t.kind == ActionKind::kRestart) {
        auto it = holders.find(t.unit);
        if (it != holders.end()) free += it->second;
      }
      for (const auto& u : n.stops) {
        auto it = holders.find(u);
        if (it != holders.end()) free += it->second;
      }
      if (free >= claim) continue;
      // Largest pending holders first, names breaking ties, until the claim fits.
      std::vector<std::pair<uint64_t, std::string>> candidates;
      for (const auto& [h, b] : holders)
        if (Pending(h) && std::find(n.stops.begin(), n.stops.end(), h) == n.stops.end())
          candidates.emplace_back(b, h);
      std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (const auto& [b, h] : candidates) {
        if (free >= claim) break;
        add(h);
        free += b;
      }
      if (free >= claim) continue;
      Problem p;
      p.resource = "gpu " + std::to_string(i);
      p.needed = claim;
      p.available = free;
      std::string others;
      for (const auto& [h, b] : holders) {
        if (h == t.unit || std::find(n.stops.begin(), n.stops.end(), h) != n.stops.end()) continue;
        others += (others.empty() ? "" : ", ") + h + " holds " + FormatGiB(b);
      }
      p.message = t.address + " needs " + FormatGiB(claim) + " on GPU " + std::to_string(i) +
                  " (of " + FormatGiB(host_.Total(i)) + "), only " + FormatGiB(free) +
                  " can be freed: short by " + FormatGiB(claim - free) +
                  (others.empty() ? "" : "; " + others + ", not stopped by this plan") +
                  ". Stop or move what holds it, or lower the service's memory share";
      n.problems.push_back(p);
    }
    return n;
  }

  // Stops that a stop-first service replaces: pending holders of its port or GPUs.
  std::vector<std::string> Replaces(const Transition& t) {
    std::vector<std::string> out;
    const ServiceSpec& s = *t.spec;
    auto add = [&](const std::string& u) {
      if (Pending(u) && std::find(out.begin(), out.end(), u) == out.end()) out.push_back(u);
    };
    if (s.port) add(host_.PortHolder(*s.port));
    for (int i : s.gpus)
      if (host_.HasGpu(i))
        for (const auto& [h, b] : host_.Holders(i)) add(h);
    return out;
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

  void EmitStop(const Transition& t, const std::string& for_service, int for_port) {
    Action a;
    a.kind = ActionKind::kStop;
    a.address = t.address;
    a.unit = t.unit;
    a.reason = for_service.empty() ? t.reason : Reason::kFreesResources;
    a.for_service = for_service;
    Resources freed = host_.Release(t.unit);
    a.frees = freed;
    std::string what;
    if (!freed.gpu_bytes.empty()) {
      std::vector<int> gpus;
      uint64_t per = 0;
      bool same = true;
      for (const auto& [i, b] : freed.gpu_bytes) {
        gpus.push_back(i);
        same = same && (per == 0 || per == b);
        per = b;
      }
      what = (same ? std::to_string(gpus.size()) + " × " + FormatGiB(per) : std::string("memory")) +
             " on GPU " + GpuList(gpus);
    }
    for (int p : freed.ports)
      what += (what.empty() ? "" : " and ") + std::string("port ") + std::to_string(p);
    if (for_service.empty()) {
      a.detail = t.detail + (what.empty() ? "" : "; frees " + what);
    } else {
      a.detail = "frees " + (what.empty() ? std::string("its resources") : what) + " for " +
                 for_service + " (" + t.detail + ")";
    }
    int step = Emit(a);
    stopped_.insert(t.unit);
    for (int p : freed.ports) {
      Disruption dis;
      dis.port = p;
      dis.from_step = step;
      dis.service = t.address;
      if (p == for_port) {
        dis.reason = t.unit + " stopped to make room for " + for_service;
        open_.push_back(plan_->disruptions.size());
      } else {
        dis.reason = t.unit + " stopped (" + t.detail + ")";
      }
      plan_->disruptions.push_back(dis);
    }
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
    if (s.has_engine && host_.gpus_known())
      for (int i : s.gpus)
        if (host_.HasGpu(i)) claim.gpu_bytes[i] = Claim(s, host_.Total(i));
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
    int until = step;
    if (s.has_engine && s.port) {
      Action w;
      w.kind = ActionKind::kWaitHealthy;
      w.address = t.address;
      w.unit = t.unit;
      w.reason = Reason::kHealthGate;
      w.health_path = s.health.path;
      w.port = *s.port;
      w.served_name = s.ServedName();
      w.timeout_ms = s.health.timeout_ms;
      w.interval_ms = s.health.interval_ms;
      w.detail = "GET " + s.health.path + " until 200 and /v1/models lists '" + s.ServedName() +
                 "' (timeout " + FormatDurationMs(s.health.timeout_ms) + ")";
      until = Emit(w);
    }
    for (size_t idx : open_) plan_->disruptions[idx].until_step = until;
    open_.clear();
    // A port left dark earlier is served again once the service now on it is healthy.
    if (s.has_engine && s.port)
      for (Disruption& dis : plan_->disruptions)
        if (dis.port == *s.port && dis.until_step == 0) dis.until_step = until;
  }

  void Transitions() {
    std::vector<const Transition*> remaining;
    for (const auto& t : draft_.starts) remaining.push_back(&t);
    while (!remaining.empty()) {
      // Prefer a start that needs no stop (new before old); else the first by name.
      const Transition* pick = nullptr;
      Need need;
      for (const Transition* t : remaining) {
        if (t->spec->strategy == Strategy::kStopFirst && !Replaces(*t).empty()) continue;
        Need n = Needs(*t);
        if (n.stops.empty() && n.problems.empty()) {
          pick = t;
          need = n;
          break;
        }
      }
      if (!pick) {
        pick = remaining.front();
        need = Needs(*pick);
      }
      remaining.erase(std::find(remaining.begin(), remaining.end(), pick));
      std::vector<std::string> stops = need.stops;
      if (pick->spec->strategy == Strategy::kStopFirst)
        for (const auto& u : Replaces(*pick))
          if (std::find(stops.begin(), stops.end(), u) == stops.end()) stops.push_back(u);
      if (pick->spec->strategy == Strategy::kStartFirst && !need.stops.empty()) {
        Problem p;
        p.step = NextStep();
        p.resource = "strategy";
        p.message = pick->address + " has strategy: start-first, but it cannot start while " +
                    need.stops.front() +
                    " runs (GPU memory or port); use strategy: auto or stop-first";
        plan_->problems.push_back(p);
      }
      std::sort(stops.begin(), stops.end());
      for (const auto& u : stops)
        if (const Transition* st = PendingStop(u))
          EmitStop(*st, pick->spec->name, pick->spec->port.value_or(0));
        else if (const Transition* rt = PendingRestart(u))
          EmitStop(*rt, pick->spec->name, pick->spec->port.value_or(0));
      for (Problem& p : need.problems) {
        p.step = NextStep();
        plan_->problems.push_back(p);
      }
      EmitStart(*pick);
    }
    for (const auto& t : draft_.stops)
      if (!stopped_.count(t.unit)) EmitStop(t, "", 0);
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
  HostModel host_;
  bool reloaded_ = false;
  std::set<std::string> stopped_;
  std::set<std::string> started_;  // units whose start or restart is emitted
  std::vector<size_t> open_;       // disruptions waiting for the next health gate
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
