#include "providers/host/command_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

extern char** environ;

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
}

// Writes all of `n` bytes, or gives up; async-signal-safe.
void WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The keeper, in the forked child: only async-signal-safe calls (berth has threads). A new
// session, a subreaper for everything the command starts, dead with berth; it starts the
// command, sends its wait status on `status_fd` the moment it exits, and reaps every orphan
// until none is left. An errno on `error_fd` says the command could not be run.
[[noreturn]] void Keeper(char* const* args, char* const* envp, pid_t berth, int devnull, int out_fd,
                         int status_fd, int error_fd) {
  setsid();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, nullptr);  // berth's disposition must not reap for it
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, nullptr);  // berth stopped listening: the keeper still reaps
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != berth) _exit(1);  // berth died before the line above
  pid_t command = fork();
  if (command < 0) {
    int e = errno;
    WriteAll(error_fd, &e, sizeof e);
    _exit(127);
  }
  if (command == 0) {
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &dfl, nullptr);
    prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(devnull, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    execve(args[0], args, envp ? envp : environ);
    int e = errno;
    WriteAll(error_fd, &e, sizeof e);
    _exit(127);
  }
  close(out_fd);
  close(error_fd);
  close(devnull);
  for (;;) {
    int status = 0;
    pid_t w = waitpid(-1, &status, 0);
    if (w == command) {
      WriteAll(status_fd, &status, sizeof status);
    } else if (w < 0 && errno != EINTR) {
      _exit(0);  // ECHILD: nothing of the command is left
    }
  }
}

// pid -> parent pid of every process /proc shows.
std::map<pid_t, pid_t> Parents() {
  std::map<pid_t, pid_t> parents;
  DIR* proc = opendir("/proc");
  if (!proc) return parents;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat;
    std::getline(in, stat);
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid) parents[static_cast<pid_t>(pid)] = static_cast<pid_t>(ppid);
  }
  closedir(proc);
  return parents;
}

// Every living descendant of `root`.
std::set<pid_t> Descendants(pid_t root) {
  std::map<pid_t, pid_t> parents = Parents();
  std::set<pid_t> found = {root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, ppid] : parents)
      if (found.count(ppid) && found.insert(pid).second) grew = true;
  }
  found.erase(root);
  return found;
}

// Kills everything under the keeper, then the keeper once it has reaped them; waits for it.
// False when something would not die (a process stuck in the kernel).
bool EndAll(pid_t keeper) {
  int status = 0;
  for (int round = 0; round < 500; ++round) {
    std::set<pid_t> left = Descendants(keeper);
    for (pid_t pid : left) kill(pid, SIGKILL);
    pid_t w = waitpid(keeper, &status, left.empty() ? 0 : WNOHANG);
    if (w == keeper || (w < 0 && errno == ECHILD)) return true;
    usleep(10000);
  }
  kill(keeper, SIGKILL);
  while (waitpid(keeper, &status, 0) < 0 && errno == EINTR) {
  }
  return false;
}

}  // namespace

std::string EnvironmentProblem(const std::vector<std::string>& env) {
  if (env.size() > CommandRunner::kMaxEnvEntries)
    return "its environment has " + std::to_string(env.size()) + " variables, more than the " +
           std::to_string(CommandRunner::kMaxEnvEntries) + " berth passes";
  size_t bytes = 0;
  for (const std::string& e : env) {
    bytes += e.size() + 1;
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || e.find('\0') != std::string::npos)
      return "its environment holds an entry that is not KEY=VALUE";
  }
  if (bytes > CommandRunner::kMaxEnvBytes)
    return "its environment is " + std::to_string(bytes) + " bytes, more than the " +
           std::to_string(CommandRunner::kMaxEnvBytes) + " berth passes";
  return "";
}

