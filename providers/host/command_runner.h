// Running a command of the operator's (a service's `preflight:`): no shell, no PATH lookup, a
// timeout, and the tail of what it printed for the error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace berth {

struct CommandResult {
  bool started = false;     // false: it could not be run at all (`error` says why)
  bool timed_out = false;   // killed (with its process group) at the timeout
  int exit_status = -1;     // when it exited; -1 otherwise
  int signal = 0;           // when a signal ended it
  std::string output_tail;  // the last bytes of stdout and stderr, interleaved
  std::string error;        // why it could not be run
  uint64_t elapsed_ms = 0;
  bool ok() const { return started && !timed_out && signal == 0 && exit_status == 0; }
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  /// Runs `argv` (argv[0] an absolute path) with stdin from /dev/null until it exits or
  /// `timeout_ms` passes, then kills its process group.
  virtual CommandResult Run(const std::vector<std::string>& argv, uint64_t timeout_ms) = 0;
};

/// The real one: posix_spawn in its own process group, output through a pipe.
class PosixCommandRunner : public CommandRunner {
 public:
  static constexpr size_t kTailBytes = 4096;
  CommandResult Run(const std::vector<std::string>& argv, uint64_t timeout_ms) override;
};

}  // namespace berth
