#include "planners/host_ledger.h"

#include <algorithm>

#include "planners/plan_index.h"
#include "planners/servers/adapter.h"
#include "planners/standby.h"

namespace berth {
namespace {

std::string PidHolder(int pid, const std::string& name) {
  return "pid " + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")");
}

}  // namespace

uint64_t GpuClaim(const ServiceSpec& s, uint64_t total) {
  if (!s.has_engine) return s.gpu_memory.value_or(0);
  if (auto share = AdapterFor(s.engine).MemoryShare(s))
    return static_cast<uint64_t>(share->first * static_cast<double>(total));
  return s.gpu_memory.value_or(0);
}

uint64_t HostLedger::Claim(const ServiceSpec& s, int gpu) const {
  auto total = total_.find(gpu);
  uint64_t claim = GpuClaim(s, total == total_.end() ? 0 : total->second);
  if (claim > 0) return claim;
  auto it = derived_.find(s.UnitName());
  return it == derived_.end() ? 0 : it->second;
}

HostLedger::HostLedger(const Desired& d, const PlanIndex& index,
                       std::map<std::string, uint64_t> derived)
    : derived_(std::move(derived)) {
  const Observed& o = index.observed();
  known_ = o.gpus_known;
  if (!o.gpus_known && d.host.gpus) {
    // The manifest's inventory stands in for what could not be observed: berth's own running
    // services are the only claims it can count.
    known_ = true;
    for (int i = 0; i < d.host.gpus->count; ++i) total_[i] = d.host.gpus->memory_bytes;
    for (const auto& [n, s] : d.services) {
      const ObservedUnit* u = index.Unit(s.UnitName());
      if (!u || !u->IsActive()) continue;
      // Asleep (standby: sleep), it keeps only a residue.
      const bool asleep = SleepsOnStandby(s) && o.Asleep(u->name);
      for (int i : s.gpus)
        if (total_.count(i))
          HoldGpu(i, s.UnitName(),
                  asleep ? std::min(Claim(s, i), StandbyResidual(total_[i])) : Claim(s, i));
    }
  }
  for (const auto& g : o.gpus) {
    total_[g.index] = g.memory_total;
    uint64_t attributed = 0;
    for (const auto& p : g.processes) {
      std::string holder = p.unit.empty() ? PidHolder(p.pid, p.name) : p.unit;
      HoldGpu(g.index, holder, p.used_bytes);
      attributed += p.used_bytes;
    }
    if (g.memory_used > attributed)
      HoldGpu(g.index, "memory not attributed to any process", g.memory_used - attributed);
  }
  for (const auto& p : o.ports)
    HoldPort(p.port, p.unit.empty() ? PidHolder(p.pid, p.process) : p.unit);
  if (!o.ports_known) {
    for (const auto& [n, s] : d.services) {
      const ObservedUnit* u = index.Unit(s.UnitName());
      if (s.port && u && u->IsActive()) HoldPort(*s.port, s.UnitName());
    }
  }
}

void HostLedger::HoldGpu(int gpu, const std::string& holder, uint64_t bytes) {
  held_[gpu][holder] += bytes;
  used_[gpu] += bytes;
}

void HostLedger::HoldPort(int port, const std::string& holder) {
  ports_.emplace(port, holder);
  ports_of_[holder].push_back(port);
}

uint64_t HostLedger::Free(int i) const {
  auto it = used_.find(i);
  uint64_t used = it == used_.end() ? 0 : it->second;
  return used >= total_.at(i) ? 0 : total_.at(i) - used;
}

std::string HostLedger::PortHolder(int port) const {
  auto it = ports_.find(port);
  return it == ports_.end() ? "" : it->second;
}

Resources HostLedger::Release(const std::string& holder) {
  Resources r;
  for (auto& [i, m] : held_) {
    auto it = m.find(holder);
    if (it == m.end()) continue;
    if (it->second > 0) r.gpu_bytes[i] = it->second;
    used_[i] -= it->second;
    m.erase(it);
  }
  auto mine = ports_of_.find(holder);
  if (mine != ports_of_.end()) {
    r.ports = std::move(mine->second);
    ports_of_.erase(mine);
    std::sort(r.ports.begin(), r.ports.end());  // in port order, as ports_ lists them
    for (int p : r.ports) {
      auto [first, last] = ports_.equal_range(p);
      for (auto it = first; it != last; ++it)
        if (it->second == holder) {
          ports_.erase(it);
          break;
        }
    }
  }
  return r;
}

void HostLedger::Hold(const std::string& holder, const Resources& r) {
  for (const auto& [i, b] : r.gpu_bytes) HoldGpu(i, holder, b);
  for (int p : r.ports) HoldPort(p, holder);
}

}  // namespace berth
