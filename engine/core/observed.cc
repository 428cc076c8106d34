#include "engine/core/observed.h"

#include <algorithm>

namespace berth {

const ObservedUnit* Observed::FindUnit(const std::string& name) const {
  for (const auto& u : units)
    if (u.name == name) return &u;
  return nullptr;
}

bool Observed::Owns(const ObservedUnit& u) const {
  if (!u.managed) return false;
  if (!u.lineage.empty()) return !state.lineage.empty() && u.lineage == state.lineage;
  return std::find(state.units.begin(), state.units.end(), u.name) != state.units.end();
}

const ObservedRepo* Observed::FindRepo(const std::string& repo_id) const {
  for (const auto& r : store.repos)
    if (r.repo_id == repo_id) return &r;
  return nullptr;
}

const HubInfo* Observed::FindHub(const std::string& repo_id, const std::string& revision) const {
  for (const auto& h : hub)
    if (h.repo_id == repo_id && (h.revision == revision || h.commit == revision)) return &h;
  return nullptr;
}

const ObservedGpu* Observed::FindGpu(int index) const {
  for (const auto& g : gpus)
    if (g.index == index) return &g;
  return nullptr;
}

}  // namespace berth
