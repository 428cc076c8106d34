// SystemdManager: what berth asks of systemd. The real one speaks D-Bus (sd-bus) to
// org.freedesktop.systemd1; tests use it against a real systemd booted in a sandbox.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace berth {

/// The properties berth reads of a unit (org.freedesktop.systemd1.Unit and .Service).
struct UnitProperties {
  std::string name;
  std::string load_state = "not-found";
  std::string active_state = "inactive";
  std::string sub_state = "dead";
  std::string fragment_path;
  std::vector<std::string> drop_in_paths;
  bool need_daemon_reload = false;
  std::string unit_file_state;
  std::string invocation_id;  // hex, "" if never started
  uint32_t main_pid = 0;      // in PID 1's namespace
  uint32_t n_restarts = 0;
  std::string result;
  int32_t exec_main_status = 0;
  uint64_t active_enter_usec = 0;  // when it last became active, unix µs (0: never)
  /// When it last left inactive (a start began) and last became active, CLOCK_MONOTONIC µs
  /// (InactiveExitTimestampMonotonic, ActiveEnterTimestampMonotonic; 0: never): its last
  /// start's time, unmoved by changes of the wall clock.
  uint64_t inactive_exit_monotonic_usec = 0;
  uint64_t active_enter_monotonic_usec = 0;
  uint64_t timeout_stop_usec = 0;  // TimeoutStopUSec (0: unknown; UINT64_MAX: infinity)
};

class SystemdManager {
 public:
  virtual ~SystemdManager() = default;

  /// Properties of each of `names`, in order. Units systemd cannot find come back with
  /// load_state "not-found"; that is not an error.
  virtual Result<std::vector<UnitProperties>> GetUnits(const std::vector<std::string>& names) = 0;
  /// daemon-reload; returns once systemd has finished reloading.
  virtual Status Reload() = 0;
  /// Start, stop or restart `unit` and wait for the job, then confirm the unit's final state
  /// (active after start and restart, inactive or failed after stop). `timeout` bounds the wait;
  /// a failure's message ends with the unit's last journal lines.
  virtual Status Start(const std::string& unit, std::chrono::milliseconds timeout) = 0;
  virtual Status Stop(const std::string& unit, std::chrono::milliseconds timeout) = 0;
  virtual Status Restart(const std::string& unit, std::chrono::milliseconds timeout) = 0;
  /// Whether `unit` starts at boot, as `systemctl enable` / `disable` do: the symlinks its
  /// [Install] section names (WantedBy=multi-user.target) are created or removed in the unit
  /// directory (persistent, not runtime), then systemd reloads so that its UnitFileState
  /// property shows the change at once. Idempotent. Enable fails on a unit without an
  /// [Install] section (static) or a masked one; nothing is changed then.
  virtual Status Enable(const std::string& unit) = 0;
  virtual Status Disable(const std::string& unit) = 0;
  /// The environment the manager gives every service it starts ("KEY=VALUE": its
  /// DefaultEnvironment=, systemctl set-environment, the locale), before a unit's own
  /// Environment= lines: the Manager's Environment property. By default (a fake): none.
  virtual Result<std::vector<std::string>> ManagerEnvironment() {
    return std::vector<std::string>{};
  }
};

/// The last lines a unit logged, for error messages.
class JournalReader {
 public:
  virtual ~JournalReader() = default;
  /// Up to `lines` of the unit's most recent messages, oldest first; empty when none.
  virtual std::vector<std::string> Tail(const std::string& unit, int lines) = 0;
};

}  // namespace berth
