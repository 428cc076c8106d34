// The systemd sandbox harness against a real systemd: a fake vLLM runs as a unit and answers
// on the host's loopback, the host is left as it was, two sandboxes run the same unit name side
// by side, and nothing survives a teardown, however the owner ends.
#include "planners/unit_render.h"
#include "tests/support/systemd_sandbox.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string SourceDir() {
  const char* env = std::getenv("BERTH_SOURCE_DIR");
  return env && *env ? env : BERTH_SOURCE_DIR;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/berth-sandbox-test-XXXXXX";
    const char* made = mkdtemp(tmpl);
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

struct HttpReply {
  int status = -1;  // -1: nothing listens / no valid reply
  std::string body;
};

// A one-shot HTTP/1.0 GET to 127.0.0.1:port, read until the server closes.
HttpReply HttpGet(int port, const std::string& path) {
  HttpReply reply;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return reply;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return reply;
  }
  std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return reply;
  }
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12) return reply;
  reply.status = std::atoi(raw.c_str() + 9);
  size_t body = raw.find("\r\n\r\n");
  if (body != std::string::npos) reply.body = raw.substr(body + 4);
  return reply;
}

bool WaitHealthy(int port, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (HttpGet(port, "/health").status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// One ExecStart= word, quoted by berth's own renderer: the test then also proves that quoting
// against the real systemd.
std::string ExecWord(const std::string& arg) { return QuoteExecArg(arg); }

std::string Joined(const std::vector<std::string>& args, size_t from) {
  std::string out;
  for (size_t i = from; i < args.size(); ++i) out += args[i] + '\0';
  return out;
}

void MakeModel(const std::string& dir) {
  CommandResult made =
      RunCommand({"/usr/bin/python3", SourceDir() + "/tests/fake_vllm/make_model.py", dir});
  ASSERT_TRUE(made.ok()) << made.error << made.output;
}

struct FakeVllmUnit {
  std::vector<std::string> argv;
  std::string text;
};

FakeVllmUnit MakeFakeVllmUnit(const std::string& model, int port, const std::string& served,
                              const std::string& argv_file) {
  FakeVllmUnit unit;
  unit.argv = {"/usr/bin/python3",
               SourceDir() + "/tests/fake_vllm/fake_vllm.py",
               "serve",
               model,
               "--host",
               "127.0.0.1",
               "--port",
               std::to_string(port),
               "--served-model-name",
               served,
               "--note",
               "100% \"quoted\" $HOME ${X} back\\slash caf\xc3\xa9\tend"};
  std::string exec;
  for (const std::string& a : unit.argv) exec += (exec.empty() ? "" : " ") + ExecWord(a);
  unit.text =
      "[Unit]\nDescription=berth sandbox test: fake vLLM " + served +
      "\n\n[Service]\nType=exec\nEnvironment=" + ExecWord("FAKE_VLLM_ARGV_FILE=" + argv_file) +
      "\nExecStart=" + exec + "\n";
  return unit;
}

std::vector<std::string> Glob(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) found.push_back(name);
  }
  return found;
}

std::unique_ptr<SystemdSandbox> StartOrDie(const std::string& prefix,
                                           const SystemdSandbox::Options& options = {}) {
  std::string error;
  auto sb = SystemdSandbox::Start(SystemdSandbox::UniqueName(prefix), options, &error);
  EXPECT_TRUE(sb) << error;
  return sb;
}

constexpr const char* kUnit = "berth-fake-vllm.service";

