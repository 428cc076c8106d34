#include <ctime>

#include "engine/apply/reconciler.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_host.h"
#include "engine/output/status_view.h"
#include "engine/state/state.h"
#include "planners/servers/adapter.h"
#include "providers/health/health_probe.h"

namespace berth {

int RunStatus(const StatusCommand& cmd, std::ostream& out, std::ostream& err) {
  if (cmd.format != "text" && cmd.format != "json") {
    err << "berth status: unknown output format '" << cmd.format << "' (use text or json)\n";
    return kExitError;
  }
  Desired desired;
  if (!LoadManifestOrExplain(cmd.manifest_path, &desired, err)) return kExitError;
  // This host, as plan sees it; nothing is changed.
  LiveHost live{cmd.host};
  Result<HostSeams> seams = live.Connect(desired);
  Result<Observed> observed = seams.ok() ? seams->observer->Observe(desired) : seams.status();
  if (!observed.ok()) {
    err << "berth status: could not observe this host: " << observed.status().message() << "\n";
    return kExitError;
  }
  observed->hostname = LocalHostname();
  std::string dir = cmd.state_dir.empty() ? DefaultStateDir() : cmd.state_dir;
  Result<State> state = StateDir(dir).Load();
  if (state.ok())
    observed->state = state->ToObserved();
  else
    err << "berth status: " << state.status().message() << " (berth's records are left out)\n";
  Result<std::vector<BenchRecord>> bench = BenchHistory(dir).Load();
  if (!bench.ok()) err << "berth status: " << bench.status().message() << "\n";

  // Each running service with a port is asked now, as its health gate would ask it. One the
  // manifest wants running whose unit is not running fails without asking: whatever answers on
  // its port now is not it.
  std::map<std::string, std::string> health;
  if (cmd.probe) {
    CurlHealthProbe probe;
    for (const auto& [name, s] : desired.services) {
      const ObservedUnit* u = observed->FindUnit(s.UnitName());
      if (s.port && s.state == ServiceState::kRunning && (!u || !u->IsActive())) {
        health[name] = "unhealthy: not running (" + s.UnitName() + " is " +
                       (u ? u->active_state : std::string("not-found")) + ")";
        continue;
      }
      if (!s.port || !u || !u->IsActive()) continue;
      if (u->crash_looping) {  // an answer between two crashes would say nothing of it
        health[name] = "unhealthy: crash-looping (" + CrashLoopDetail(*u) + ")";
        continue;
      }
      // The name its adapter says the server lists; "" (a state-only service, trtllm-serve
      // whose snapshot is not resolved here, a command without served_name): the health path.
      std::string listed =
          s.has_engine ? AdapterFor(s.engine).ReportedName(s, RenderContext{}) : "";
      HealthResult h = probe.Probe(s.DialHost(), *s.port, s.health.path, listed);
      health[name] = h.healthy ? "healthy" : "unhealthy: " + h.detail;
    }
  }
  StatusView view =
      MakeStatus(desired, *observed, health, bench.ok() ? *bench : std::vector<BenchRecord>{});
  out << (cmd.format == "json" ? StatusJson(view)
                               : StatusText(view, static_cast<double>(std::time(nullptr))));
  return kExitOk;
}

}  // namespace berth
