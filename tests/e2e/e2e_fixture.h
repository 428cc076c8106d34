// End-to-end tests: berth against a real systemd booted in a sandbox, with fake vLLM servers
// (tests/fake_vllm) as the model servers and a Hugging Face cache layout on disk as the store.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/hf_cache.h"
#include "engine/cli/commands.h"
#include "providers/systemd/journal.h"
#include "providers/systemd/sdbus_manager.h"
#include "providers/systemd/unit_files.h"
#include "tests/support/systemd_sandbox.h"

namespace berth::testing {

inline std::string SourceDir() { return BERTH_SOURCE_DIR; }
inline std::string FakeVllm() { return SourceDir() + "/tests/fake_vllm/fake_vllm.py"; }

/// A TCP port nobody listens on right now (the kernel's choice).
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Polls `done` every 20 ms until it holds or `timeout` passes.
template <typename F>
bool WaitFor(F done, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

/// The step number of the plan line "N > VERB ADDRESS ..." in `plan` (0: none).
inline int StepOf(const std::string& plan, const std::string& verb, const std::string& address) {
  std::istringstream lines(plan);
  std::string line;
  while (std::getline(lines, line)) {
    int step = 0;
    char sign = 0;
    std::istringstream l(line);
    std::string v, a;
    if (l >> step >> sign >> v >> a && v == verb && a == address) return step;
  }
  return 0;
}

/// The operator's prober (tests/prober/prober.py) in a process of its own: what a client of a
/// port sees while berth switches what serves it.
class ProberProcess {
 public:
  ProberProcess() = default;
  ProberProcess(const ProberProcess&) = delete;
  ProberProcess& operator=(const ProberProcess&) = delete;
  ~ProberProcess() { Stop(); }

  /// Starts it on `url` with `args` (--interval-ms, --streams ...), its files in `dir`, and waits
  /// (20 s at most) for its first answer; then 300 ms more, so that streams are in flight.
  void Start(const std::filesystem::path& dir, const std::string& url,
             const std::vector<std::string>& args) {
    summary_ = (dir / "prober.json").string();
    stop_file_ = (dir / "prober.stop").string();
    std::string ready = (dir / "prober.ready").string();
    // Files of an earlier run in `dir` would stop this one at once, or answer for it.
    for (const std::string& f : {summary_, stop_file_, ready}) std::filesystem::remove(f);
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     std::string(BERTH_SOURCE_DIR) + "/tests/prober/prober.py",
                                     "--url",
                                     url,
                                     "--max-duration",
                                     "300",
                                     "--stop-file",
                                     stop_file_,
                                     "--ready-file",
                                     ready,
                                     "--out",
                                     summary_};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(ready); }, std::chrono::seconds(20)))
        << "the prober saw no answer on " << url;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  /// Stops it (it finishes what is in flight, 150 s at most) and reads its summary; null when
  /// it was not started.
  nlohmann::json Stop() {
    if (pid_ <= 0) return nlohmann::json();
    std::ofstream(stop_file_) << "stop\n";
    int status = 0;
    if (!WaitFor([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; },
                 std::chrono::seconds(150))) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      ADD_FAILURE() << "the prober did not stop";
    }
    pid_ = 0;
    auto j = nlohmann::json::parse(ReadAll(summary_), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "no prober summary in " << summary_;
    return j;
  }
  bool running() const { return pid_ > 0; }

  /// How many requests of class `cls` (ok, refused, stream_incomplete ...) the summary counts.
  static int Count(const nlohmann::json& s, const char* cls) {
    return s.contains("counts") ? s["counts"].value(cls, -1) : -1;
  }
  /// The port's longest dark stretch in the summary's timeline, in ms: consecutive buckets in
  /// which no request sent succeeded and some were refused or failed.
  static uint64_t DarkMs(const nlohmann::json& s) {
    if (!s.contains("timeline")) return 0;
    uint64_t best = 0, run = 0;
    for (const auto& b : s["timeline"]["buckets"]) {
      bool dark = b[0].get<int>() == 0 && b[1].get<int>() + b[2].get<int>() > 0;
      run = dark ? run + 1 : 0;
      best = std::max(best, run);
    }
    return best * static_cast<uint64_t>(s["timeline"].value("bucket_ms", 100.0));
  }

 private:
  pid_t pid_ = 0;
  std::string summary_, stop_file_;
};