TEST(SystemdSandboxTest, FakeVllmUnitServesOnHostLoopbackAndTeardownLeavesNothing) {
  BERTH_REQUIRE_SANDBOX();
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string marker = "/tmp/berth-sandbox-marker-" + std::to_string(getpid());
  WriteFile(marker, "the host's /tmp must survive\n");
  const auto private_before = Glob("/tmp", "systemd-private-");
  const std::string file_max_before = ReadFile("/proc/sys/fs/file-max");

  auto sb = StartOrDie("vllm");
  ASSERT_TRUE(sb);
  std::fprintf(stderr, "boot: %.3f s\n", sb->boot_seconds());
  EXPECT_TRUE(fs::is_socket(sb->root() + "/run/systemd/private"));
  EXPECT_TRUE(fs::is_socket(sb->root() + "/run/dbus/system_bus_socket"));
  EXPECT_EQ(sb->system_bus_address(),
            "unix:path=/proc/" + std::to_string(sb->pid()) + "/root/run/dbus/system_bus_socket");
  EXPECT_TRUE(fs::is_directory(sb->journal_dir()));
  EXPECT_TRUE(fs::is_directory(sb->cgroup()));
  EXPECT_EQ(sb->Exec({"systemctl", "is-system-running"}).output, "running\n");
  EXPECT_EQ(sb->Exec({"cat", "/proc/1/comm"}).output, "systemd\n");

  const std::string model = tmp.path() + "/model";
  MakeModel(model);
  const int port = FreePort();
  const std::string argv_file = tmp.path() + "/argv.json";
  FakeVllmUnit unit = MakeFakeVllmUnit(model, port, "x", argv_file);
  WriteFile(sb->units_dir() + "/" + kUnit, unit.text);

  CommandResult reload = sb->Exec({"systemctl", "daemon-reload"});
  ASSERT_TRUE(reload.ok()) << reload.output << reload.error;
  CommandResult start = sb->Exec({"systemctl", "start", kUnit});
  ASSERT_TRUE(start.ok()) << start.output << start.error;
  ASSERT_TRUE(WaitHealthy(port, std::chrono::seconds(15)))
      << sb->Exec({"journalctl", "--no-pager", "-D", "/run/log/journal", "-u", kUnit}).output;
  HttpReply models = HttpGet(port, "/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_THAT(models.body, HasSubstr("\"id\": \"x\""));

  // systemd passed every byte of the ExecStart= words through (python sees argv from [1]) ...
  EXPECT_EQ(ReadFile(argv_file + ".bin"), Joined(unit.argv, 1));
  EXPECT_THAT(ReadFile(argv_file), HasSubstr("\"--served-model-name\", \"x\""));
  // ... and the service runs in the sandbox's cgroup and pid namespace, not the host's.
  const std::string unit_cgroup = sb->cgroup() + "/system.slice/" + kUnit;
  std::vector<pid_t> unit_pids = SystemdSandbox::ProcessesInCgroup(unit_cgroup);
  ASSERT_EQ(unit_pids.size(), 1u);
  EXPECT_EQ(ReadFile("/proc/" + std::to_string(unit_pids[0]) + "/cmdline"), Joined(unit.argv, 0));
  EXPECT_EQ(fs::read_symlink("/proc/" + std::to_string(unit_pids[0]) + "/ns/pid").string(),
            sb->pid_namespace());
  EXPECT_FALSE(fs::exists(std::string("/etc/systemd/system/") + kUnit));

  CommandResult stop = sb->Exec({"systemctl", "stop", kUnit});
  EXPECT_TRUE(stop.ok()) << stop.output;
  EXPECT_EQ(HttpGet(port, "/health").status, -1);
  EXPECT_EQ(sb->Exec({"systemctl", "is-active", kUnit}).output, "inactive\n");

  const std::string pidns = sb->pid_namespace();
  const std::string cgroup = sb->cgroup();
  std::string error;
  ASSERT_TRUE(sb->Stop(&error)) << error;
  std::fprintf(stderr, "stop: %.3f s\n", sb->stop_seconds());
  EXPECT_THAT(SystemdSandbox::ProcessesInPidNamespace(pidns), IsEmpty());
  EXPECT_FALSE(fs::exists(cgroup));
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(sb->pid()) + "/ns/pid") &&
               fs::read_symlink("/proc/" + std::to_string(sb->pid()) + "/ns/pid").string() ==
                   pidns);
  EXPECT_FALSE(fs::exists(sb->dir())) << "a passing test leaves no sandbox dir";

  EXPECT_EQ(ReadFile(marker), "the host's /tmp must survive\n");
  EXPECT_EQ(Glob("/tmp", "systemd-private-"), private_before);
  EXPECT_EQ(ReadFile("/proc/sys/fs/file-max"), file_max_before);
  fs::remove(marker);
}

