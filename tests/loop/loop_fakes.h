// Fakes for the loop's seams: a clock that jumps instead of sleeping and a notifier that
// remembers what it was told.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/clock.h"
#include "engine/loop/notifier.h"

namespace berth::testing {

/// Starts at an arbitrary steady time and unix 1'700'000'000; SleepUntil jumps to the deadline,
/// records how long the sleep was, then calls `on_sleep` (where tests change the world).
class FakeClock : public Clock {
 public:
  TimePoint Now() override { return now_; }
  double UnixNow() override {
    return 1'700'000'000.0 + std::chrono::duration<double>(now_ - start_).count();
  }
  void SleepUntil(TimePoint deadline) override {
    if (deadline > now_) {
      sleeps.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now_));
      now_ = deadline;
    }
    if (on_sleep) on_sleep(Elapsed());
  }
  void Advance(std::chrono::milliseconds d) { now_ += d; }
  /// Time since the clock was made.
  std::chrono::milliseconds Elapsed() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now_ - start_);
  }

  std::function<void(std::chrono::milliseconds elapsed)> on_sleep;
  std::vector<std::chrono::milliseconds> sleeps;

 private:
  TimePoint start_ = TimePoint() + std::chrono::hours(1000);
  TimePoint now_ = start_;
};

class FakeNotifier : public Notifier {
 public:
  explicit FakeNotifier(std::chrono::microseconds watchdog = std::chrono::microseconds(0))
      : watchdog_(watchdog) {}
  void Notify(const std::string& assignments) override {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(assignments);
  }
  std::chrono::microseconds WatchdogTimeout() override { return watchdog_; }
  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  int Count(const std::string& m) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& x : messages_) n += x == m;
    return n;
  }

 private:
  std::chrono::microseconds watchdog_;
  std::mutex mu_;
  std::vector<std::string> messages_;
};

}  // namespace berth::testing
