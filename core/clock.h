// Time, behind one seam: the executor's health gates and the reconcile loop's schedule both ask
// it, so tests run hours of waiting without sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

namespace berth {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  /// Monotonic time: waits, deadlines and durations are measured with it.
  virtual TimePoint Now() = 0;
  /// Wall-clock time in unix seconds (timestamps in metrics, the age of a saved plan).
  virtual double UnixNow() = 0;
  /// Blocks until `deadline` at the latest; may return earlier (a signal woke it up), so callers
  /// check what they wait for again.
  virtual void SleepUntil(TimePoint deadline) = 0;
  /// condition_variable::wait_until on this clock, for a thread that paces itself (the fleet's
  /// keep-alive, the pass's watchdog): waits on `cv`, `lock` released meanwhile, until `woken()`
  /// holds or `deadline` passes; returns woken(). Whoever makes woken() true does so holding
  /// `lock`'s mutex, then notifies `cv`.
  virtual bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         TimePoint deadline, const std::function<bool()>& woken) = 0;

  void SleepFor(std::chrono::milliseconds d) { SleepUntil(Now() + d); }
};

/// The steady and system clocks; sleeps in poll() on `wake_fd` (when >= 0) so that a byte
/// written there (by a signal handler) ends the sleep at once. The byte is consumed. WaitUntil
/// ends on its condition variable or its deadline only.
class SystemClock : public Clock {
 public:
  explicit SystemClock(int wake_fd = -1) : wake_fd_(wake_fd) {}
  TimePoint Now() override;
  double UnixNow() override;
  void SleepUntil(TimePoint deadline) override;
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline, const std::function<bool()>& woken) override;

 private:
  int wake_fd_;
};

/// A process-wide SystemClock without a wake-up descriptor.
Clock& RealClock();

/// `unix_seconds` as RFC 3339 UTC, to the second ("2023-11-14T22:13:20Z").
std::string Rfc3339(double unix_seconds);

}  // namespace berth
