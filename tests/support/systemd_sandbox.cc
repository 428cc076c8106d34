#include "tests/support/systemd_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

extern char** environ;

namespace berth::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr long kCgroup2SuperMagic = 0x63677270;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Tail(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  return "..." + text.substr(text.size() - max_bytes);
}

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

bool InPath(const std::string& program) {
  std::stringstream dirs(kDefaultPath);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && IsExecutable(dir + "/" + program)) return true;
  }
  return false;
}

bool IsCgroup2(const char* path) {
  struct statfs st {};
  return statfs(path, &st) == 0 && static_cast<long>(st.f_type) == kCgroup2SuperMagic;
}

// ---- Emergency stop: sandboxes still running at exit() or on a fatal signal -----------------
// Everything the signal handler touches is prepared beforehand in fixed storage; the handler only
// uses fork, execve, waitpid, sigaction and raise (async-signal-safe).

constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> used{0};
  std::atomic<pid_t> owner{0};  // a forked child must not stop its parent's sandboxes
  std::array<char, 4096> script{};
  std::array<char, 40> name{};
  std::array<char, 4200> base_env{};
  std::array<char, 64> path_env{};
  std::array<char*, 6> argv{};
  std::array<char*, 3> envp{};
};
Slot g_slots[kSlots];
std::mutex g_slots_mutex;
std::once_flag g_handlers_once;
constexpr std::array<int, 8> kFatalSignals = {SIGINT,  SIGTERM, SIGHUP, SIGQUIT,
                                              SIGABRT, SIGSEGV, SIGBUS, SIGFPE};
struct sigaction g_old_actions[kFatalSignals.size()];

