// The lookups by name a plan makes in what was observed, built once at the start of planning
// (MakePlan) so that a plan grows linearly with the host: each is a hash lookup, never a scan of
// every unit, repo or port. Used by planners/ and by engine/apply/ (counting the services up,
// a saved plan's fingerprints), which look at the same observation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/observed.h"

namespace berth {

/// Holds pointers into the Observed it was built from: it must not outlive it, and the
/// Observed must not change while it is used. Where the Observed lists a name twice, the first
/// wins, as with Observed::FindUnit and FindRepo.
class PlanIndex {
 public:
  explicit PlanIndex(const Observed& observed);

  const Observed& observed() const { return o_; }
  /// Observed::FindUnit.
  const ObservedUnit* Unit(const std::string& name) const;
  /// Observed::FindRepo.
  const ObservedRepo* Repo(const std::string& repo_id) const;
  /// Observed::FindHub: the first listing of `repo_id` asked as `revision` or resolved to it.
  const HubInfo* Hub(const std::string& repo_id, const std::string& revision) const;
  /// Observed::Owns, with the state's unit list hashed.
  bool Owns(const ObservedUnit& u) const;
  /// The TCP ports the processes of `unit` listen on, as observed (in the observation's order,
  /// repeats kept); empty when none or ports were not observed.
  const std::vector<int>& PortsOf(const std::string& unit) const;
  /// GPU index -> bytes the processes of `unit` hold, as observed; empty when none.
  const std::map<int, uint64_t>& GpuBytesOf(const std::string& unit) const;

 private:
  // Keyed by views of the Observed's own names: building and dropping the index of 10,000
  // units copies no string.
  const Observed& o_;
  std::unordered_map<std::string_view, const ObservedUnit*> units_;
  std::unordered_set<std::string_view> state_units_;
  std::unordered_map<std::string_view, const ObservedRepo*> repos_;
  std::unordered_map<std::string_view, std::vector<const HubInfo*>> hub_;  // repo_id -> listings
  std::unordered_map<std::string_view, std::vector<int>> ports_;
  std::unordered_map<std::string_view, std::map<int, uint64_t>> gpu_bytes_;
};

}  // namespace berth
