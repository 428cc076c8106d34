#include "providers/host/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
}

}  // namespace

CommandResult PosixCommandRunner::Run(const std::vector<std::string>& argv, uint64_t timeout_ms) {
  CommandResult r;
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    r.error = "the command must start with an absolute path";
    return r;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("cannot create a pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills its children too
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t dfl;
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  sigaddset(&dfl, SIGINT);
  sigaddset(&dfl, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  auto t0 = Clock::now();
  int rc = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    r.error = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;
  std::string out;
  bool open = true;
  auto deadline = t0 + std::chrono::milliseconds(timeout_ms);
  while (open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      open = false;
      break;
    }
    out.append(buf, static_cast<size_t>(got));
    if (out.size() > 2 * kTailBytes) out.erase(0, out.size() - kTailBytes);
  }
  close(fds[0]);
  int status = 0;
  if (r.timed_out) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  } else {
    // The output closed: it exited, or it closed its output and runs on. Wait out the rest.
    for (;;) {
      pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno != EINTR) break;
      if (Clock::now() >= deadline) {
        r.timed_out = true;
        kill(-pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      usleep(10000);
    }
  }
  r.elapsed_ms = Since(t0);
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  if (out.size() > kTailBytes) out.erase(0, out.size() - kTailBytes);
  r.output_tail = std::move(out);
  return r;
}

}  // namespace berth
