// berth tune (issue 40): a service's candidate configurations tried on the host itself. Each
// candidate is the manifest with its settings set on the service (manifests/service_edit.h) and
// is reached by an ordinary pass of the Reconciler: the same plan, checks, switch, gates and
// undo as `berth apply`. The sweep holds the state lock from the first pass to the last, so a
// reconcile loop waits instead of undoing a candidate, and it ends with a pass of the manifest
// as declared (or of the winner, when asked): nothing of a candidate outlives the sweep. A
// berth killed mid-sweep leaves a host whose next pass (`berth apply`, the loop) converges to
// the manifest, which never changed on disk.
//
//   read the service's file → each candidate's manifest (invalid: infeasible) → lock → plan each
//   (blocked, engine check refused: infeasible; the switch and its dark window) → [--plan ends
//   here] → the baseline, then each candidate: switch, measure, record → the declared (or the
//   winner's) pass → the winner and its patch
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <ostream>
#include <string>

#include "core/desired.h"
#include "core/status.h"
#include "core/tune.h"
#include "engine/apply/reconciler.h"

namespace berth {

struct TuneDeps {
  /// Each pass's collaborators, as `berth apply` has them; the sweep gives each pass its own
  /// reporter (writing to TuneOptions::pass_log).
  ReconcilerDeps pass;
  /// Measures `service` of `desired` (running, healthy) under `load`: providers/bench's load
  /// generator in berth. An error is the candidate's failure.
  std::function<Result<TuneFigures>(const Desired& desired, const std::string& service,
                                    const TuneLoad& load, const std::atomic<bool>* stop)>
      measure;
};

struct TuneOptions {
  std::string manifest_path;  // -f
  std::string state_dir;      // berth's records; the lock and the sweep's results live here
  TuneSpec spec;
  bool plan_only = false;    // --plan: each candidate's feasibility and dark window; no change
  bool resume = false;       // --resume: candidates measured by an earlier sweep are not re-run
  bool keep_winner = false;  // --keep-winner: end on the winner instead of the declared
  std::chrono::milliseconds lock_timeout{0};
  const std::atomic<bool>* stop = nullptr;  // SIGINT/SIGTERM: stop, then go back to the declared
  /// Where each pass writes what `berth apply` would print (the sweep's log); null: nowhere.
  std::ostream* pass_log = nullptr;
  /// One line per event of the sweep, as it happens ("tp8: switching (stop-first) ...").
  std::function<void(const std::string& line)> progress;
};

/// Runs the sweep (or, with plan_only, its feasibility). An error is returned only when the
/// sweep could not begin (the tune file's service missing from the manifest, the lock busy, the
/// host not observable); everything after that is in the report, and the host was brought back
/// as far as a pass could. The results are saved for --resume (TuneResultsPath) after each
/// candidate.
Result<TuneReport> TuneService(const TuneOptions& options, const TuneDeps& deps);

/// Where a sweep of `service` keeps its results (report.json), plot and patch:
/// <state_dir>/tune/<service>/.
std::string TuneResultsDir(const std::string& state_dir, const std::string& service);

/// The index of the best of `outcomes` by `objective`: the highest metric among the measured
/// ones that meet every limit; nullopt when none does. Sets each outcome's meets_limits and
/// missed.
std::optional<size_t> PickWinner(const TuneObjective& objective,
                                 std::vector<TuneOutcome>* outcomes);

}  // namespace berth
