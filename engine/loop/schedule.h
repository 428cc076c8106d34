// When the reconcile loop runs next: a pure function of how the last pass ended, how many passes
// in a row have failed, the interval, the jitter, the backoff and a random source. No clock, no
// I/O; the loop (engine/loop/reconcile.h) carries the decision out.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "engine/apply/reconciler.h"

namespace berth {

/// How a pass ended, as far as scheduling cares (controller-runtime's reconcile.Result).
enum class PassKind {
  kDone,         // converged, applied, or (plan only) planned: run again after the interval
  kRetryable,    // failed or errored, may succeed later: back off, then retry
  kTerminal,     // invalid manifest, blocked plan, auth refused: wait for the manifest to change
  kInterrupted,  // stopped on request (SIGINT/SIGTERM): the loop ends
};
const char* PassKindName(PassKind k);

/// kNoChanges/kApplied/kPlanned: done. A report marked terminal, kBlocked, kInvalid, kStale and
/// kNotConfirmed: terminal. kInterrupted: interrupted. Other kFailed/kError: retryable.
PassKind ClassifyPass(Outcome outcome, bool terminal);

struct ScheduleOptions {
  /// Between passes while all is well (default 5 min).
  std::chrono::milliseconds interval = std::chrono::minutes(5);
  /// Each timed wait is spread uniformly over wait * (1 ± jitter); 0..1 (default 0.1 = 10%).
  double jitter = 0.1;
  /// The first retry after a failure waits this long; each further failure in a row doubles it,
  /// up to `interval` (default 30 s: 30 s, 1 min, 2 min, 4 min, then the interval).
  std::chrono::milliseconds backoff_base = std::chrono::seconds(30);
  /// How often the manifest is checked for changes while waiting (default 2 s). It is a stat()
  /// of the file or of each *.yaml/*.yml in the folder: cheap enough to do all the time.
  std::chrono::milliseconds manifest_poll = std::chrono::seconds(2);
};

struct NextPass {
  enum class Kind {
    kAfter,                // run again after `wait` (or earlier: manifest change, SIGHUP)
    kWhenManifestChanges,  // run again only when the manifest changes (or SIGHUP)
    kStop,                 // the loop ends
  };
  Kind kind = Kind::kAfter;
  std::chrono::milliseconds wait{0};  // kAfter: how long
  bool backoff = false;               // kAfter: the wait is a retry backoff, not the interval
};

/// The wait before a retry after `failures` (>= 1) failed passes in a row, before jitter:
/// min(interval, backoff_base * 2^(failures-1)).
std::chrono::milliseconds BackoffDelay(int failures, const ScheduleOptions& options);

/// `wait` spread over wait * (1 ± jitter); `uniform01` is a draw from [0, 1).
std::chrono::milliseconds Jittered(std::chrono::milliseconds wait, double jitter, double uniform01);

/// What comes after a pass that ended as `last`, `failures` being the count of failed passes in a
/// row including this one (0 after a success). `uniform01` is called at most once.
NextPass ScheduleNext(PassKind last, int failures, const ScheduleOptions& options,
                      const std::function<double()>& uniform01);

/// What happened while waiting, checked every manifest_poll (or sooner, on a signal).
struct WaitEvents {
  bool stop = false;              // SIGINT/SIGTERM
  bool reload = false;            // SIGHUP
  bool manifest_changed = false;  // the manifest's files differ from before the last pass
  std::chrono::milliseconds waited{0};
};

enum class Wake {
  kKeepWaiting,
  kStop,             // stop requested: exit
  kInterval,         // the wait is over
  kManifestChanged,  // run now: the manifest changed
  kReload,           // run now: SIGHUP
};
const char* WakeName(Wake w);

/// Whether to stop waiting: a stop wins, then SIGHUP, then a manifest change, then the deadline
/// (never reached while waiting for the manifest to change).
Wake DecideWake(const NextPass& next, const WaitEvents& events);

}  // namespace berth
