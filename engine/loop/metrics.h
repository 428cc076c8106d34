// The loop's metrics in the Prometheus text format, for node_exporter's textfile collector
// (--collector.textfile.directory): one file rewritten atomically after every pass.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "core/atomic_file.h"
#include "core/status.h"
#include "engine/apply/reconciler.h"
#include "engine/state/bench_history.h"
#include "providers/front/haproxy_admin.h"

namespace berth {

/// One front's figures for the textfile.
struct FrontMetrics {
  int port = 0;
  FrontStats stats;
  std::string error;  // "" when the front answered
};

/// The berth_front_* part of the textfile: per front (label port) whether it answered, its
/// requests, 5xx answers (503s past the hold bound among them), the seconds requests spent held
/// (one per hold round: the hold server's sessions), its retries, and which backend is routed to.
std::string FrontMetricsText(const std::vector<FrontMetrics>& fronts);

/// The failure kinds of berth_failures_total, in the order they are written.
inline constexpr std::array<const char*, 7> kFailureKinds = {
    "failed", "error", "blocked", "invalid_manifest", "stale_plan", "interrupted", "held"};

struct LoopMetrics {
  double last_run_timestamp = 0;      // unix seconds when the last pass started
  double last_success_timestamp = 0;  // unix seconds when the last successful pass started; 0: none
  double run_duration = 0;            // seconds the last pass took
  uint64_t pending_changes = 0;       // actions of the last plan not applied; 0 after a success
  std::array<uint64_t, kFailureKinds.size()> failures{};  // by kFailureKinds
  uint64_t bytes_downloaded = 0;                          // since the loop started
  /// As of the last pass that observed the host (a pass that ended before, e.g. on a busy lock
  /// or an invalid manifest, leaves them as they were rather than reporting nothing up).
  int services_up = 0;
  int services_wanted = 0;
  std::map<std::string, bool> service_up;            // service name -> running (not crash-looping)
  std::map<std::string, std::string> crash_looping;  // service name -> CrashLoopDetail
  std::map<std::string, uint32_t> restarts;          // service name -> systemd's NRestarts
  bool up = true;  // false once the loop is stopping: the last file it writes says so
  /// This manifest's change is held after a failure (RunReport::change_held, as of the last pass
  /// that observed the host): from the failing pass on, not only from a pass that refused it.
  bool change_held = false;
  /// The newest `berth bench` record of each service, model and commit (LatestPerKey), read
  /// from the state directory before each write; exported as berth_bench_* gauges.
  std::vector<BenchRecord> bench;
  /// Each front's counters (its admin socket's `show stat`), read before each write; a front
  /// that did not answer has `error` set.
  std::vector<FrontMetrics> fronts;

  /// Folds one pass in: its report, when it started (unix seconds) and how long it took.
  void Record(const RunReport& report, double started_unix, double duration_s);
};

/// The failure kind a pass's outcome counts as, or nullptr when it is no failure
/// (kNotConfirmed counts as "error").
const char* FailureKind(Outcome outcome);

/// The textfile: HELP and TYPE lines, then the samples; ends with a newline.
std::string MetricsText(const LoopMetrics& m);
/// The berth_bench_* part of it: per record and concurrency, with labels service, model (the
/// repo), commit and concurrency. "" when there is no record.
std::string BenchMetricsText(const std::vector<BenchRecord>& records);

}  // namespace berth
