#include "engine/core/clock.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace berth {

Clock::TimePoint SystemClock::Now() { return std::chrono::steady_clock::now(); }

double SystemClock::UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void SystemClock::SleepUntil(TimePoint deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Now());
  if (left.count() <= 0) return;
  int timeout = static_cast<int>(std::min<int64_t>(left.count(), 24 * 3600 * 1000));
  if (wake_fd_ < 0) {
    ::poll(nullptr, 0, timeout);
    return;
  }
  pollfd p{wake_fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout) > 0 && (p.revents & POLLIN)) {
    char buf[64];
    while (::read(wake_fd_, buf, sizeof buf) > 0) {
    }
  }
}

Clock& RealClock() {
  static SystemClock clock;
  return clock;
}

}  // namespace berth
