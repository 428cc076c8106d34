// The CLI's commands as functions of their options and output streams, so tests run them
// exactly as `berth` does. Each returns the process exit code.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "engine/cli/live_host.h"

namespace berth {

/// Exit codes of `berth plan` (with --detailed-exitcode) and of the other commands.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,    // invalid input, unreadable file, failed command
  kExitChanges = 2,  // plan --detailed-exitcode: there is something to do
  kExitBlocked = 3,  // the plan cannot run: what is short is printed
  kExitFailed = 4,   // apply: an action failed; what was done and the unit's journal are printed
  kExitStale = 5,    // apply FILE: the host changed since the plan was made; nothing was done
};
/// The exit code of a pass that ended in `outcome` (berth plan, apply, reconcile --once).
ExitCode ExitCodeOf(Outcome outcome);

struct ApplyCommand {
  std::string manifest_path;  // -f
  std::string saved_plan;     // berth apply FILE: exactly this plan
  bool yes = false;           // do not ask
  bool retry = false;         // run a change held after it failed (see HeldChange)
  bool diff = false;          // --diff: every write-unit shows its diff, not only adopt/drift
  HostAccess host;
  std::string state_dir;                    // "" = $BERTH_STATE_DIR or /var/lib/berth
  int lock_timeout_s = 0;                   // wait this long for another apply to finish
  int64_t max_age_s = 0;                    // refuse saved plans older than this (0: any age)
  const std::atomic<bool>* stop = nullptr;  // SIGINT/SIGTERM
  std::function<void(int step)> at_step;    // the fault seam (ReconcilerDeps::at_step); null
};

struct PlanCommand {
  std::string manifest_path;    // -f
  std::string observed_path;    // --observed; "" = observe this host
  HostAccess host;              // when observing this host
  std::string format = "text";  // -o text|json
  bool detailed_exitcode = false;
  bool diff = false;      // --diff: every write-unit shows its diff, not only adopt/drift
  std::string out_path;   // --out: save the plan for berth apply FILE
  std::string state_dir;  // when observing this host
};

/// The fault seam of this build, for ApplyCommand::at_step and ReconcileCommand::at_step: null
/// in berth (engine/cli/no_faults.cc); berth_faulty, a test build of the same main, links
/// tests/support/fault_hook.cc instead, which kills itself at $BERTH_FAULT_KILL_AT_STEP.
std::function<void(int step)> FaultHook();

/// Observe, plan, show, ask (unless yes), execute, then check that nothing is left to do.
int RunApply(const ApplyCommand& cmd, std::istream& in, std::ostream& out, std::ostream& err);
/// What berth sees on this host; format "text" or "json" (the --observed format).
int RunObserve(const std::string& manifest_path, const std::string& format, const HostAccess& host,
               std::ostream& out, std::ostream& err);

struct PullCommand {
  std::string source;  // hf://org/name[@revision]
  std::string store;   // "" = HF_HUB_CACHE or the usual HF_HOME location
  std::vector<std::string> include, exclude;
  int connections = 0;  // 0 = default
};
/// One model into the store, outside any manifest.
int RunPull(const PullCommand& cmd, std::ostream& out, std::ostream& err);
/// Re-hashes `source`'s snapshot (hf://org/name@commit, or every complete snapshot of the repo)
/// against berth's record of it (or the Hub's listing); reports corrupt, missing, extra files.
int RunVerify(const std::string& source, const std::string& store, std::ostream& out,
              std::ostream& err);
/// `berth verify -f PATH [MODEL]`: every model of the manifest (or the one named) in its store.
int RunVerifyManifest(const std::string& manifest_path, const std::string& model,
                      const std::string& store, std::ostream& out, std::ostream& err);

struct ReconcileCommand {
  std::string manifest_path;    // -f
  std::string interval = "5m";  // --interval: between passes while all is well
  std::string jitter = "10%";   // --jitter: "N%" of the interval, or a duration ("30s")
  bool once = false;            // --once: one pass, exit with its exit code
  bool plan_only = false;       // --plan-only: plan and report, never change anything
  HostAccess host;
  std::string state_dir;                    // "" = $BERTH_STATE_DIR or /var/lib/berth
  std::string metrics_path;                 // --metrics: Prometheus textfile; "" = none
  int lock_timeout_s = 0;                   // wait this long for another apply to finish
  const std::atomic<bool>* stop = nullptr;  // SIGINT/SIGTERM: stop after the current action
  std::atomic<bool>* reload = nullptr;      // SIGHUP: run a pass now
  int wake_fd = -1;                         // readable when a signal arrived (ends a wait early)
  std::function<void(int step)> at_step;    // the fault seam (ReconcilerDeps::at_step); null
};

/// The loop: a pass (the Reconciler with --yes, or plan only) every interval with jitter, backoff
/// after failures, waiting for the manifest to change after terminal errors; sd_notify and
/// metrics. With `once`: one pass and its exit code; otherwise 0 when stopped.
int RunReconcile(const ReconcileCommand& cmd, std::ostream& out, std::ostream& err);

