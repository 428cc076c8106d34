// GPU observation end to end: the fake libnvidia-ml (loaded by the real dlopen path) reports a
// process of a unit in the sandboxed systemd, and a process outside any unit; berth observes,
// attributes, and plans around them.
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/wait.h>

#include "core/observed_json.h"
#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kGiB = 1ull << 30;

class GpuPlanTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    MakeModel(store_, "org/m", std::string(40, 'a'));
    config_ = (tmp_ / "nvml.conf").string();
    ::setenv("FAKE_NVML_CONFIG", config_.c_str(), 1);
    port_old_ = FreePort();
    port_new_ = FreePort();
    while (port_new_ == port_old_) port_new_ = FreePort();
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_CONFIG");
    SandboxSuite::TearDown();
  }
  std::string Manifest(const std::string& old_state, const std::string& new_state) {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n  m: {source: hf://org/m, revision: " << std::string(40, 'a') << "}\n"
      << "services:\n"
      << "  old:\n    model: m\n    engine: vllm\n    gpus: [0]\n    port: " << port_old_
      << "\n    bind: 127.0.0.1\n    state: " << old_state
      << "\n    vllm: {gpu_memory_utilization: 0.85}\n    health: {timeout: 30s, interval: 100ms}\n"
      << "  new:\n    model: m\n    engine: vllm\n    gpus: [0]\n    port: " << port_new_
      << "\n    bind: 127.0.0.1\n    state: " << new_state
      << "\n    vllm: {gpu_memory_utilization: 0.9}\n    health: {timeout: 30s, interval: 100ms}\n";
    std::string path = (tmp_ / "berth.yaml").string();
    std::ofstream(path) << m.str();
    return path;
  }
  HostAccess Access() {
    HostAccess a;
    a.bus_address = sandbox_->system_bus_address();
    a.journal_dir = sandbox_->journal_dir();
    a.nvml_library = FAKE_NVML_FULL;
    return a;
  }
  /// One 80 GiB GPU; `pid` holds `bytes` on it.
  void Nvml(int pid, uint64_t bytes) {
    std::ofstream(config_) << "device 0 GPU-e2e-0 " << 80 * kGiB << " " << bytes
                           << " 0 NVIDIA H100\n"
                           << "process 0 " << pid << " " << bytes << "\n";
  }
  int HostPidOf(const std::string& unit) {
    std::ifstream procs(sandbox_->cgroup() + "/system.slice/" + unit + "/cgroup.procs");
    int pid = 0;
    procs >> pid;
    return pid;
  }
  int Plan(const std::string& manifest) {
    PlanCommand cmd;
    cmd.manifest_path = manifest;
    cmd.host = Access();
    cmd.state_dir = (tmp_ / "state").string();
    cmd.detailed_exitcode = true;
    out_.str("");
    err_.str("");
    return RunPlan(cmd, out_, err_);
  }

  std::string store_, config_;
  int port_old_ = 0, port_new_ = 0;
  std::ostringstream out_, err_;
};

TEST_F(GpuPlanTest, AUnitHoldingTheGpuIsStoppedJustBeforeTheServiceThatNeedsIt) {
  Nvml(0, 0);
  ApplyCommand apply;
  apply.manifest_path = Manifest("running", "absent");
  apply.yes = true;
  apply.host = Access();
  apply.state_dir = (tmp_ / "state").string();
  std::istringstream in;
  ASSERT_EQ(RunApply(apply, in, out_, err_), kExitOk) << out_.str() << err_.str();
  int pid = HostPidOf("old.service");
  ASSERT_GT(pid, 0);
  Nvml(pid, 68 * kGiB);

  // What berth sees: the memory is old.service's.
  std::ostringstream json, err;
  ASSERT_EQ(RunObserve(Manifest("running", "absent"), "json", Access(), json, err), kExitOk)
      << err.str();
  auto observed = ObservedFromJson(json.str(), "observe");
  ASSERT_TRUE(observed.ok()) << observed.status().message();
  ASSERT_EQ(observed->gpus.size(), 1u);
  ASSERT_EQ(observed->gpus[0].processes.size(), 1u);
  EXPECT_EQ(observed->gpus[0].processes[0].unit, "old.service");
  EXPECT_EQ(observed->gpus[0].processes[0].used_bytes, 68 * kGiB);

  // new needs 0.9 × 80 GiB: only stopping old makes room, and only just before new starts.
  ASSERT_EQ(Plan(Manifest("stopped", "running")), kExitChanges) << out_.str() << err_.str();
  std::string plan = out_.str();
  size_t stop = plan.find("- stop          service/old");
  size_t start = plan.find("+ start         service/new");
  ASSERT_NE(stop, std::string::npos) << plan;
  ASSERT_NE(start, std::string::npos) << plan;
  EXPECT_LT(stop, start);
  EXPECT_LT(plan.find("+ write-unit    unit/new.service"), stop) << plan;
  // new serves another port: old's port is not freed for it, it goes dark.
  EXPECT_THAT(plan, HasSubstr("frees 1 × 68.0 GiB on GPU 0 for new; port " +
                              std::to_string(port_old_) + " goes dark with it (state: stopped)"));
  EXPECT_THAT(plan, HasSubstr("disruption: port " + std::to_string(port_old_) +
                              " unavailable from step 3 on (nothing serves it after this plan) "
                              "(old.service stopped (state: stopped) to make room for new, which "
                              "serves port " +
                              std::to_string(port_new_) + ")"));
}

TEST_F(GpuPlanTest, AProcessOutsideAnyUnitBlocksThePlanByPidAndMemory) {
  // A process in a cgroup of its own, outside any unit, as a notebook or a stray python would be.
  std::string cg = std::filesystem::path(sandbox_->cgroup()).parent_path().string() +
                   "/berth-e2e-stray-" + std::to_string(::getpid());
  std::filesystem::create_directories(cg);
  pid_t stray = ::fork();
  if (stray == 0) {
    ::execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::ofstream(cg + "/cgroup.procs") << stray;
  Nvml(stray, 40 * kGiB);
  int rc = Plan(Manifest("stopped", "running"));
  ::kill(stray, SIGKILL);
  ::waitpid(stray, nullptr, 0);
  std::filesystem::remove(cg);
  EXPECT_EQ(rc, kExitBlocked) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("pid " + std::to_string(stray) + " (sleep) holds 40.0 GiB"));
  EXPECT_THAT(out_.str(), HasSubstr("needs 72.0 GiB on GPU 0"));
  EXPECT_THAT(out_.str(), HasSubstr("BLOCKED"));
}

TEST_F(GpuPlanTest, WithoutADriverThePlanSaysTheGpuCheckWasSkipped) {
  PlanCommand cmd;
  cmd.manifest_path = Manifest("stopped", "running");
  cmd.host = Access();
  cmd.host.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", "/usr/bin:/bin", 1);  // no nvidia-smi either
  std::ostringstream out, err;
  EXPECT_EQ(RunPlan(cmd, out, err), kExitOk) << err.str();
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_THAT(out.str(), HasSubstr("GPU memory checks skipped: no NVIDIA driver"));
}

}  // namespace
}  // namespace berth::testing
