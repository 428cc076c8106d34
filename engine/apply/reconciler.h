// The Reconciler: one reconcile pass, the single path behind `berth plan` (text, JSON, live,
// offline, --out), `berth apply`, `berth apply FILE` and every pass of `berth reconcile`.
//
//   load the manifest (or the saved plan, then its manifest) → is this host named → connect →
//   lock → berth's state → observe → plan (or check the saved one) → show → save → confirm →
//   execute with a journal → record the state → observe again and require an empty plan.
//
// Every collaborator comes in through ReconcilerDeps: the CLI builds them for the live host
// (engine/cli/live_host.h), tests build them on an in-memory host.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <istream>
#include <map>
#include <optional>
#include <string>

#include "core/clock.h"
#include "core/desired.h"
#include "core/plan.h"
#include "core/status.h"
#include "engine/apply/executor.h"
#include "engine/fleet/fleet_turn.h"
#include "engine/output/reporter.h"
#include "manifests/loader.h"
#include "providers/observer.h"

namespace berth {

/// The seams to one host, bound to a manifest (its unit directory, its store): the executor's
/// (its clock aside, which the pass sets) and the observer. Only `observer` is needed to plan;
/// applying needs systemd, unit_files, health and models, and what the plan's steps use.
struct HostSeams : ExecutorSeams {
  HostObserver* observer = nullptr;
  std::string systemd_error;  // why systemd is not reachable, when `systemd` is null
};

struct ReconcilerDeps {
  /// Connects to the host for `desired` (called once per pass, after the host check). The
  /// pointers stay valid until the next call or the Reconciler's end.
  std::function<Result<HostSeams>(const Desired& desired)> connect;
  /// This host's name, asked before anything else (host.match may exclude it).
  std::function<std::string()> hostname;
  Clock* clock = nullptr;        // null: RealClock()
  Reporter* reporter = nullptr;  // required
  /// The etcd of a manifest with `fleet:` (null: such a manifest never takes a service down).
  EtcdConnector connect_etcd;
  /// Between two looks at the fleet while waiting for a turn.
  std::chrono::milliseconds fleet_poll{1000};
  /// ExecutorDeps::at_step: called as each step begins. A test build's fault seam (berth_faulty
  /// kills itself there); null in berth.
  std::function<void(int step)> at_step;
  /// PlanOptions::engine_check_dir: where berth's engine checks are (FindEngineCheckDir);
  /// unset: no engine checks (tests of other things).
  std::optional<std::string> engine_check_dir;
  /// PlanOptions::berth_executable: the berth the units of on-demand services run (the one
  /// planning, BerthExecutable); unset: PlanOptions' default.
  std::optional<std::string> berth_executable;
};

struct ReconcileOptions {
  std::string manifest_path;
  /// berth's records; "" = none: the observation carries berth's state (an offline plan from
  /// `berth observe -o json` output). Applying needs one.
  std::string state_dir;
  bool apply = true;                // false: plan only (no lock held, nothing changed)
  bool yes = false;                 // do not ask
  std::istream* confirm = nullptr;  // where the answer comes from when asking
  std::chrono::milliseconds lock_timeout{0};
  const std::atomic<bool>* stop = nullptr;  // set by SIGINT/SIGTERM: stop between actions
  /// Apply exactly this saved plan (`berth apply FILE`), refusing when stale.
  std::string saved_plan_path;
  int64_t max_age_s = 0;  // saved plans older than this are refused (0: any age)
  /// Write the plan for a later `berth apply FILE` (`berth plan --out FILE`).
  std::string out_path;
  /// Run a change that is held after it failed (`berth apply --retry`); see HeldChange.
  bool retry = false;
  /// One manifest file read from here instead of the disk (berth tune's candidate); null: none.
  const ManifestEdit* manifest_edit = nullptr;
  /// The caller holds the state directory's lock across several passes (berth tune): this pass
  /// applies without taking it.
  bool lock_held = false;
};

enum class Outcome {
  kNoChanges,     // converged already
  kApplied,       // changes made, converged
  kPlanned,       // plan only: changes to make
  kBlocked,       // infeasible: nothing changed (terminal until something changes)
  kFailed,        // an action failed (rolled back if it could)
  kInvalid,       // the manifest is invalid (terminal until it changes)
  kError,         // could not observe, lock busy, ...
  kNotConfirmed,  // the operator said no
  kStale,         // a saved plan no longer matches the host
  kInterrupted,   // stopped between actions on request
  kHeld,          // this manifest's change failed after something went dark: not tried again
                  // until the manifest changes or --retry (terminal; nothing changed)
};
const char* OutcomeName(Outcome o);

struct RunReport {
  Outcome outcome = Outcome::kError;
  Status status;
  bool terminal = false;  // retrying will not help until the manifest (or host) changes
  Plan plan;
  ExecResult exec;
  std::string manifest_digest;
  int services_up = 0;  // services wanted running that run after this pass
  int services_wanted = 0;
  /// Each service the manifest wants running (by name) and whether it ran when last observed;
  /// empty, with `observed` false, when the pass ended before it observed the host.
  std::map<std::string, bool> service_up;
  /// Of those, the ones whose unit crash-loops (ObservedUnit::crash_looping; never counted up),
  /// each with CrashLoopDetail's words ("restarted 3 times by systemd, now ...").
  std::map<std::string, std::string> crash_looping;
  /// Each service wanted running and its unit's automatic restarts (systemd's NRestarts).
  std::map<std::string, uint32_t> restarts;
  bool observed = false;
  /// This manifest's change is held after this pass (HeldChange): the pass found it held, or
  /// its apply failed after taking a service down. False when berth's state was not read.
  bool change_held = false;
};

/// "crash-looping: x (restarted 3 times by systemd, now activating/auto-restart); y (...)" for
/// the report's crash-looping services; "" when none.
std::string CrashLoopSummary(const RunReport& report);

class Reconciler {
 public:
  explicit Reconciler(ReconcilerDeps deps);
  /// One pass. Never throws; every outcome is in the report (and told through the reporter).
  RunReport Run(const ReconcileOptions& options);

 private:
  ReconcilerDeps d_;
};

/// $BERTH_STATE_DIR, else /var/lib/berth.
std::string DefaultStateDir();

}  // namespace berth
