#include "planners/planner.h"

#include "planners/draft.h"
#include "planners/gates.h"
#include "planners/glob.h"

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
  DiffModels(desired, observed, &draft);
  DiffServices(desired, observed, options.berth_version, &draft);
  Sequence(desired, observed, std::move(draft), &plan);
  ApplyStateRules(desired, observed, &plan);
  return plan;
}

}  // namespace berth
