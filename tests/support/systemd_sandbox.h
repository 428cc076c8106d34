// A real systemd booted as PID 1 of private namespaces (tests/sandbox/sdsandbox.sh), owned by a
// test: Start() boots it, the destructor tears it down and proves nothing is left. Units are
// written into units_dir() and driven over system_bus_address() (the production D-Bus path) or
// with Exec({"systemctl", ...}). See shared/reference/systemd-dbus.md section 3.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace berth::testing {

/// What a finished command did. exit_code: its status (0..255), 128+N when killed by signal N,
/// -1 when it could not be started or was killed for running past its timeout (see `error`).
struct CommandResult {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr, interleaved as written
  std::string error;   ///< why it could not run or finish; empty otherwise
  bool ok() const { return exit_code == 0; }
};

/// Runs argv[0] (searched in PATH) with `env` as its whole environment (empty: inherit ours),
/// no shell involved, in its own process group, stdin /dev/null, no other fd of ours; kills the
/// group (SIGKILL) after `timeout`.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(60));

class SystemdSandbox {
 public:
  struct Options {
    /// $SDSB_BASE: where the sandbox's state lives. Empty (the default): $BERTH_SANDBOX_BASE,
    /// else the build tree's "sandboxes" dir (the CTest cleanup fixture stops what is left
    /// there), else a mkdtemp dir under /tmp.
    std::string base;
    bool minimal = false;  ///< --minimal: no sysinit/basic.target at boot (default off)
    bool dbus = true;      ///< false: --no-dbus, only the private socket (default on)
    /// --multi-user: the boot also reaches multi-user.target, so units enabled with
    /// WantedBy=multi-user.target start at boot (default off; not with `minimal`).
    bool multi_user = false;
    /// --keep-units: boot over the units dir that a stopped sandbox of the same name left (it
    /// must have been stopped with keep_artifacts): a reboot of that host (default off).
    bool keep_units = false;
    /// --private-network: a network namespace of its own, so that several sandboxes serve the
    /// same port like separate hosts (default off). Reach it with NetnsPath() (setns) or Exec.
    bool private_network = false;
    int timeout_s = 30;  ///< boot timeout in seconds (default 30)
  };

  /// Whether sandboxes can run here: root, a cgroup2 hierarchy, systemd, dbus-daemon, nsenter,
  /// unshare, the script and a non-empty /etc/machine-id. If not, `why` says what is missing.
  static bool Available(std::string* why);
  /// True when BERTH_ALLOW_NO_SANDBOX=1: tests may skip instead of failing without a sandbox.
  static bool MissingAllowed();

  /// Boots sandbox `name` ([A-Za-z0-9_-]{1,32}, unique among running sandboxes on the host: use
  /// UniqueName). Blocks until systemd is running and on its system bus. nullptr + `error` on
  /// failure (a half-started sandbox is stopped first).
  static std::unique_ptr<SystemdSandbox> Start(const std::string& name, std::string* error);
  static std::unique_ptr<SystemdSandbox> Start(const std::string& name, const Options& options,
                                               std::string* error);
  /// "prefix-PID-N": unique among the processes of this host; prefix is cut to fit 32 chars.
  static std::string UniqueName(std::string_view prefix);

  /// Stop() if not stopped yet; a failure (a process left, the cgroup not removed) is printed
  /// to stderr and, inside a GoogleTest test, added as a test failure.
  ~SystemdSandbox();
  SystemdSandbox(const SystemdSandbox&) = delete;
  SystemdSandbox& operator=(const SystemdSandbox&) = delete;

  /// `sdsandbox.sh stop NAME --save-journal` (SIGKILL to PID 1, which takes down the whole pid
  /// namespace), then checks itself that no host process is left in the sandbox's pid namespace
  /// and that the cgroup dir is gone. Idempotent. On success the sandbox dir (units, saved
  /// journal) is removed unless keep_artifacts() or $BERTH_KEEP_SANDBOXES=1 or the current
  /// GoogleTest test has failed: then the journal's path is printed.
  bool Stop(std::string* error);
  bool stopped() const { return stopped_; }