TEST(SystemdSandboxTest, TwoSandboxesRunTheSameUnitNameOnDifferentPorts) {
  BERTH_REQUIRE_SANDBOX();
  TempDir tmp;
  const std::string model = tmp.path() + "/model";
  MakeModel(model);
  std::unique_ptr<SystemdSandbox> a, b;
  std::thread start_b([&b] { b = StartOrDie("pair-b"); });  // concurrent boots are fine
  a = StartOrDie("pair-a");
  start_b.join();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->pid_namespace(), b->pid_namespace());
  EXPECT_NE(a->cgroup(), b->cgroup());

  const int port_a = FreePort(), port_b = FreePort();
  WriteFile(a->units_dir() + "/" + kUnit,
            MakeFakeVllmUnit(model, port_a, "model-a", tmp.path() + "/argv-a").text);
  WriteFile(b->units_dir() + "/" + kUnit,
            MakeFakeVllmUnit(model, port_b, "model-b", tmp.path() + "/argv-b").text);
  for (SystemdSandbox* sb : {a.get(), b.get()}) {
    ASSERT_TRUE(sb->Exec({"systemctl", "daemon-reload"}).ok());
    CommandResult start = sb->Exec({"systemctl", "start", kUnit});
    ASSERT_TRUE(start.ok()) << start.output;
  }
  ASSERT_TRUE(WaitHealthy(port_a, std::chrono::seconds(15)));
  ASSERT_TRUE(WaitHealthy(port_b, std::chrono::seconds(15)));
  EXPECT_THAT(HttpGet(port_a, "/v1/models").body, HasSubstr("\"id\": \"model-a\""));
  EXPECT_THAT(HttpGet(port_b, "/v1/models").body, HasSubstr("\"id\": \"model-b\""));
  EXPECT_THAT(SystemdSandbox::ProcessesInCgroup(a->cgroup() + "/system.slice/" + kUnit),
              Not(IsEmpty()));
  EXPECT_THAT(SystemdSandbox::ProcessesInCgroup(b->cgroup() + "/system.slice/" + kUnit),
              Not(IsEmpty()));

  std::string error;
  ASSERT_TRUE(a->Stop(&error)) << error;  // without stopping the unit first
  EXPECT_EQ(HttpGet(port_a, "/health").status, -1);
  EXPECT_EQ(HttpGet(port_b, "/health").status, 200) << "b lives on after a is gone";
  ASSERT_TRUE(b->Stop(&error)) << error;
  EXPECT_EQ(HttpGet(port_b, "/health").status, -1);
}

