#include "engine/loop/schedule.h"

#include <algorithm>
#include <cmath>

namespace berth {

const char* PassKindName(PassKind k) {
  switch (k) {
    case PassKind::kDone:
      return "done";
    case PassKind::kRetryable:
      return "retryable";
    case PassKind::kTerminal:
      return "terminal";
    case PassKind::kInterrupted:
      return "interrupted";
  }
  return "?";
}

PassKind ClassifyPass(Outcome outcome, bool terminal) {
  switch (outcome) {
    case Outcome::kNoChanges:
    case Outcome::kApplied:
    case Outcome::kPlanned:
      return PassKind::kDone;
    case Outcome::kInterrupted:
      return PassKind::kInterrupted;
    case Outcome::kBlocked:
    case Outcome::kInvalid:
    case Outcome::kStale:
    case Outcome::kNotConfirmed:
    case Outcome::kHeld:
      return PassKind::kTerminal;
    case Outcome::kFailed:
    case Outcome::kError:
      return terminal ? PassKind::kTerminal : PassKind::kRetryable;
  }
  return PassKind::kRetryable;
}

std::chrono::milliseconds BackoffDelay(int failures, const ScheduleOptions& options) {
  using std::chrono::milliseconds;
  milliseconds delay = options.backoff_base;
  for (int i = 1; i < failures && delay < options.interval; ++i) delay *= 2;
  return std::min(delay, options.interval);
}

std::chrono::milliseconds Jittered(std::chrono::milliseconds wait, double jitter,
                                   double uniform01) {
  double j = std::clamp(jitter, 0.0, 1.0);
  double u = std::clamp(uniform01, 0.0, 1.0);
  double factor = 1.0 + j * (2.0 * u - 1.0);  // [1 - j, 1 + j)
  return std::chrono::milliseconds(std::llround(static_cast<double>(wait.count()) * factor));
}

NextPass ScheduleNext(PassKind last, int failures, const ScheduleOptions& options,
                      const std::function<double()>& uniform01) {
  NextPass next;
  switch (last) {
    case PassKind::kInterrupted:
      next.kind = NextPass::Kind::kStop;
      return next;
    case PassKind::kTerminal:
      next.kind = NextPass::Kind::kWhenManifestChanges;
      return next;
    case PassKind::kRetryable:
      next.backoff = true;
      next.wait = BackoffDelay(std::max(failures, 1), options);
      break;
    case PassKind::kDone:
      next.wait = options.interval;
      break;
  }
  next.kind = NextPass::Kind::kAfter;
  if (options.jitter > 0 && uniform01) next.wait = Jittered(next.wait, options.jitter, uniform01());
  return next;
}

const char* WakeName(Wake w) {
  switch (w) {
    case Wake::kKeepWaiting:
      return "keep waiting";
    case Wake::kStop:
      return "stop";
    case Wake::kInterval:
      return "interval";
    case Wake::kManifestChanged:
      return "manifest changed";
    case Wake::kReload:
      return "SIGHUP";
  }
  return "?";
}

Wake DecideWake(const NextPass& next, const WaitEvents& events) {
  if (events.stop || next.kind == NextPass::Kind::kStop) return Wake::kStop;
  if (events.reload) return Wake::kReload;
  if (events.manifest_changed) return Wake::kManifestChanged;
  if (next.kind == NextPass::Kind::kAfter && events.waited >= next.wait) return Wake::kInterval;
  return Wake::kKeepWaiting;
}

}  // namespace berth
