// The loop's time and sleep, behind a seam so tests run hours of schedule without sleeping.
#pragma once

#include <atomic>
#include <chrono>

namespace berth {

class LoopClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~LoopClock() = default;
  /// Monotonic time: waits and pass durations are measured with it.
  virtual TimePoint Now() = 0;
  /// Wall-clock time in unix seconds, for the metrics' timestamps.
  virtual double UnixNow() = 0;
  /// Blocks until `deadline` at the latest; may return earlier (a signal woke it up), so callers
  /// check what they wait for again.
  virtual void SleepUntil(TimePoint deadline) = 0;
};

/// The steady and system clocks; sleeps in poll() on `wake_fd` (when >= 0) so that a byte
/// written there (by a signal handler) ends the sleep at once. The byte is consumed.
class SystemLoopClock : public LoopClock {
 public:
  explicit SystemLoopClock(int wake_fd = -1) : wake_fd_(wake_fd) {}
  TimePoint Now() override;
  double UnixNow() override;
  void SleepUntil(TimePoint deadline) override;

 private:
  int wake_fd_;
};

/// What `berth reconcile` listens to: SIGINT/SIGTERM set `stop` (a second one kills as usual),
/// SIGHUP sets `reload`; each handler also writes a byte to a pipe whose read end is `wake_fd`.
struct LoopSignals {
  std::atomic<bool>* stop = nullptr;
  std::atomic<bool>* reload = nullptr;
  int wake_fd = -1;
};
/// Installs the handlers (once per process; later calls return the same flags).
LoopSignals InstallLoopSignals();

}  // namespace berth
