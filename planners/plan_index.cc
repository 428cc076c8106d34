#include "planners/plan_index.h"

namespace berth {

PlanIndex::PlanIndex(const Observed& o) : o_(o) {
  units_.reserve(o.units.size());
  for (const ObservedUnit& u : o.units) units_.emplace(u.name, &u);
  state_units_.reserve(o.state.units.size());
  for (const std::string& u : o.state.units) state_units_.insert(u);
  repos_.reserve(o.store.repos.size());
  for (const ObservedRepo& r : o.store.repos) repos_.emplace(r.repo_id, &r);
  for (const HubInfo& h : o.hub) hub_[h.repo_id].push_back(&h);
  for (const ListeningPort& p : o.ports)
    if (!p.unit.empty()) ports_[p.unit].push_back(p.port);
  for (const ObservedGpu& g : o.gpus)
    for (const GpuProcess& p : g.processes)
      if (!p.unit.empty()) gpu_bytes_[p.unit][g.index] += p.used_bytes;
}

const ObservedUnit* PlanIndex::Unit(const std::string& name) const {
  auto it = units_.find(name);
  return it == units_.end() ? nullptr : it->second;
}

const ObservedRepo* PlanIndex::Repo(const std::string& repo_id) const {
  auto it = repos_.find(repo_id);
  return it == repos_.end() ? nullptr : it->second;
}

const HubInfo* PlanIndex::Hub(const std::string& repo_id, const std::string& revision) const {
  auto it = hub_.find(repo_id);
  if (it == hub_.end()) return nullptr;
  for (const HubInfo* h : it->second)
    if (h->revision == revision || h->commit == revision) return h;
  return nullptr;
}

bool PlanIndex::Owns(const ObservedUnit& u) const {
  if (!u.managed) return false;
  if (!u.lineage.empty()) return !o_.state.lineage.empty() && u.lineage == o_.state.lineage;
  return state_units_.count(std::string_view(u.name)) > 0;
}

const std::vector<int>& PlanIndex::PortsOf(const std::string& unit) const {
  static const std::vector<int> kNone;
  auto it = ports_.find(unit);
  return it == ports_.end() ? kNone : it->second;
}

const std::map<int, uint64_t>& PlanIndex::GpuBytesOf(const std::string& unit) const {
  static const std::map<int, uint64_t> kNone;
  auto it = gpu_bytes_.find(unit);
  return it == gpu_bytes_.end() ? kNone : it->second;
}

}  // namespace berth
