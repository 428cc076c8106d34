#include "core/clock.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>

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

bool SystemClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                            TimePoint deadline, const std::function<bool()>& woken) {
  return cv.wait_until(lock, deadline, woken);
}

std::string Rfc3339(double unix_seconds) {
  std::time_t t = static_cast<std::time_t>(std::floor(unix_seconds));
  std::tm tm{};
  char buf[32] = {};
  if (!::gmtime_r(&t, &tm)) return "1970-01-01T00:00:00Z";
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Clock& RealClock() {
  static SystemClock clock;
  return clock;
}

}  // namespace berth
