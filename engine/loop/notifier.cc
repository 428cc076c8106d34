#include "engine/loop/notifier.h"

#include <systemd/sd-daemon.h>

#include <cstdint>

namespace berth {

void SdNotifier::Notify(const std::string& assignments) {
  (void)sd_notify(0, assignments.c_str());  // best effort: nothing to do when it fails
}

std::chrono::microseconds SdNotifier::WatchdogTimeout() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0) return std::chrono::microseconds(0);
  return std::chrono::microseconds(static_cast<int64_t>(usec));
}

}  // namespace berth
