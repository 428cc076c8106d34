// A clock that jumps instead of sleeping, for every test that waits: the loop's schedule, the
// executor's health gates.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

#include "core/clock.h"

namespace berth::testing {

/// Starts at an arbitrary steady time and unix 1'700'000'000; SleepUntil jumps to the deadline,
/// records how long the sleep was, then calls `on_sleep` (where tests change the world).
class FakeClock : public Clock {
 public:
  TimePoint Now() override { return now_.load(); }
  double UnixNow() override {
    return 1'700'000'000.0 + std::chrono::duration<double>(now_.load() - start_).count();
  }
  void SleepUntil(TimePoint deadline) override {
    if (deadline > now_.load()) {
      sleeps.push_back(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now_.load()));
      now_ = deadline;
    }
    if (on_sleep) on_sleep(Elapsed());
  }
  void Advance(std::chrono::milliseconds d) { now_ = now_.load() + d; }
  /// Time since the clock was made.
  std::chrono::milliseconds Elapsed() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now_.load() - start_);
  }

  std::function<void(std::chrono::milliseconds elapsed)> on_sleep;
  std::vector<std::chrono::milliseconds> sleeps;

 private:
  TimePoint start_ = TimePoint() + std::chrono::hours(1000);
  std::atomic<TimePoint> now_{start_};  // read by other threads too (the fleet's keep-alive)
};

}  // namespace berth::testing