TEST(SystemdSandboxTest, ExecRunsInsideAndReportsExitCodeAndOutput) {
  BERTH_REQUIRE_SANDBOX();
  auto sb = StartOrDie("exec", {.base = "", .minimal = true, .dbus = false, .timeout_s = 30});
  ASSERT_TRUE(sb);
  CommandResult r = sb->Exec({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.output, "out\nerr\n");
  EXPECT_EQ(sb->Exec({"cat", "/proc/1/comm"}).output, "systemd\n");
  // Arguments reach the command as they are: no shell in between.
  EXPECT_EQ(sb->Exec({"printf", "%s|", "a b", "$HOME", "`id`", ";"}).output, "a b|$HOME|`id`|;|");
  EXPECT_NE(sb->Exec({"/no/such/binary"}).exit_code, 0);
  // pidns-exec: the sandbox's pid namespace, the host's file system.
  EXPECT_EQ(sb->PidnsExec({"readlink", "/proc/self/ns/pid"}).output, sb->pid_namespace() + "\n");
  CommandResult slow = sb->Exec({"sleep", "30"}, std::chrono::milliseconds(300));
  EXPECT_EQ(slow.exit_code, -1);
  EXPECT_THAT(slow.error, HasSubstr("timed out"));
}

TEST(SystemdSandboxTest, ProcessesThatEscapeTheirUnitDieWithTheSandbox) {
  BERTH_REQUIRE_SANDBOX();
  auto sb = StartOrDie("escape", {.base = "", .minimal = true, .dbus = false, .timeout_s = 30});
  ASSERT_TRUE(sb);
  WriteFile(sb->units_dir() + "/escaper.service",
            "[Service]\nKillMode=process\n"
            "ExecStart=/bin/sh -c \"setsid sleep 1001 & sleep 1002 & exec sleep 1003\"\n");
  ASSERT_TRUE(sb->Exec({"systemctl", "daemon-reload"}).ok());
  ASSERT_TRUE(sb->Exec({"systemctl", "start", "escaper.service"}).ok());
  // A process that entered with nsenter and detached: in the pid namespace, not the cgroup.
  ASSERT_TRUE(sb->Exec({"sh", "-c", "setsid sleep 1004 >/dev/null 2>&1 </dev/null &"}).ok());
  const std::string pidns = sb->pid_namespace();
  std::vector<pid_t> before;
  for (int i = 0; i < 100 && before.size() < 5; ++i) {
    before = SystemdSandbox::ProcessesInPidNamespace(pidns);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(before.size(), 5u) << "systemd + 4 sleeps";
  std::string error;
  ASSERT_TRUE(sb->Stop(&error)) << error;
  EXPECT_THAT(SystemdSandbox::ProcessesInPidNamespace(pidns), IsEmpty());
  for (pid_t p : before)
    EXPECT_FALSE(fs::exists("/proc/" + std::to_string(p) + "/ns/pid") &&
                 fs::read_symlink("/proc/" + std::to_string(p) + "/ns/pid").string() == pidns);
}

TEST(SystemdSandboxTest, RejectsBadNamesWithoutRunningAnything) {
  std::string error;
  for (const std::string& name :
       {std::string("bad name"), std::string("x;rm -rf /"), std::string("../up"), std::string(),
        std::string(33, 'a'), std::string("$(id)")}) {
    EXPECT_EQ(SystemdSandbox::Start(name, &error), nullptr) << name;
    EXPECT_THAT(error, HasSubstr("bad sandbox name")) << name;
  }
  EXPECT_LE(SystemdSandbox::UniqueName(std::string(40, 'p')).size(), 32u);
  EXPECT_THAT(SystemdSandbox::UniqueName("a b/c"), HasSubstr("a-b-c-"));
}

// --multi-user and --keep-units: a reboot over the same unit directory starts what was enabled
// with WantedBy=multi-user.target, and nothing else: no distro or host unit comes with
// multi-user.target (they are masked or invisible).
TEST(SystemdSandboxTest, ARebootOverTheSameUnitsDirStartsOnlyTheEnabledUnits) {
  BERTH_REQUIRE_SANDBOX();
  const std::string name = SystemdSandbox::UniqueName("reboot");
  SystemdSandbox::Options options;
  options.multi_user = true;
  std::string error;
  auto sb = SystemdSandbox::Start(name, options, &error);
  ASSERT_TRUE(sb) << error;
  for (const char* unit : {"at-boot.service", "not-at-boot.service"})
    WriteFile(sb->units_dir() + "/" + unit,
              "[Service]\nType=exec\nExecStart=/bin/sleep 1000\n"
              "[Install]\nWantedBy=multi-user.target\n");
  ASSERT_TRUE(sb->Exec({"systemctl", "enable", "at-boot.service"}).ok());
  EXPECT_EQ(sb->Exec({"systemctl", "is-active", "at-boot.service"}).output, "inactive\n");
  sb->set_keep_artifacts(true);
  ASSERT_TRUE(sb->Stop(&error)) << error;
  sb.reset();

  options.keep_units = true;
  sb = SystemdSandbox::Start(name, options, &error);
  ASSERT_TRUE(sb) << error;
  EXPECT_EQ(sb->Exec({"systemctl", "is-active", "multi-user.target", "at-boot.service",
                      "not-at-boot.service"})
                .output,
            "active\nactive\ninactive\n");
  CommandResult services = sb->Exec(
      {"systemctl", "list-units", "--type=service", "--state=active", "--no-legend", "--plain"});
  std::vector<std::string> active;
  std::istringstream lines(services.output);
  for (std::string line; std::getline(lines, line);)
    active.push_back(line.substr(0, line.find(' ')));
  EXPECT_THAT(active, ::testing::UnorderedElementsAre("at-boot.service", "dbus.service",
                                                      "systemd-journald.service"))
      << services.output;
  ASSERT_TRUE(sb->Stop(&error)) << error;
}

TEST(SystemdSandboxTest, KeepUnitsNeedsTheUnitsOfAStoppedSandboxAndMultiUserNeedsBasic) {
  BERTH_REQUIRE_SANDBOX();
  std::string error;
  SystemdSandbox::Options options;
  options.keep_units = true;
  EXPECT_EQ(SystemdSandbox::Start(SystemdSandbox::UniqueName("nounits"), options, &error), nullptr);
  EXPECT_THAT(error, HasSubstr("no units dir"));
  options = {};
  options.minimal = true;
  options.multi_user = true;
  EXPECT_EQ(SystemdSandbox::Start(SystemdSandbox::UniqueName("minmulti"), options, &error),
            nullptr);
  EXPECT_THAT(error, HasSubstr("not with --minimal"));
}

// How a test process that owns a sandbox ends, and who stops the sandbox then.
enum class OwnerEnd { kExitNoCleanup, kSigterm, kExit };

struct Abandoned {
  std::string base, name, pidns, cgroup;
  int wait_status = 0;
};

// Forks a child that starts a sandbox in `base` and ends as `how` without destroying it. The
// base is the default one: should this test itself be killed, the CTest fixture cleans up.
Abandoned StartInChildAndEnd(const std::string& base, OwnerEnd how) {
  Abandoned out;
  out.base = base;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return out;
  std::fflush(nullptr);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    std::string error;
    auto sb = SystemdSandbox::Start(SystemdSandbox::UniqueName("orphan"),
                                    {.base = base, .minimal = true, .dbus = false}, &error);
    std::string msg = sb ? sb->name() + "\n" + sb->pid_namespace() + "\n" + sb->cgroup() + "\n"
                         : "ERROR " + error;
    ssize_t ignored = write(fds[1], msg.data(), msg.size());
    (void)ignored;
    close(fds[1]);
    sb.release();  // deliberately never destroyed
    if (how == OwnerEnd::kSigterm) raise(SIGTERM);
    if (how == OwnerEnd::kExit) std::exit(0);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(child, &out.wait_status, 0);
  std::istringstream lines(msg);
  std::getline(lines, out.name);
  std::getline(lines, out.pidns);
  std::getline(lines, out.cgroup);
  EXPECT_EQ(msg.rfind("ERROR", 0), std::string::npos) << msg;
  return out;
}

TEST(SystemdSandboxTest, StopAllOrphansStopsAnAbandonedSandboxButNotALiveOwners) {
  BERTH_REQUIRE_SANDBOX();
  const std::string base = SystemdSandbox::DefaultBase();
  Abandoned orphan = StartInChildAndEnd(base, OwnerEnd::kExitNoCleanup);
  ASSERT_FALSE(orphan.pidns.empty());
  EXPECT_THAT(SystemdSandbox::ProcessesInPidNamespace(orphan.pidns), Not(IsEmpty()))
      << "_exit() ran no cleanup: the sandbox is still up";
  auto mine = StartOrDie("owned", {.base = base, .minimal = true, .dbus = false});
  ASSERT_TRUE(mine);

  // What the CTest cleanup fixture runs.
  CommandResult all =
      RunCommand({"/bin/bash", SystemdSandbox::ScriptPath(), "stop-all", "--orphans"},
                 {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SDSB_BASE=" + base});
  EXPECT_TRUE(all.ok()) << all.output;
  EXPECT_THAT(all.output, HasSubstr("stopped " + orphan.name));
  EXPECT_THAT(all.output, HasSubstr("skipping " + mine->name() + ": owner"));
  EXPECT_THAT(SystemdSandbox::ProcessesInPidNamespace(orphan.pidns), IsEmpty());
  EXPECT_FALSE(fs::exists(orphan.cgroup));
  EXPECT_THAT(SystemdSandbox::ProcessesInPidNamespace(mine->pid_namespace()), Not(IsEmpty()));
  std::string error;
  EXPECT_TRUE(mine->Stop(&error)) << error;
  std::error_code ec;
  fs::remove_all(base + "/" + orphan.name, ec);
}

TEST(SystemdSandboxTest, FatalSignalAndExitStopTheOwnersSandboxes) {
  BERTH_REQUIRE_SANDBOX();
  const std::string base = SystemdSandbox::DefaultBase();
  Abandoned killed = StartInChildAndEnd(base, OwnerEnd::kSigterm);
  EXPECT_TRUE(WIFSIGNALED(killed.wait_status) && WTERMSIG(killed.wait_status) == SIGTERM)
      << "the handler re-raises: the owner still dies of SIGTERM";
  Abandoned exited = StartInChildAndEnd(base, OwnerEnd::kExit);
  EXPECT_TRUE(WIFEXITED(exited.wait_status) && WEXITSTATUS(exited.wait_status) == 0);
  for (const Abandoned& a : {killed, exited}) {
    ASSERT_FALSE(a.pidns.empty());
    EXPECT_THAT(SystemdSandbox::ProcessesInPidNamespace(a.pidns), IsEmpty()) << a.name;
    EXPECT_FALSE(fs::exists(a.cgroup)) << a.name;
    EXPECT_FALSE(fs::exists(a.base + "/" + a.name + "/pid")) << a.name;
    std::error_code ec;
    fs::remove_all(a.base + "/" + a.name, ec);
  }
}

}  // namespace
}  // namespace berth::testing