/// One sandbox for a whole suite (booting takes ~0.3 s), torn down at its end.
class SandboxSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    if (!SystemdSandbox::Available(&why)) {
      unavailable_ = why;
      return;
    }
    std::string error;
    sandbox_ = SystemdSandbox::Start(SystemdSandbox::UniqueName("e2e"), &error).release();
    if (!sandbox_) unavailable_ = "sandbox did not boot: " + error;
  }
  static void TearDownTestSuite() {
    delete sandbox_;
    sandbox_ = nullptr;
  }
  void SetUp() override {
    if (!unavailable_.empty()) {
      if (SystemdSandbox::MissingAllowed())
        GTEST_SKIP() << "no systemd sandbox (BERTH_ALLOW_NO_SANDBOX=1): " << unavailable_;
      FAIL() << "no systemd sandbox here: " << unavailable_;
    }
    journal_ = std::make_unique<SdJournalReader>(sandbox_->journal_dir());
    SdBusOptions opts;
    opts.address = sandbox_->system_bus_address();
    opts.journal = journal_.get();
    auto mgr = ConnectSystemd(opts);
    ASSERT_TRUE(mgr.ok()) << mgr.status().message();
    systemd_ = std::move(mgr).value();
    files_ = std::make_unique<UnitFileStore>(sandbox_->units_dir());
    tmp_ = std::filesystem::temp_directory_path() /
           ("berth-e2e-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(tmp_);
  }
  void TearDown() override {
    if (systemd_) {
      // Leave the sandbox clean for the next test: stop and remove the units this test wrote,
      // sockets first (an on-demand service's), so that none starts a service while they stop.
      for (const char* kind : {".socket", ".service"})
        for (const auto& e : std::filesystem::directory_iterator(sandbox_->units_dir())) {
          std::string name = e.path().filename().string();
          if (!name.ends_with(kind) || e.is_symlink()) continue;
          (void)systemd_->Stop(name, std::chrono::seconds(20));
          std::filesystem::remove(e.path());
        }
      // And the boot symlinks of the units it enabled.
      std::error_code ec;
      std::filesystem::remove_all(sandbox_->units_dir() + "/multi-user.target.wants", ec);
      std::filesystem::remove_all(sandbox_->units_dir() + "/sockets.target.wants", ec);
      (void)systemd_->Reload();
    }
    std::error_code ec;
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_, ec);
  }

  /// A model folder that fake_vllm accepts, in the Hugging Face cache layout under `store`:
  /// models--org--name/snapshots/<commit>/ with refs/main.
  std::string MakeModel(const std::string& store, const std::string& repo,
                        const std::string& commit) {
    HfCachePaths paths(store, repo);
    std::string snap = paths.SnapshotDir(commit);
    CommandResult r =
        RunCommand({"/usr/bin/python3", SourceDir() + "/tests/fake_vllm/make_model.py", snap});
    EXPECT_TRUE(r.ok()) << r.output << r.error;
    std::filesystem::create_directories(paths.RefsDir());
    std::ofstream(paths.RefPath("main")) << commit;
    return snap;
  }

  /// `berth apply -f MANIFEST --yes` on the sandbox's systemd, as a process of its own (for
  /// kill -9 and lock tests): `berth` is BERTH_BIN, or BERTH_FAULTY_BIN, the build with the fault
  /// seam ($BERTH_FAULT_KILL_AT_STEP=N in `env`: kill -9 as step N begins); `more` are further
  /// arguments (--state-dir ...). Its output goes to ProcessLog().
  pid_t ApplyProcess(const char* berth, const std::string& manifest,
                     const std::vector<std::string>& env, const std::vector<std::string>& more) {
    std::vector<std::string> args = {berth,
                                     "apply",
                                     "-f",
                                     manifest,
                                     "--yes",
                                     "--bus",
                                     sandbox_->system_bus_address(),
                                     "--journal-dir",
                                     sandbox_->journal_dir()};
    args.insert(args.end(), more.begin(), more.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string log = ProcessLog();
    pid_t pid = ::fork();
    if (pid == 0) {
      for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(berth, argv.data());
      ::_exit(127);
    }
    return pid;
  }
  /// `berth apply --yes` in this process on the sandbox's systemd, the state in tmp_/state;
  /// `nvml`: the NVML library berth loads ("": its default). Its output in `out` and `err`.
  int ApplyIn(const std::string& manifest, std::ostringstream& out, std::ostringstream& err,
              const std::string& nvml = "") {
    ApplyCommand cmd;
    cmd.manifest_path = manifest;
    cmd.yes = true;
    cmd.host.bus_address = sandbox_->system_bus_address();
    cmd.host.journal_dir = sandbox_->journal_dir();
    cmd.state_dir = (tmp_ / "state").string();
    if (!nvml.empty()) cmd.host.nvml_library = nvml;
    out.str("");
    err.str("");
    std::istringstream in;
    return RunApply(cmd, in, out, err);
  }
  /// systemd's ActiveState of `unit` now ("(unknown)" when it cannot be asked).
  std::string ActiveState(const std::string& unit) {
    auto units = systemd_->GetUnits({unit});
    return units.ok() && !units->empty() ? (*units)[0].active_state : "(unknown)";
  }
  /// Where the output of every ApplyProcess goes (printed when a wait for one fails).
  std::string ProcessLog() const { return (tmp_ / "apply-processes.log").string(); }
  /// waitpid with a deadline: a berth that does not end in time is killed and the test fails
  /// with its output, instead of hanging until CTest's timeout says nothing. -1 then.
  int Wait(pid_t pid, std::chrono::seconds deadline = std::chrono::seconds(60)) {
    int status = 0;
    if (WaitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, deadline)) return status;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "berth apply (pid " << pid << ") did not end within " << deadline.count()
                  << " s; its output:\n"
                  << ReadAll(ProcessLog());
    return -1;
  }

  static SystemdSandbox* sandbox_;
  static std::string unavailable_;
  std::unique_ptr<SdJournalReader> journal_;
  std::unique_ptr<SystemdManager> systemd_;
  std::unique_ptr<UnitFileStore> files_;
  std::filesystem::path tmp_;
};

inline SystemdSandbox* SandboxSuite::sandbox_ = nullptr;
inline std::string SandboxSuite::unavailable_;

}  // namespace berth::testing