  /// Runs argv inside the sandbox (all its namespaces: sdsandbox.sh exec) with a small clean
  /// environment (system PATH, LANG=C.UTF-8, SYSTEMD_COLORS=0, SYSTEMD_PAGER=cat, SDSB_*).
  CommandResult Exec(const std::vector<std::string>& argv,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  /// Same, but in the sandbox's pid namespace only (host file system; can use private_address).
  CommandResult PidnsExec(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;

  const std::string& name() const { return name_; }
  /// Host PID of the sandbox's PID 1 (systemd).
  pid_t pid() const { return pid_; }
  /// "/proc/PID/ns/net": its network namespace (the host's unless private_network).
  std::string netns_path() const { return "/proc/" + std::to_string(pid_) + "/ns/net"; }
  /// $SDSB_BASE/NAME: units/, env, console.log, journal/ (after Stop).
  const std::string& dir() const { return dir_; }
  /// Host path of the sandbox's /etc/systemd/system: write unit files here.
  const std::string& units_dir() const { return units_dir_; }
  /// /proc/PID/root: the sandbox's file system as seen from the host.
  const std::string& root() const { return root_; }
  /// "unix:path=/proc/PID/root/run/dbus/system_bus_socket": for DBUS_SYSTEM_BUS_ADDRESS.
  const std::string& system_bus_address() const { return system_bus_address_; }
  /// "unix:path=/proc/PID/root/run/systemd/private": only for clients in the pid namespace.
  const std::string& private_address() const { return private_address_; }
  /// root() + "/run/log/journal" (volatile; gone after Stop, see saved_journal_dir()).
  std::string journal_dir() const { return root_ + "/run/log/journal"; }
  /// dir() + "/journal": the copy Stop() saves.
  std::string saved_journal_dir() const { return dir_ + "/journal"; }
  /// Host path of the sandbox's cgroup2 dir, e.g. /sys/fs/cgroup/sdsandbox.NAME.
  const std::string& cgroup() const { return cgroup_; }
  /// "pid:[INODE]": the sandbox's pid namespace, remembered at start.
  const std::string& pid_namespace() const { return pid_namespace_; }
  /// Seconds Start() took (launch until systemd is on the bus) and Stop() took.
  double boot_seconds() const { return boot_seconds_; }
  double stop_seconds() const { return stop_seconds_; }

  void set_keep_artifacts(bool keep) { keep_artifacts_ = keep; }
  bool keep_artifacts() const { return keep_artifacts_; }

  /// Host PIDs of the processes whose pid namespace is `pid_namespace` ("pid:[INODE]"), zombies
  /// left out (one whose parent is outside the namespace waits for that parent to reap it).
  static std::vector<pid_t> ProcessesInPidNamespace(const std::string& pid_namespace);
  /// Host PIDs listed in cgroup.procs of `cgroup_dir` and every cgroup below it.
  static std::vector<pid_t> ProcessesInCgroup(const std::string& cgroup_dir);
  /// The script and the default base this build uses.
  static std::string ScriptPath();
  static std::string DefaultBase();

 private:
  SystemdSandbox() = default;
  std::vector<std::string> ScriptEnv() const;

  std::string name_, base_, dir_, units_dir_, root_, system_bus_address_, private_address_, cgroup_,
      pid_namespace_;
  pid_t pid_ = 0;
  bool stopped_ = false;
  bool keep_artifacts_ = false;
  int slot_ = -1;  // in the emergency-stop table (atexit / fatal signals)
  double boot_seconds_ = 0, stop_seconds_ = 0;
};

}  // namespace berth::testing

/// In a TEST body: fails the test when sandboxes cannot run here, or skips it (printing why)
/// when BERTH_ALLOW_NO_SANDBOX=1.
#define BERTH_REQUIRE_SANDBOX()                                                \
  do {                                                                         \
    std::string berth_sandbox_why_;                                            \
    if (!::berth::testing::SystemdSandbox::Available(&berth_sandbox_why_)) {   \
      if (::berth::testing::SystemdSandbox::MissingAllowed()) {                \
        GTEST_SKIP() << "no systemd sandbox here (BERTH_ALLOW_NO_SANDBOX=1): " \
                     << berth_sandbox_why_;                                    \
      }                                                                        \
      FAIL() << "no systemd sandbox here: " << berth_sandbox_why_              \
             << " (set BERTH_ALLOW_NO_SANDBOX=1 to skip these tests instead)"; \
    }                                                                          \
  } while (false)
