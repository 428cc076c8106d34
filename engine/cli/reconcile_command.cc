#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>

#include "core/clock.h"
#include "core/units.h"
#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_host.h"
#include "engine/loop/manifest_probe.h"
#include "engine/loop/notifier.h"
#include "engine/loop/reconcile.h"
#include "engine/state/bench_history.h"
#include "manifests/loader.h"

namespace berth {

int RunReconcile(const ReconcileCommand& cmd, std::ostream& out, std::ostream& err) {
  LoopOptions lo;
  lo.once = cmd.once;
  lo.plan_only = cmd.plan_only;
  lo.metrics_path = cmd.metrics_path;
  auto interval = ParseDurationMs(cmd.interval);
  if (!interval || *interval == 0) {
    err << "berth reconcile: --interval '" << cmd.interval << "' is not a duration like 5m\n";
    return kExitError;
  }
  lo.schedule.interval = std::chrono::milliseconds(*interval);
  std::string j = cmd.jitter;
  if (!j.empty() && j.back() == '%') {
    char* end = nullptr;
    double pct = std::strtod(j.c_str(), &end);
    if (end != j.c_str() + j.size() - 1 || pct < 0 || pct > 100) {
      err << "berth reconcile: --jitter '" << j << "' is not a percentage from 0% to 100%\n";
      return kExitError;
    }
    lo.schedule.jitter = pct / 100;
  } else if (auto d = ParseDurationMs(j)) {
    lo.schedule.jitter = std::min(1.0, static_cast<double>(*d) / static_cast<double>(*interval));
  } else {
    err << "berth reconcile: --jitter '" << j << "' is neither N% nor a duration\n";
    return kExitError;
  }

  ReconcileOptions ro;
  ro.manifest_path = cmd.manifest_path;
  ro.state_dir = cmd.state_dir.empty() ? DefaultStateDir() : cmd.state_dir;
  ro.apply = !cmd.plan_only;
  ro.yes = true;
  ro.lock_timeout = std::chrono::seconds(cmd.lock_timeout_s);
  ro.stop = cmd.stop;

  SystemClock clock(cmd.wake_fd);
  LiveHost live(cmd.host);
  SdNotifier notifier;
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  LoopDeps deps;
  deps.pass = [&] {
    // In the loop a converged pass says only its status line, not the whole plan each time.
    std::ostringstream pass_out;
    std::ostream& to = cmd.once ? out : pass_out;
    Reporter say(to, err, PlanFormat::kText, false);
    ReconcilerDeps rd = LiveReconcilerDeps(&live, &say, &clock);
    rd.at_step = cmd.at_step;
    RunReport r = Reconciler(rd).Run(ro);
    if (!cmd.once && r.outcome != Outcome::kNoChanges) out << pass_out.str() << std::flush;
    return r;
  };
  deps.bench_records = [&ro] {
    auto records = BenchHistory(ro.state_dir).Load();
    return records.ok() ? LatestPerKey(*records, {}) : std::vector<BenchRecord>{};
  };
  deps.front_metrics = [&cmd] {
    std::vector<FrontMetrics> fronts;
    LoadResult loaded = LoadManifests(cmd.manifest_path);
    for (const auto& [port, front] : loaded.desired.fronts) {
      FrontMetrics f;
      f.port = port;
      HaproxyAdminOptions o;
      o.socket = loaded.desired.host.front_dir + "/" + std::to_string(port) + ".sock";
      o.timeout = std::chrono::seconds(2);
      Result<FrontStats> stats = HaproxyAdmin(o).Stats();
      if (stats.ok())
        f.stats = *stats;
      else
        f.error = stats.status().message();
      fronts.push_back(std::move(f));
    }
    return fronts;
  };
  deps.manifest_fingerprint = [&] { return ManifestFingerprint(cmd.manifest_path); };
  deps.clock = &clock;
  deps.notifier = &notifier;
  deps.uniform01 = [&] { return uniform(rng); };
  deps.stop = cmd.stop;
  deps.reload = cmd.reload;
  deps.log = &err;
  return ExitCodeOf(RunLoop(lo, deps));
}

}  // namespace berth
