#include "planners/planner.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "planners/dark_windows.h"
#include "planners/draft.h"
#include "planners/gates.h"
#include "planners/glob.h"
#include "planners/plan_index.h"
#include "planners/prewarm.h"
#include "planners/state_only.h"

namespace berth {

Plan MakePlan(const Desired& desired, const Observed& observed, const PlanOptions& options) {
  Plan plan;
  plan.host = observed.hostname;
  for (const auto& [key, pattern] : desired.host.match) {
    if (key == "hostname" && !GlobMatch(pattern, observed.hostname)) {
      plan.host_matches = false;
      plan.skip_reason = "host.match.hostname '" + pattern + "' does not match host '" +
                         observed.hostname + "' (" + desired.host.loc.ToString() +
                         "): nothing of this manifest applies here";
      return plan;
    }
  }
  Draft draft;
  draft.engine_check_dir = options.engine_check_dir;
  auto berth_exe = desired.executables.find("berth");
  draft.berth_executable =
      berth_exe != desired.executables.end() ? berth_exe->second : options.berth_executable;
  // Every lookup by name in what was observed goes through it.
  const PlanIndex index(observed);
  // State-only services with the port and GPUs the manifest declares or berth saw them hold.
  // (A copy of the manifest's services only when one has no engine: a copy of 10,000 was
  // 17 MB of a plan's peak.)
  std::optional<Desired> with_state_only;
  if (std::any_of(desired.services.begin(), desired.services.end(),
                  [](const auto& entry) { return !entry.second.has_engine; }))
    with_state_only = ResolveStateOnly(desired, index, &draft);
  const Desired& resolved = with_state_only ? *with_state_only : desired;
  DiffModels(resolved, index, &draft);
  DeriveLlamaClaims(resolved, &draft);
  DiffServices(resolved, index, options.berth_version, &draft);
  const ReportedNames& names = draft.reported_names;
  Sequence(resolved, index, &draft, &plan);
  ApplyRelativeFloors(resolved, index, &plan);
  EstimateDarkWindows(observed, &plan);
  ApplyStateRules(resolved, observed, names, &plan);
  // Last of the passes that insert steps: the step numbers its words name stay right.
  PlanPrewarms(resolved, observed, draft.models, &plan);
  StampFloorSettings(index, &plan);
  MarkTurnsAndGroups(&plan);
  return plan;
}

void MarkTurnsAndGroups(Plan* plan) {
  std::vector<Action>& acts = plan->actions;
  for (size_t i = 0; i < acts.size(); ++i)
    acts[i].takes_down = acts[i].kind == ActionKind::kStop ||
                         acts[i].kind == ActionKind::kRestart || acts[i].kind == ActionKind::kSleep;
  for (const Disruption& d : plan->disruptions)
    if (d.front_mode != "none" && d.from_step < acts.size()) acts[d.from_step].takes_down = true;
  // Make-before-break: the old backend stops after the front routed away from it and it
  // drained; nobody notices, so no turn is needed.
  for (const Switch& sw : plan->switches)
    if (sw.mode == SwitchMode::kMakeBeforeBreak)
      for (const Replaced& r : sw.replaces) acts[r.stop_step].takes_down = false;
  for (Disruption& d : plan->disruptions) {
    d.caveat.clear();
    for (size_t i : d.unknown_port_starts)
      d.caveat += (d.caveat.empty() ? "" : "; ") + acts[i].address + " starts at step " +
                  std::to_string(i + 1) + " on a port berth does not know";
  }
  plan->groups = ParallelStarts(*plan);
  // Downloads side by side: each run of two or more consecutive downloads (the plan puts them
  // first); a lone one runs as any step.
  plan->downloads.clear();
  for (size_t i = 0; i < acts.size(); ++i) {
    if (acts[i].kind != ActionKind::kDownload) continue;
    if (!plan->downloads.empty() && plan->downloads.back().last + 1 == i)
      plan->downloads.back().last = i;
    else
      plan->downloads.push_back({i, i});
  }
  std::erase_if(plan->downloads, [](const DownloadBatch& b) { return b.first == b.last; });
  std::unordered_map<size_t, int> group_of;  // a chain's first step -> its (last) group
  for (size_t g = 0; g < plan->groups.size(); ++g)
    for (const Chain& c : plan->groups[g].chains) group_of[c.start] = static_cast<int>(g);
  for (Switch& sw : plan->switches) {
    sw.needs_turn = false;
    for (size_t i : sw.steps) sw.needs_turn = sw.needs_turn || acts[i].takes_down;
    auto g = group_of.find(sw.start);
    sw.group = g == group_of.end() ? -1 : g->second;
  }
}

}  // namespace berth
