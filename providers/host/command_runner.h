// Running a command of the operator's (a service's `preflight:`): no shell, no PATH lookup, a
// timeout, and the tail of what it printed for the error. Every process it starts ends with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace berth {

struct CommandResult {
  bool started = false;     // false: it could not be run at all (`error` says why)
  bool timed_out = false;   // killed (with every process it started) at the timeout
  int exit_status = -1;     // when it exited; -1 otherwise
  int signal = 0;           // when a signal ended it
  std::string output_tail;  // the last bytes of stdout and stderr, interleaved
  std::string error;        // why it could not be run, or what went wrong around it
  uint64_t elapsed_ms = 0;
  bool ok() const { return started && !timed_out && signal == 0 && exit_status == 0; }
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  /// Runs `argv` (argv[0] an absolute path) with stdin from /dev/null until it exits or
  /// `timeout_ms` passes. Its own exit decides the result, not the end of its output: a child
  /// it leaves behind holding stdout does not make it time out. When it ends (or at the
  /// timeout), every process it started is killed, those that left its session too.
  /// `env`: the command's whole environment, "KEY=VALUE" each (at most kMaxEnvEntries entries
  /// and kMaxEnvBytes in all; an entry without '=' or with a NUL is refused, nothing runs);
  /// nullptr: berth's own environment.
  virtual CommandResult Run(const std::vector<std::string>& argv, uint64_t timeout_ms,
                            const std::vector<std::string>* env) = 0;
  CommandResult Run(const std::vector<std::string>& argv, uint64_t timeout_ms) {
    return Run(argv, timeout_ms, nullptr);
  }
  static constexpr size_t kMaxEnvEntries = 4096;
  static constexpr size_t kMaxEnvBytes = 1 << 20;
};

/// "" when `env` is an environment Run accepts, else why not.
std::string EnvironmentProblem(const std::vector<std::string>& env);

/// The real one. The command runs under a keeper process in a new session, a child subreaper
/// (PR_SET_CHILD_SUBREAPER): whatever the command starts stays the keeper's descendant even
/// after `setsid` and a double fork, so berth finds each one (/proc) and kills it. The keeper
/// dies with berth (PR_SET_PDEATHSIG).
class PosixCommandRunner : public CommandRunner {
 public:
  static constexpr size_t kTailBytes = 4096;
  /// After the command exited, how long its output is still read while something it left
  /// behind keeps the pipe open.
  static constexpr int kDrainMs = 200;
  using CommandRunner::Run;
  CommandResult Run(const std::vector<std::string>& argv, uint64_t timeout_ms,
                    const std::vector<std::string>* env) override;
};

}  // namespace berth
