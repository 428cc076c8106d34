// The reconcile loop (`berth reconcile`): a loop around one pass (the Reconciler) that waits as
// ScheduleNext says, wakes early on a manifest change or SIGHUP, stops cleanly on SIGINT/SIGTERM,
// tells systemd how it is doing (sd_notify) and writes the metrics file after every pass.
// Every collaborator is passed in, so tests drive it with fake passes and a fake clock.
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "engine/apply/reconciler.h"
#include "engine/loop/metrics.h"
#include "engine/loop/notifier.h"
#include "engine/loop/schedule.h"
#include "engine/state/bench_history.h"

namespace berth {

struct LoopOptions {
  ScheduleOptions schedule;
  bool once = false;         // one pass, then return its exit code (default: loop until stopped)
  bool plan_only = false;    // passes only plan (for the wording of the status line)
  std::string metrics_path;  // Prometheus textfile written after every pass; "" = none
};

struct LoopDeps {
  std::function<RunReport()> pass;                    // one reconcile pass (the Reconciler)
  std::function<std::string()> manifest_fingerprint;  // ManifestFingerprint(path); null: never
  Clock* clock = nullptr;                             // required
  Notifier* notifier = nullptr;                       // null: tell nobody
  std::function<double()> uniform01;                  // draws in [0, 1) for jitter; null: none
  const std::atomic<bool>* stop = nullptr;            // SIGINT/SIGTERM: stop after this pass
  std::atomic<bool>* reload = nullptr;                // SIGHUP: run now; cleared when a pass starts
  std::ostream* log = nullptr;                        // one status line per pass; null: none
  /// berth bench's newest records (LatestPerKey), exported with the metrics; null: none.
  std::function<std::vector<BenchRecord>()> bench_records;
  /// The fronts' counters (their admin sockets), exported with the metrics; null: none.
  std::function<std::vector<FrontMetrics>()> front_metrics;
  /// Writes the metrics file; null: WriteFileAtomically.
  std::function<Status(const std::string& path, const std::string& text)> write_file;
};

/// Runs passes until stopped. Returns, with `once`, the pass's outcome; otherwise kNoChanges
/// once stopped on request (also when the stop interrupted a pass: the journal lets the next
/// run finish it).
Outcome RunLoop(const LoopOptions& options, const LoopDeps& deps);

/// The one-line summary of a pass and what comes next, sent as STATUS= and logged:
/// "converged: 3/3 services up, next pass in 4m52s" (while a wanted service crash-loops:
/// "crash-looping: x (restarted 3 times by systemd, now activating/auto-restart), 0/1 services
/// up, ..."),
/// "blocked: <why>; waiting for the manifest to change", "error: <why>; retry 2 in 1m0s".
std::string StatusLine(const RunReport& report, const NextPass& next, int failures, bool plan_only);

}  // namespace berth
