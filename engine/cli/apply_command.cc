#include <unistd.h>

#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_host.h"

namespace berth {

int RunApply(const ApplyCommand& cmd, std::istream& in, std::ostream& out, std::ostream& err) {
  Reporter say(out, err, PlanFormat::kText, ::isatty(1) == 1);
  say.set_diffs(cmd.diff);
  LiveHost live(cmd.host);
  ReconcileOptions o;
  o.manifest_path = cmd.manifest_path;
  o.saved_plan_path = cmd.saved_plan;
  o.state_dir = cmd.state_dir.empty() ? DefaultStateDir() : cmd.state_dir;
  o.apply = true;
  o.yes = cmd.yes;
  o.retry = cmd.retry;
  o.confirm = &in;
  o.lock_timeout = std::chrono::seconds(cmd.lock_timeout_s);
  o.max_age_s = cmd.max_age_s;
  o.stop = cmd.stop;
  ReconcilerDeps deps = LiveReconcilerDeps(&live, &say);
  deps.at_step = cmd.at_step;
  return ExitCodeOf(Reconciler(deps).Run(o).outcome);
}

}  // namespace berth