struct LockCommand {
  std::string manifest_path = ".";  // -f: the manifest file or folder; berth.lock sits beside it
  bool update = false;              // --update: re-resolve pinned models too
  std::vector<std::string> models;  // with --update: only these (default: all)
};
/// `berth lock`: pins every model whose revision is a branch or tag to the commit the Hub gives
/// now, in berth.lock (written atomically). Without `update`, only models without an entry (or
/// with a stale one) are resolved; with it, every named model (or all). Prints what moved.
/// `clock` dates the entries it writes (locked_at).
int RunLock(const LockCommand& cmd, std::ostream& out, std::ostream& err,
            Clock& clock = RealClock());

struct BenchCommand {
  std::string manifest_path;             // -f: where SERVICE is declared (its port, model)
  std::vector<std::string> services;     // the service to measure; with --compare, a filter
  std::string concurrency = "1,32,128";  // --concurrency: streams, one level after another
  std::string duration = "30s";          // --duration: per level
  std::string num_prompts;               // --num-prompts N: requests per level, not a duration
  std::string request_rate;              // --request-rate R: Poisson arrivals ("" or inf: none)
  std::string seed = "0";                // --seed: of the arrival times
  std::string warmup;                    // --warmup N requests, or a duration (10s)
  std::string goodput;                   // --goodput ttft:MS,tpot:MS,e2el:MS
  int prompt_tokens = 128;               // --prompt-tokens: a made-up prompt of this many words
  int max_tokens = 256;                  // --max-tokens: per request
  /// --gather-us: how long a wake-up of the load generator waits for more streams' tokens
  /// before reading them (LoadSpec::gather; each token keeps the kernel's receive time)
  int gather_us = 1000;
  bool chat = false;                        // --chat: /v1/chat/completions
  std::string host;                         // --host: connect here ("" = from the service's bind)
  std::string format = "text";              // -o text|json
  bool compare = false;                     // --compare: the stored results side by side
  bool save = true;                         // --no-save: do not record the results
  std::string state_dir;                    // "" = $BERTH_STATE_DIR or /var/lib/berth
  const std::atomic<bool>* stop = nullptr;  // SIGINT/SIGTERM: end the level being measured
};
/// `berth bench SERVICE`: checks the service is healthy, measures it at each concurrency with
/// streamed completions, prints the figures and records them in the state directory.
/// `berth bench --compare`: the newest record of each service, model and commit side by side.
int RunBench(const BenchCommand& cmd, std::ostream& out, std::ostream& err);

struct TuneCommand {
  std::string manifest_path;    // -f: the manifest that declares the tuned service
  std::string tune_file;        // the tune file (manifests/tune_file.h)
  bool plan_only = false;       // --plan: every candidate's feasibility and dark time; no change
  bool resume = false;          // --resume: skip candidates an earlier sweep measured
  bool keep_winner = false;     // --keep-winner: end on the winner, not the declared configuration
  std::string format = "text";  // -o text|json
  HostAccess host;
  std::string state_dir;                    // "" = $BERTH_STATE_DIR or /var/lib/berth
  int lock_timeout_s = 0;                   // wait this long for another apply to finish
  const std::atomic<bool>* stop = nullptr;  // SIGINT/SIGTERM: stop, then back to the declared
  std::function<void(int step)> at_step;    // the fault seam (ReconcilerDeps::at_step); null
};
/// `berth tune -f MANIFEST TUNEFILE`: each candidate of the tune file switched to and measured
/// (engine/tune/tune.h), the host brought back to the declared configuration (or the winner),
/// the report, plot and patch written to <state_dir>/tune/<service>/.
int RunTuneCommand(const TuneCommand& cmd, std::ostream& out, std::ostream& err);

int RunValidate(const std::string& manifest_path, std::ostream& out, std::ostream& err);
int RunPlan(const PlanCommand& cmd, std::ostream& out, std::ostream& err);
/// Prints the unit files berth would write (all services, or only `service`).
/// `berth status`: per service its state, model and commit, health, since when, its last
/// start and bench figures; per model its revisions in the store and who uses them.
struct StatusCommand {
  std::string manifest_path;
  std::string state_dir;  // "" = $BERTH_STATE_DIR or /var/lib/berth
  std::string format = "text";
  bool probe = true;  // ask each running service's health path now
  HostAccess host;
};
int RunStatus(const StatusCommand& cmd, std::ostream& out, std::ostream& err);

/// `berth history`: past applies from the state directory, newest first (text) or the last
/// `limit` as JSON (history.json's format).
/// berth fleet status -f PATH: every host of the manifest's fleet, from etcd.
int RunFleetStatus(const std::string& manifest_path, const std::string& format, std::ostream& out,
                   std::ostream& err);
/// berth fleet forget -f PATH HOST: deletes a host's report (a host that left the fleet).
int RunFleetForget(const std::string& manifest_path, const std::string& host, std::ostream& out,
                   std::ostream& err);
int RunHistory(const std::string& state_dir, const std::string& format, size_t limit,
               std::ostream& out, std::ostream& err);
int RunRender(const std::string& manifest_path, const std::string& observed_path,
              const std::string& service, std::ostream& out, std::ostream& err);

/// The hidden subcommands of an on-demand service's units (argv[1] begins with "__"):
/// `__wait-healthy URL --timeout-ms N` (exit 0 once URL answers 200) and
/// `__wake-proxy UNIT URL -- PROXYD ARGS...` (engine/cli/wake_command.cc).
int RunHiddenCommand(int argc, char** argv, std::ostream& err);

}  // namespace berth
