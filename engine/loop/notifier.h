// Telling the service manager how the loop is doing: sd_notify's READY=1, STATUS=, WATCHDOG=1 and
// STOPPING=1. The real notifier is libsystemd's; tests bind $NOTIFY_SOCKET themselves or fake it.
#pragma once

#include <chrono>
#include <string>

namespace berth {

class Notifier {
 public:
  virtual ~Notifier() = default;
  /// Sends newline-separated assignments ("READY=1\nSTATUS=..."). A no-op when not run by a
  /// service manager ($NOTIFY_SOCKET unset). Safe to call from two threads.
  virtual void Notify(const std::string& assignments) = 0;
  /// How often the service manager wants WATCHDOG=1 at the latest ($WATCHDOG_USEC for this
  /// process), or 0 when there is no watchdog.
  virtual std::chrono::microseconds WatchdogTimeout() = 0;
};

/// libsystemd's sd_notify and sd_watchdog_enabled; the environment is left as it is.
class SdNotifier : public Notifier {
 public:
  void Notify(const std::string& assignments) override;
  std::chrono::microseconds WatchdogTimeout() override;
};

}  // namespace berth
