#include "planners/planner.h"

#include "planners/dark_windows.h"
#include "planners/draft.h"
#include "planners/gates.h"
#include "planners/glob.h"
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
  // State-only services with the port and GPUs the manifest declares or berth saw them hold.
  const Desired resolved = ResolveStateOnly(desired, observed, &draft);
  DiffModels(resolved, observed, &draft);
  DiffServices(resolved, observed, options.berth_version, &draft);
  const ReportedNames names = draft.reported_names;
  Sequence(resolved, observed, std::move(draft), &plan);
  EstimateDarkWindows(observed, &plan);
  ApplyStateRules(resolved, observed, names, &plan);
  return plan;
}

}  // namespace berth
