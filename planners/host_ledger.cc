#include "planners/host_ledger.h"

#include "planners/engines/adapter.h"

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

HostLedger::HostLedger(const Desired& d, const Observed& o) : known_(o.gpus_known) {
  if (!o.gpus_known && d.host.gpus) {
    // The manifest's inventory stands in for what could not be observed: berth's own running
    // services are the only claims it can count.
    known_ = true;
    for (int i = 0; i < d.host.gpus->count; ++i) total_[i] = d.host.gpus->memory_bytes;
    for (const auto& [n, s] : d.services) {
      const ObservedUnit* u = o.FindUnit(s.UnitName());
      if (!u || !u->IsActive()) continue;
      for (int i : s.gpus)
        if (total_.count(i)) held_[i][s.UnitName()] += GpuClaim(s, total_[i]);
    }
  }
  for (const auto& g : o.gpus) {
    total_[g.index] = g.memory_total;
    uint64_t attributed = 0;
    for (const auto& p : g.processes) {
      std::string holder = p.unit.empty() ? PidHolder(p.pid, p.name) : p.unit;
      held_[g.index][holder] += p.used_bytes;
      attributed += p.used_bytes;
    }
    if (g.memory_used > attributed)
      held_[g.index]["memory not attributed to any process"] += g.memory_used - attributed;
  }
  for (const auto& p : o.ports)
    ports_.emplace(p.port, p.unit.empty() ? PidHolder(p.pid, p.process) : p.unit);
  if (!o.ports_known) {
    for (const auto& [n, s] : d.services) {
      const ObservedUnit* u = o.FindUnit(s.UnitName());
      if (s.port && u && u->IsActive()) ports_.emplace(*s.port, s.UnitName());
    }
  }
}

uint64_t HostLedger::Free(int i) const {
  uint64_t used = 0;
  auto it = held_.find(i);
  if (it != held_.end())
    for (const auto& [h, b] : it->second) used += b;
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

void HostLedger::Hold(const std::string& holder, const Resources& r) {
  for (const auto& [i, b] : r.gpu_bytes) held_[i][holder] += b;
  for (int p : r.ports) ports_.emplace(p, holder);
}

}  // namespace berth
