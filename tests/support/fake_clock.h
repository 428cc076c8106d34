// A clock that jumps instead of sleeping, for every test that waits: the loop's schedule, the
// executor's health gates; and whose time wakes the threads that pace themselves on it (the
// fleet's keep-alive, the pass's watchdog).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "core/clock.h"

namespace berth::testing {

/// Starts at an arbitrary steady time and unix 1'700'000'000; SleepUntil jumps to the deadline,
/// records how long the sleep was, then calls `on_sleep` (where tests change the world).
/// WaitUntil blocks until woken or until the clock is moved (by SleepUntil or Advance, from
/// another thread) to its deadline.
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
      MoveTo(deadline);
    }
    if (on_sleep) on_sleep(Elapsed());
  }
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline, const std::function<bool()>& woken) override {
    Waiter me{lock.mutex(), &cv, deadline};
    lock.unlock();  // never wait for waiters_mu_ holding a waiter's mutex (MoveTo's order)
    {
      std::lock_guard<std::mutex> hold(waiters_mu_);
      waiters_.push_back(&me);
      waiting_.notify_all();
    }
    lock.lock();
    while (!woken() && now_.load() < deadline) cv.wait(lock);
    lock.unlock();
    {
      std::lock_guard<std::mutex> hold(waiters_mu_);
      std::erase(waiters_, &me);
    }
    lock.lock();
    return woken();
  }
  void Advance(std::chrono::milliseconds d) { MoveTo(now_.load() + d); }
  /// Blocks until `n` threads wait on this clock for a time still ahead, at most `limit` of real
  /// time (false then): how a test knows a thread did what its last wake-up asked before it
  /// moves the time again.
  bool AwaitWaiters(size_t n, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> hold(waiters_mu_);
    return waiting_.wait_for(hold, limit, [&] {
      return static_cast<size_t>(std::count_if(waiters_.begin(), waiters_.end(), [&](Waiter* w) {
               return w->deadline > now_.load();
             })) >= n;
    });
  }
  /// Time since the clock was made.
  std::chrono::milliseconds Elapsed() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now_.load() - start_);
  }

  std::function<void(std::chrono::milliseconds elapsed)> on_sleep;
  std::vector<std::chrono::milliseconds> sleeps;

 private:
  struct Waiter {
    std::mutex* mutex;
    std::condition_variable* cv;
    TimePoint deadline;
  };
  /// Sets the time and wakes the waiters whose deadline it reached (under their mutex, so that
  /// none is between its look at the time and its wait).
  void MoveTo(TimePoint t) {
    now_ = t;
    std::lock_guard<std::mutex> hold(waiters_mu_);
    for (Waiter* w : waiters_)
      if (w->deadline <= t) {
        std::lock_guard<std::mutex> theirs(*w->mutex);
        w->cv->notify_all();
      }
  }

  TimePoint start_ = TimePoint() + std::chrono::hours(1000);
  std::atomic<TimePoint> now_{start_};  // read by other threads too (the fleet's keep-alive)
  std::mutex waiters_mu_;
  std::condition_variable waiting_;  // a thread began to wait
  std::vector<Waiter*> waiters_;
};

}  // namespace berth::testing