CommandResult PosixCommandRunner::Run(const std::vector<std::string>& argv, uint64_t timeout_ms,
                                      const std::vector<std::string>* env) {
  CommandResult r;
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    r.error = "the command must start with an absolute path";
    return r;
  }
  if (env) {
    std::string problem = EnvironmentProblem(*env);
    if (!problem.empty()) {
      r.error = "cannot run " + argv[0] + ": " + problem;
      return r;
    }
  }
  // Its output, the keeper's word of its exit, the exec's errno; its stdin.
  int out[2] = {-1, -1}, status[2] = {-1, -1}, error[2] = {-1, -1};
  int devnull = -1;
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0 || pipe2(error, O_CLOEXEC) != 0 ||
      (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    r.error = std::string("cannot set up its pipes: ") + std::strerror(errno);
    for (int fd : {out[0], out[1], status[0], status[1], error[0], error[1]})
      if (fd >= 0) close(fd);
    return r;
  }
  // Everything the keeper needs is made before the fork: after it, no allocation.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  if (env) {
    for (const auto& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  const pid_t self = getpid();
  auto t0 = Clock::now();
  pid_t keeper = fork();
  if (keeper == 0)
    Keeper(args.data(), env ? envp.data() : nullptr, self, devnull, out[1], status[1], error[1]);
  int fork_errno = errno;
  for (int fd : {out[1], status[1], error[1], devnull}) close(fd);
  if (keeper < 0) {
    for (int fd : {out[0], status[0], error[0]}) close(fd);
    r.error = "cannot run " + argv[0] + ": fork: " + std::strerror(fork_errno);
    return r;
  }
  // The exec's own answer: nothing (it ran, the pipe closed at exec) or its errno.
  int exec_errno = 0;
  ssize_t got_errno;
  do {
    got_errno = read(error[0], &exec_errno, sizeof exec_errno);
  } while (got_errno < 0 && errno == EINTR);
  close(error[0]);
  if (got_errno == static_cast<ssize_t>(sizeof exec_errno)) {
    for (int fd : {out[0], status[0]}) close(fd);
    EndAll(keeper);
    r.error = "cannot run " + argv[0] + ": " + std::strerror(exec_errno);
    return r;
  }
  r.started = true;

  std::string text;
  bool output_open = true, exited = false, keeper_gone = false;
  int wait_status = 0;
  const auto deadline = t0 + std::chrono::milliseconds(timeout_ms);
  Clock::time_point drained_by{};
  for (;;) {
    auto now = Clock::now();
    if (exited && (!output_open || now >= drained_by)) break;
    if (keeper_gone && !output_open) break;
    if (!exited && now >= deadline) {
      r.timed_out = true;
      break;
    }
    auto until = exited ? drained_by : deadline;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    pollfd p[2] = {{output_open ? out[0] : -1, POLLIN, 0},
                   {exited || keeper_gone ? -1 : status[0], POLLIN, 0}};
    int n = poll(p, 2, static_cast<int>(std::clamp<int64_t>(left, 1, 1000)));
    if (n <= 0) continue;  // EINTR, or the time is up: checked above
    if (p[1].revents != 0) {
      ssize_t got = read(status[0], &wait_status, sizeof wait_status);
      if (got == static_cast<ssize_t>(sizeof wait_status)) {
        exited = true;
        drained_by = Clock::now() + std::chrono::milliseconds(kDrainMs);
      } else if (got == 0 || (got < 0 && errno != EINTR)) {
        keeper_gone = true;  // killed from outside before the command ended
      }
    }
    if (p[0].revents != 0) {
      char buf[4096];
      ssize_t got = read(out[0], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        output_open = false;
        continue;
      }
      text.append(buf, static_cast<size_t>(got));
      if (text.size() > 2 * kTailBytes) text.erase(0, text.size() - kTailBytes);
    }
  }
  // Whatever it left behind ends with it, at the timeout as after its exit; the keeper's pipe
  // stays open until it is gone.
  if (!EndAll(keeper)) r.error = "some of its processes could not be killed (stuck in the kernel?)";
  close(out[0]);
  close(status[0]);
  r.elapsed_ms = Since(t0);
  if (exited) {
    if (WIFEXITED(wait_status)) r.exit_status = WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) r.signal = WTERMSIG(wait_status);
  } else if (keeper_gone && !r.timed_out) {
    r.error = "its keeper process was killed before the command ended; its exit is unknown";
  }
  if (text.size() > kTailBytes) text.erase(0, text.size() - kTailBytes);
  r.output_tail = std::move(text);
  return r;
}

}  // namespace berth
