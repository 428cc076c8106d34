// The fleet's rules, pure: which wave a host is in, which step of a plan first takes a service
// down, and whether a host may go dark now given what the other hosts reported. How many are
// dark at once is not decided here: etcd counts the slots (engine/fleet/fleet_turn.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/fleet_report.h"
#include "core/plan.h"

namespace berth {

/// The index of the first wave of `fleet` whose globs match `host`; fleet.waves.size() (after
/// every wave) when none does; 0 without waves.
size_t WaveIndex(const FleetSpec& fleet, const std::string& host);
/// Its name: the wave's, "(after all waves)" past the last, "" without waves.
std::string WaveName(const FleetSpec& fleet, size_t index);

/// The 0-based index of the first action the plan marks as taking a service down
/// (Action::takes_down, the one definition: MarkTurnsAndGroups); nullopt when none does.
std::optional<size_t> FirstDisruptiveStep(const Plan& plan);

struct FleetTurnVerdict {
  enum Kind { kGo, kWait, kStop } kind = kGo;
  std::string why;  // kWait, kStop: for the operator
};

/// Whether `host`, about to go dark for the manifest `digest`, may take a slot now:
/// - kStop when a host reported that a switch of this same manifest failed (the rollout stops
///   until the manifest changes);
/// - kWait while a host of an earlier wave has not reported this manifest converged (or no host
///   of that wave has reported at all);
/// - kGo otherwise.
FleetTurnVerdict MayGoDark(const FleetSpec& fleet, const std::string& host,
                           const std::string& digest, const std::vector<FleetReport>& reports);

}  // namespace berth
