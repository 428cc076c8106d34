// Fakes for the loop's seams: the jumping clock (tests/support/fake_clock.h) and a notifier
// that remembers what it was told.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "engine/loop/notifier.h"
#include "tests/support/fake_clock.h"

namespace berth::testing {

class FakeNotifier : public Notifier {
 public:
  explicit FakeNotifier(std::chrono::microseconds watchdog = std::chrono::microseconds(0))
      : watchdog_(watchdog) {}
  void Notify(const std::string& assignments) override {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(assignments);
    arrived_.notify_all();
  }
  /// Waits until `m` has come `n` times (true), or `deadline` passed (false): tests wait for
  /// the event, not for a time that a loaded machine may not keep.
  bool WaitFor(const std::string& m, int n, std::chrono::milliseconds deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return arrived_.wait_for(
        lock, deadline, [&] { return std::count(messages_.begin(), messages_.end(), m) >= n; });
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
  std::condition_variable arrived_;
  std::vector<std::string> messages_;
};

}  // namespace berth::testing
