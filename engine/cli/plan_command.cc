#include <memory>

#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_host.h"
#include "providers/saved/saved_observer.h"

namespace berth {

int RunPlan(const PlanCommand& cmd, std::ostream& out, std::ostream& err) {
  if (cmd.format != "text" && cmd.format != "json") {
    err << "berth plan: unknown output format '" << cmd.format << "' (use text or json)\n";
    return kExitError;
  }
  Reporter say(out, err, cmd.format == "json" ? PlanFormat::kJson : PlanFormat::kText);
  say.set_diffs(cmd.diff);
  ReconcileOptions o;
  o.manifest_path = cmd.manifest_path;
  o.apply = false;
  o.out_path = cmd.out_path;
  ReconcilerDeps deps;
  std::unique_ptr<LiveHost> live;
  SavedObserver saved(cmd.observed_path);
  if (cmd.observed_path.empty()) {
    // This host, as apply sees it, without changing anything.
    live = std::make_unique<LiveHost>(cmd.host);
    deps = LiveReconcilerDeps(live.get(), &say);
    o.state_dir = cmd.state_dir.empty() ? DefaultStateDir() : cmd.state_dir;
  } else {
    // A saved observation (made elsewhere, e.g. in CI): it carries berth's state and host name.
    deps.reporter = &say;
    deps.engine_check_dir = FindEngineCheckDir();  // the plan apply makes on the host
    deps.connect = [&saved](const Desired&) -> Result<HostSeams> {
      HostSeams seams;
      seams.observer = &saved;
      seams.systemd_error = "planning from a saved observation; apply the plan on its host";
      return seams;
    };
  }
  ExitCode code = ExitCodeOf(Reconciler(deps).Run(o).outcome);
  return code == kExitChanges && !cmd.detailed_exitcode ? kExitOk : code;
}

}  // namespace berth
