// Health gates: the wait-healthy step after a start, and the rules that come from berth's own
// records (the last failures, an apply that stopped half-way). Pure, like the rest of planners/.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "core/plan.h"
#include "planners/plan_index.h"

namespace berth {

/// Service name -> the model id its server lists in /v1/models, as its engine adapter says
/// for the snapshot the planner renders it with (EngineAdapter::ReportedName; trtllm-serve
/// lists its model folder's name). A service missing here gets what its adapter says without a
/// snapshot.
using ReportedNames = std::map<std::string, std::string>;

/// The name the gates ask /v1/models for: "" when berth cannot know it (a state-only service,
/// engine: command without served_name): the health path alone then decides.
std::string GateServedName(const ServiceSpec& s, const ReportedNames& names);

/// The wait-healthy step for service `s` at `address` ("service/<name>"): its health path until
/// 200 and /v1/models lists GateServedName (when there is one), within its health timeout.
/// `detail` "" = the probe.
Action HealthGate(const ServiceSpec& s, const std::string& address, const ReportedNames& names,
                  std::string detail = "");

/// The gates `s` declares after its health gate (gates.smoke, floor, soak), in the order they
/// run. Each fails the switch like a failed health gate. Empty when it declares none or has no
/// port. `host`: where a fronted service's front is asked (the soak's 5xx count).
std::vector<Action> GatesAfterHealth(const HostSpec& host, const ServiceSpec& s,
                                     const std::string& address, const ReportedNames& names);

/// Relative floors (gates.floor.relative): for each switch whose floor compares with the service
/// it replaces, a kReference step before the switch's first step measures that service with the
/// floor's load, and the floor gate names it (FloorStep::reference_unit). The newest figures
/// berth recorded of that service with the settings it runs now and the same load
/// (observed.state.gate_figures) go into the floor (FloorStep::recorded): the reference when the
/// service cannot be measured (it does not serve; the measurement fails). With neither, the
/// floor says it falls back to the absolute limits, or (without_reference: refuse) the plan is
/// blocked.
void ApplyRelativeFloors(const Desired& desired, const PlanIndex& index, Plan* plan);

/// Inserts `actions` before action `at` (0-based), the one way a pass adds steps after sequencing:
/// every index the plan holds (the switches' steps, gates, stops, starts and health gates, the
/// disruptions' and the problems' steps) moves with the action it names. Before
/// MarkTurnsAndGroups, which states the groups and download batches of the final actions.
void InsertActions(Plan* plan, size_t at, const std::vector<Action>& actions);

/// What every floor gate's service will run when it is measured (its unit file as the plan
/// leaves it): the model commit and RestartDigest recorded with its figures.
void StampFloorSettings(const PlanIndex& index, Plan* plan);

/// What berth's records add to a plan (observed.state):
///  - a warning per last failure, and one when an apply stopped before it finished;
///  - for every service that an interrupted apply started but never saw through all its gates
///    (BerthState::ungated: killed before or during its health, smoke or floor gate), its whole
///    chain again: the health gate and every gate after it, reason kInterruptedSwitch;
///  - a health gate for every service whose last apply failed (a failed gate that left it
///    running);
///    each when the plan does not gate it already and the service is still wanted running.
/// A blocked plan gets the warnings only.
void ApplyStateRules(const Desired& desired, const Observed& observed, const ReportedNames& names,
                     Plan* plan);

}  // namespace berth
