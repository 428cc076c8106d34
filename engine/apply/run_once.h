// One reconcile pass, the single entry point behind `berth plan`, `berth apply` and the loop:
// lock, observe, plan, (confirm,) execute with a journal, record the state, check convergence.
#pragma once

#include <atomic>
#include <chrono>
#include <istream>
#include <ostream>
#include <string>

#include "engine/apply/executor.h"
#include "engine/apply/live_host.h"
#include "engine/core/plan.h"
#include "engine/core/status.h"

namespace berth {

struct RunOptions {
  std::string manifest_path;
  HostAccess host;
  /// berth's records; "" = $BERTH_STATE_DIR or /var/lib/berth.
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
};
const char* OutcomeName(Outcome o);

struct RunReport {
  Outcome outcome = Outcome::kError;
  Status status;
  bool terminal = false;  // retrying will not help until the manifest (or host) changes
  int exit_code = 1;      // plan: 0/1/2/3; apply: 0/1/3/4/5
  Plan plan;
  ExecResult exec;
  std::string manifest_digest;
  int services_up = 0;  // services wanted running that run after this pass
  int services_wanted = 0;
};

RunReport RunOnce(const RunOptions& options, std::ostream& out, std::ostream& err);

/// $BERTH_STATE_DIR, else /var/lib/berth.
std::string DefaultStateDir();

}  // namespace berth