void StopSlotsNow() {
  for (Slot& slot : g_slots) {
    if (slot.owner.load() != getpid() || slot.used.exchange(0) != 1) continue;
    pid_t child = fork();
    if (child == 0) {
      execve("/bin/bash", slot.argv.data(), slot.envp.data());
      _exit(127);
    }
    if (child > 0) {
      int status = 0;
      while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
}

void OnFatalSignal(int sig) {
  int saved_errno = errno;
  static const char kMsg[] = "berth SystemdSandbox: fatal signal, stopping running sandboxes\n";
  ssize_t ignored = write(2, kMsg, sizeof kMsg - 1);
  (void)ignored;
  StopSlotsNow();
  for (size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (kFatalSignals[i] == sig) sigaction(sig, &g_old_actions[i], nullptr);
  }
  errno = saved_errno;
  raise(sig);  // the previous disposition (default: die of the signal) now
}

void InstallHandlersOnce() {
  std::call_once(g_handlers_once, [] {
    std::atexit([] { StopSlotsNow(); });
    for (size_t i = 0; i < kFatalSignals.size(); ++i) {
      struct sigaction old_action {};
      sigaction(kFatalSignals[i], nullptr, &old_action);
      g_old_actions[i] = old_action;
      // Leave ignored signals ignored and somebody else's handler in place.
      if (old_action.sa_handler != SIG_DFL) continue;
      struct sigaction action {};
      action.sa_handler = OnFatalSignal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      sigaction(kFatalSignals[i], &action, nullptr);
    }
  });
}

bool CopyInto(char* dst, size_t size, const std::string& src) {
  if (src.size() + 1 > size) return false;
  std::memcpy(dst, src.c_str(), src.size() + 1);
  return true;
}

int RegisterSlot(const std::string& script, const std::string& name, const std::string& base) {
  InstallHandlersOnce();
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (int i = 0; i < kSlots; ++i) {
    Slot& slot = g_slots[i];
    if (slot.used.load() != 0) continue;
    if (!CopyInto(slot.script.data(), slot.script.size(), script) ||
        !CopyInto(slot.name.data(), slot.name.size(), name) ||
        !CopyInto(slot.base_env.data(), slot.base_env.size(), "SDSB_BASE=" + base) ||
        !CopyInto(slot.path_env.data(), slot.path_env.size(),
                  "PATH=/usr/sbin:/usr/bin:/sbin:/bin")) {
      return -1;
    }
    static char bash[] = "bash";
    static char stop[] = "stop";
    slot.argv = {bash, slot.script.data(), stop, slot.name.data(), nullptr, nullptr};
    slot.envp = {slot.base_env.data(), slot.path_env.data(), nullptr};
    slot.owner.store(getpid());
    slot.used.store(1);
    return i;
  }
  return -1;
}

void UnregisterSlot(int index) {
  if (index < 0) return;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  g_slots[index].used.store(0);
}

bool InFailedGoogleTest() {
  return ::testing::UnitTest::GetInstance()->current_test_info() != nullptr &&
         ::testing::Test::HasFailure();
}

std::map<std::string, std::string> ParseEnvFile(const std::string& text) {
  std::map<std::string, std::string> vars;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return vars;
}

std::string DescribeProcesses(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t p : pids) {
    std::string cmdline = ReadFile("/proc/" + std::to_string(p) + "/cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    out += "\n  pid " + std::to_string(p) + ": " + cmdline;
  }
  return out;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         std::chrono::milliseconds timeout) {
  CommandResult result;
  if (argv.empty()) {
    result.error = "empty argv";
    return result;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.error = std::string("pipe2: ") + std::strerror(errno);
    return result;
  }
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  std::vector<char*> c_env;
  for (const std::string& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  // Nothing else of ours leaks into the child (and from there into a sandbox that outlives it).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t no_signals, default_signals;
  sigemptyset(&no_signals);
  sigemptyset(&default_signals);
  for (int sig : kFatalSignals) sigaddset(&default_signals, sig);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills what it started too
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t child = 0;
  int rc = posix_spawnp(&child, c_argv[0], &actions, &attr, c_argv.data(),
                        env.empty() ? environ : c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    result.error = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return result;
  }

  const auto deadline = Clock::now() + timeout;
  bool timed_out = false;
  int status = 0;
  bool reaped = false;
  Clock::time_point reaped_at;
  for (;;) {
    auto now = Clock::now();
    if (!reaped && now >= deadline) {
      timed_out = true;
      kill(-child, SIGKILL);
      while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    // After the child is gone, a grandchild that kept the pipe open gets one more second.
    if (reaped && now - reaped_at > std::chrono::seconds(1)) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::min<long long>(left, reaped ? 100 : 50)));
    if (n > 0) {
      char buf[65536];
      ssize_t got = read(fds[0], buf, sizeof buf);
      if (got > 0) {
        result.output.append(buf, static_cast<size_t>(got));
        continue;
      }
      if (got == 0) {  // EOF: every writer is gone
        if (!reaped) {
          while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
          }
          reaped = true;
        }
        break;
      }
      if (errno != EINTR && errno != EAGAIN) break;
    }
    if (!reaped && waitpid(child, &status, WNOHANG) == child) {
      reaped = true;
      reaped_at = Clock::now();
    }
  }
  close(fds[0]);
  if (timed_out) {
    result.exit_code = -1;
    result.error = argv[0] + " timed out after " + std::to_string(timeout.count()) + " ms";
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

bool SystemdSandbox::Available(std::string* why) {
  std::vector<std::string> missing;
  if (geteuid() != 0) missing.push_back("not root (euid " + std::to_string(geteuid()) + ")");
  if (!IsCgroup2("/sys/fs/cgroup") && !IsCgroup2("/sys/fs/cgroup/unified")) {
    missing.push_back("no cgroup2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified");
  }
  std::string systemd = GetEnv("SYSTEMD_BIN");
  if (systemd.empty()) systemd = "/lib/systemd/systemd";
  if (!IsExecutable(systemd)) missing.push_back("no systemd binary at " + systemd);
  for (const char* tool :
       {"dbus-daemon", "nsenter", "unshare", "setsid", "systemctl", "busctl", "mountpoint"}) {
    if (!InPath(tool)) missing.push_back(std::string("no ") + tool + " in PATH");
  }
  if (!IsExecutable("/bin/bash")) missing.push_back("no /bin/bash");
  std::string script = ScriptPath();
  if (access(script.c_str(), R_OK) != 0) missing.push_back("no script " + script);
  struct stat st {};
  if (stat("/etc/machine-id", &st) != 0 || st.st_size == 0) {
    missing.push_back("/etc/machine-id missing or empty");
  }
  if (why) {
    why->clear();
    for (const std::string& m : missing) *why += (why->empty() ? "" : "; ") + m;
  }
  return missing.empty();
}

bool SystemdSandbox::MissingAllowed() { return GetEnv("BERTH_ALLOW_NO_SANDBOX") == "1"; }

std::string SystemdSandbox::ScriptPath() {
  std::string from_env = GetEnv("BERTH_SDSANDBOX_SH");
  if (!from_env.empty()) return from_env;
#ifdef BERTH_SDSANDBOX_SH
  return BERTH_SDSANDBOX_SH;
#else
  std::string source = GetEnv("BERTH_SOURCE_DIR");
  return (source.empty() ? std::string(".") : source) + "/tests/sandbox/sdsandbox.sh";
#endif
}

std::string SystemdSandbox::DefaultBase() {
  std::string from_env = GetEnv("BERTH_SANDBOX_BASE");
  if (!from_env.empty()) return from_env;
#ifdef BERTH_TEST_SANDBOX_BASE
  return BERTH_TEST_SANDBOX_BASE;
#else
  static const std::string temp = [] {
    char tmpl[] = "/tmp/berth-sandboxes-XXXXXX";
    const char* dir = mkdtemp(tmpl);
    return std::string(dir ? dir : "/tmp/berth-sandboxes");
  }();
  return temp;
#endif
}

std::string SystemdSandbox::UniqueName(std::string_view prefix) {
  static std::atomic<int> counter{0};
  std::string suffix = "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  std::string head;
  for (char c : prefix) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    head += ok ? c : '-';
  }
  if (head.empty()) head = "sb";
  if (head.size() + suffix.size() > 32) head.resize(32 - suffix.size());
  return head + suffix;
}

std::vector<std::string> SystemdSandbox::ScriptEnv() const {
  // A fixed system PATH: shims in a developer's PATH (pyenv, cargo...) must not stand in for
  // nsenter, systemctl or python3 inside the sandbox.
  std::vector<std::string> env = {std::string("PATH=") + kDefaultPath,
                                  "SDSB_BASE=" + base_,
                                  "SDSB_OWNER=" + std::to_string(getpid()),
                                  "LANG=C.UTF-8",
                                  "TERM=dumb",
                                  "SYSTEMD_COLORS=0",
                                  "SYSTEMD_PAGER=cat"};
  std::string systemd = GetEnv("SYSTEMD_BIN");
  if (!systemd.empty()) env.push_back("SYSTEMD_BIN=" + systemd);
  return env;
}

std::unique_ptr<SystemdSandbox> SystemdSandbox::Start(const std::string& name, std::string* error) {
  return Start(name, Options(), error);
}

std::unique_ptr<SystemdSandbox> SystemdSandbox::Start(const std::string& name,
                                                      const Options& options, std::string* error) {
  std::string ignored;
  if (!error) error = &ignored;
  if (!ValidName(name)) {
    *error = "bad sandbox name '" + name + "' (want [A-Za-z0-9_-]{1,32})";
    return nullptr;
  }
  std::string why;
  if (!Available(&why)) {
    *error = "systemd sandbox not available: " + why;
    return nullptr;
  }
  std::unique_ptr<SystemdSandbox> sb(new SystemdSandbox());
  sb->name_ = name;
  sb->base_ = options.base.empty() ? DefaultBase() : options.base;
  sb->dir_ = sb->base_ + "/" + name;
  std::error_code ec;
  fs::create_directories(sb->base_, ec);
  if (ec) {
    *error = "cannot create " + sb->base_ + ": " + ec.message();
    return nullptr;
  }
  std::vector<std::string> argv = {"/bin/bash", ScriptPath(), "start", name};
  if (options.minimal) argv.push_back("--minimal");
  if (!options.dbus) argv.push_back("--no-dbus");
  if (options.multi_user) argv.push_back("--multi-user");
  if (options.keep_units) argv.push_back("--keep-units");
  if (options.private_network) argv.push_back("--private-network");
  argv.push_back("--timeout");
  argv.push_back(std::to_string(options.timeout_s));

  const auto t0 = Clock::now();
  CommandResult started =
      RunCommand(argv, sb->ScriptEnv(), std::chrono::seconds(options.timeout_s + 30));
  sb->boot_seconds_ = SecondsSince(t0);
  std::map<std::string, std::string> vars;
  if (started.ok()) vars = ParseEnvFile(ReadFile(sb->dir_ + "/env"));
  if (!started.ok() || vars["SDSB_PID"].empty()) {
    *error = "sdsandbox.sh start " + name + " failed (exit " + std::to_string(started.exit_code) +
             ") " + started.error + ":\n" + started.output + "\nconsole.log:\n" +
             Tail(ReadFile(sb->dir_ + "/console.log"), 4000);
    if (fs::exists(sb->dir_ + "/pid")) {
      sb->cgroup_ = ReadFile(sb->dir_ + "/cgroup");
      std::string stop_error;
      if (!sb->Stop(&stop_error)) *error += "\nand stopping it failed too: " + stop_error;
    } else {
      sb->stopped_ = true;
    }
    return nullptr;
  }
  sb->pid_ = static_cast<pid_t>(std::stol(vars["SDSB_PID"]));
  sb->root_ = vars["SDSB_ROOT"];
  sb->units_dir_ = vars["SDSB_UNITS"];
  sb->cgroup_ = vars["SDSB_CGROUP"];
  sb->system_bus_address_ = vars["SDSB_SYSTEM_BUS_ADDRESS"];
  sb->private_address_ = vars["SDSB_PRIVATE_ADDRESS"];
  sb->pid_namespace_ = fs::read_symlink("/proc/" + vars["SDSB_PID"] + "/ns/pid", ec).string();
  sb->slot_ = RegisterSlot(ScriptPath(), name, sb->base_);
  if (sb->slot_ < 0) {
    std::fprintf(stderr, "berth SystemdSandbox: no emergency-stop slot for %s\n", name.c_str());
  }
  return sb;
}

SystemdSandbox::~SystemdSandbox() {
  if (stopped_) return;
  std::string error;
  if (!Stop(&error)) {
    std::fprintf(stderr,
                 "\n!!!!!!!! berth SystemdSandbox %s: TEARDOWN FAILED !!!!!!!!\n%s\n"
                 "!!!!!!!! run: SDSB_BASE=%s %s stop-all\n\n",
                 name_.c_str(), error.c_str(), base_.c_str(), ScriptPath().c_str());
    if (::testing::UnitTest::GetInstance()->current_test_info() != nullptr) {
      ADD_FAILURE() << "systemd sandbox " << name_ << " teardown failed: " << error;
    }
  }
}

bool SystemdSandbox::Stop(std::string* error) {
  std::string ignored;
  if (!error) error = &ignored;
  if (stopped_) return true;
  const auto t0 = Clock::now();
  CommandResult stopped = RunCommand({"/bin/bash", ScriptPath(), "stop", name_, "--save-journal"},
                                     ScriptEnv(), std::chrono::seconds(60));
  std::vector<std::string> problems;
  if (!stopped.ok()) {
    problems.push_back("sdsandbox.sh stop exited " + std::to_string(stopped.exit_code) + " " +
                       stopped.error + ": " + stopped.output);
  }
  // Our own check, independent of the script's.
  std::vector<pid_t> left;
  if (!pid_namespace_.empty()) {
    for (int i = 0; i < 100; ++i) {
      left = ProcessesInPidNamespace(pid_namespace_);
      if (left.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (!left.empty()) {
    problems.push_back(std::to_string(left.size()) + " processes left in pid namespace " +
                       pid_namespace_ + ":" + DescribeProcesses(left));
  }
  while (!cgroup_.empty() && cgroup_.back() == '\n') cgroup_.pop_back();
  if (!cgroup_.empty() && fs::exists(cgroup_)) {
    problems.push_back("cgroup " + cgroup_ + " still exists" +
                       DescribeProcesses(ProcessesInCgroup(cgroup_)));
  }
  stop_seconds_ = SecondsSince(t0);
  stopped_ = true;
  if (!problems.empty()) {
    UnregisterSlot(slot_);  // the emergency stop would only fail the same way
    slot_ = -1;
    error->clear();
    for (const std::string& p : problems) *error += p + "\n";
    return false;
  }
  UnregisterSlot(slot_);
  slot_ = -1;
  if (keep_artifacts_ || GetEnv("BERTH_KEEP_SANDBOXES") == "1" || InFailedGoogleTest()) {
    std::fprintf(stderr, "berth SystemdSandbox %s: journal kept in %s (journalctl -D %s)\n",
                 name_.c_str(), saved_journal_dir().c_str(), saved_journal_dir().c_str());
  } else {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  return true;
}

CommandResult SystemdSandbox::Exec(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout) const {
  if (stopped_) return CommandResult{-1, "", "sandbox " + name_ + " is stopped"};
  std::vector<std::string> full = {"/bin/bash", ScriptPath(), "exec", name_};
  full.insert(full.end(), argv.begin(), argv.end());
  return RunCommand(full, ScriptEnv(), timeout);
}

CommandResult SystemdSandbox::PidnsExec(const std::vector<std::string>& argv,
                                        std::chrono::milliseconds timeout) const {
  if (stopped_) return CommandResult{-1, "", "sandbox " + name_ + " is stopped"};
  std::vector<std::string> full = {"/bin/bash", ScriptPath(), "pidns-exec", name_};
  full.insert(full.end(), argv.begin(), argv.end());
  return RunCommand(full, ScriptEnv(), timeout);
}

std::vector<pid_t> SystemdSandbox::ProcessesInPidNamespace(const std::string& pid_namespace) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code link_ec;
    fs::path ns = fs::read_symlink(entry.path() / "ns" / "pid", link_ec);
    if (link_ec || ns.string() != pid_namespace) continue;
    std::string stat = ReadFile(entry.path().string() + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) continue;  // gone meanwhile
    char state = stat[paren + 2];
    if (state != 'Z' && state != 'X') pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

std::vector<pid_t> SystemdSandbox::ProcessesInCgroup(const std::string& cgroup_dir) {
  std::vector<pid_t> pids;
  std::error_code ec;
  if (!fs::is_directory(cgroup_dir, ec)) return pids;
  auto add = [&pids](const fs::path& procs) {
    std::ifstream in(procs);
    long pid = 0;
    while (in >> pid) pids.push_back(static_cast<pid_t>(pid));
  };
  add(fs::path(cgroup_dir) / "cgroup.procs");
  for (auto it = fs::recursive_directory_iterator(cgroup_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec)) add(it->path() / "cgroup.procs");
  }
  return pids;
}

}  // namespace berth::testing
