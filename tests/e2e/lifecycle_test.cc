// The seed scenario of DESIGN.md end to end, against the sandboxed systemd, the fake Hub, fake
// vLLM servers and a fake libnvidia-ml whose GPU memory follows which units run: Kimi to
// MiniMax on full GPUs, back to Kimi, then a start-first switch; kill -9 at every step; two
// applies at once; a stale saved plan; a failing replacement rolled back.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "providers/hub/hub_api.h"
#include "providers/hub/pull.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/hub/fake_hub_server.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kGiB = 1ull << 30;
const std::string kKimiCommit(40, 'c');

class LifecycleTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    state_ = (tmp_ / "state").string();
    nvml_ = (tmp_ / "nvml.conf").string();
    ::setenv("FAKE_NVML_CONFIG", nvml_.c_str(), 1);
    // The Hub serves MiniMax: a model fake vLLM can load, in a repo of its own.
    hub_ = std::make_unique<FakeHubServer>();
    std::string error;
    ASSERT_TRUE(hub_->Start((tmp_ / "hub").string(), 1 << 20, {}, &error)) << error;
    std::string repo = (tmp_ / "hub" / "repos" / "MiniMaxAI" / "MiniMax-M2.5" / "main").string();
    CommandResult r =
        RunCommand({"/usr/bin/python3", SourceDir() + "/tests/fake_vllm/make_model.py", repo,
                    "--shards", "2"});
    ASSERT_TRUE(r.ok()) << r.output;
    hub_->Control("POST", "/_fake/reload");
    ::setenv("HF_ENDPOINT", hub_->api().c_str(), 1);
    // Kimi: weights in the store, a unit written by hand, running on port 8xxx.
    MakeModel(store_, "nvidia/Kimi-K2.5-NVFP4", kKimiCommit);
    port_ = FreePort();
    std::ofstream(sandbox_->units_dir() + "/vllm-kimi-k25.service")
        << "[Unit]\nDescription=Kimi, written by hand\n[Service]\nType=exec\nTimeoutStopSec=10s\n"
           "ExecStart="
        << FakeVllm() << " serve " << store_ << "/models--nvidia--Kimi-K2.5-NVFP4/snapshots/"
        << kKimiCommit << " --served-model-name kimi --host 127.0.0.1 --port " << port_ << "\n";
    ASSERT_TRUE(systemd_->Reload().ok());
    ASSERT_TRUE(systemd_->Start("vllm-kimi-k25.service", std::chrono::seconds(20)).ok());
    ASSERT_TRUE(WaitFor([&] { return Healthy(port_); }));
    SyncGpus();
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_CONFIG");
    ::unsetenv("HF_ENDPOINT");
    hub_.reset();
    SandboxSuite::TearDown();
  }

  /// One 80 GiB GPU whose memory is held by whichever of these units run: what NVML would say.
  void SyncGpus() {
    std::map<std::string, uint64_t> claims = {{kimi_ + ".service", kimi_claim_},
                                              {"vllm-minimax-m25.service", minimax_claim_}};
    std::ostringstream procs;
    uint64_t used = 0;
    for (const auto& [unit, bytes] : claims) {
      std::ifstream p(sandbox_->cgroup() + "/system.slice/" + unit + "/cgroup.procs");
      int pid = 0;
      if (p >> pid && pid > 0) {
        procs << "process 0 " << pid << " " << bytes << "\n";
        used += bytes;
      }
    }
    std::ofstream(nvml_) << "device 0 GPU-seed-0 " << 80 * kGiB << " " << used
                         << " 0 NVIDIA RTX PRO 6000\n"
                         << procs.str();
  }

  std::string Manifest(const std::string& kimi_state, const std::string& minimax_state,
                       double gmu = 0.9, int minimax_port = 0, const std::string& extra = "") {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_
      << "\n  reserve: 1MiB\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n"
      << "  kimi-k25-nvfp4: {source: hf://nvidia/Kimi-K2.5-NVFP4, revision: " << kKimiCommit
      << ", keep: true}\n"
      << "  minimax-m25:\n    source: hf://MiniMaxAI/MiniMax-M2.5\n"
      << "    include: [\"*.safetensors\", \"*.json\"]\n"
      << "services:\n  " << kimi_ << ": {state: " << kimi_state << "}\n"
      << "  vllm-minimax-m25:\n    model: minimax-m25\n    engine: vllm\n    gpus: [0]\n"
      << "    port: " << (minimax_port ? minimax_port : port_) << "\n    bind: 127.0.0.1\n"
      << "    state: " << minimax_state << "\n"
      << "    vllm: {gpu_memory_utilization: " << gmu << ", served_model_name: MiniMax-M2.5}\n"
      << "    health: {timeout: 20s, interval: 100ms}\n"
      << "    env_file: " << EngineEnvFile() << "\n"
      << extra;
    // One file per manifest: a path handed out earlier keeps its content.
    std::string path = (tmp_ / ("berth-" + std::to_string(++manifests_) + ".yaml")).string();
    std::ofstream(path) << m.str();
    return path;
  }
  // The fake vllm package on the unit's PYTHONPATH, for berth's engine check of each start (as a
  // virtualenv's vllm has vLLM beside it).
  std::string EngineEnvFile() {
    std::string path = (tmp_ / "engine.env").string();
    std::ofstream(path) << "PYTHONPATH=" << SourceDir() << "/tests/fake_vllm/pkg\n";
    return path;
  }
  HostAccess Access() {
    HostAccess a;
    a.bus_address = sandbox_->system_bus_address();
    a.journal_dir = sandbox_->journal_dir();
    a.nvml_library = FAKE_NVML_FULL;
    return a;
  }
  int Plan(const std::string& manifest, const std::string& out_path = "") {
    PlanCommand cmd;
    cmd.manifest_path = manifest;
    cmd.host = Access();
    cmd.state_dir = state_;
    cmd.detailed_exitcode = true;
    cmd.out_path = out_path;
    out_.str("");
    err_.str("");
    return RunPlan(cmd, out_, err_);
  }
  int Apply(const std::string& manifest, const std::string& saved = "") {
    ApplyCommand cmd;
    cmd.manifest_path = saved.empty() ? manifest : "";
    cmd.saved_plan = saved;
    cmd.yes = true;
    cmd.host = Access();
    cmd.state_dir = state_;
    out_.str("");
    err_.str("");
    std::istringstream in;
    int rc = RunApply(cmd, in, out_, err_);
    SyncGpus();
    return rc;
  }
  /// `berth apply` as a process (for kill -9 and lock tests; SandboxSuite::ApplyProcess).
  pid_t ApplyProcess(const std::string& manifest, const std::vector<std::string>& env,
                     const char* berth = BERTH_BIN) {
    return SandboxSuite::ApplyProcess(berth, manifest, env,
                                      {"--nvml-library", FAKE_NVML_FULL, "--state-dir", state_});
  }
  /// GET /health over a plain socket: 200 or not (cheap enough to probe in a tight loop).
  static bool Healthy(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const char req[] = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (::send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof req - 1)) {
        char buf[64] = {};
        ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
        ok = n > 12 && std::string(buf, static_cast<size_t>(n)).find(" 200 ") != std::string::npos;
      }
    }
    ::close(fd);
    return ok;
  }
  std::string ActiveState(const std::string& unit) {
    auto p = systemd_->GetUnits({unit});
    return p.ok() ? (*p)[0].active_state : "?";
  }
  void ExpectMinimaxVerified() {
    HubOptions h = HubOptionsFromEnvironment();
    HubHttp http(h);
    auto snap = ResolveSnapshot(http, "MiniMaxAI/MiniMax-M2.5", "main");
    ASSERT_TRUE(snap.ok()) << snap.status().message();
    auto report = VerifySnapshot(store_, *snap, snap->files);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->corrupt.empty()) << ::testing::PrintToString(report->corrupt);
    EXPECT_TRUE(report->missing.empty()) << ::testing::PrintToString(report->missing);
  }

  std::unique_ptr<FakeHubServer> hub_;
  std::string store_, state_, nvml_;
  int port_ = 0;
  int manifests_ = 0;
  std::string kimi_ = "vllm-kimi-k25";  // the hand-written, state-only service
  uint64_t kimi_claim_ = 70 * kGiB, minimax_claim_ = 72 * kGiB;
  std::ostringstream out_, err_;
};

TEST_F(LifecycleTest, KimiToMinimaxOnFullGpusThenBackThenStartFirst) {
  std::string m = Manifest("stopped", "running");
  ASSERT_EQ(Plan(m), kExitChanges) << out_.str() << err_.str();
  std::string plan = out_.str();
  size_t download = plan.find("+ download      model/minimax-m25");
  size_t stop = plan.find("- stop          service/vllm-kimi-k25");
  size_t start = plan.find("+ start         service/vllm-minimax-m25");
  ASSERT_NE(download, std::string::npos) << plan;
  ASSERT_NE(stop, std::string::npos) << plan;
  EXPECT_LT(download, stop) << "the download happens before Kimi stops";
  EXPECT_LT(stop, start);
  EXPECT_THAT(plan, HasSubstr("= keep          model/kimi-k25-nvfp4"));
  EXPECT_THAT(plan, HasSubstr("disruption: port " + std::to_string(port_)));

  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_EQ(ActiveState("vllm-kimi-k25.service"), "inactive");
  EXPECT_EQ(ActiveState("vllm-minimax-m25.service"), "active");
  EXPECT_TRUE(Healthy(port_));
  EXPECT_TRUE(std::filesystem::exists(store_ + "/models--nvidia--Kimi-K2.5-NVFP4/snapshots/" +
                                      kKimiCommit + "/config.json"))
      << "Kimi's weights stay (keep: true)";
  ExpectMinimaxVerified();
  ASSERT_EQ(Plan(m), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No changes"));

  // Back to Kimi: MiniMax stops to make room, Kimi starts again.
  m = Manifest("running", "stopped");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("- stop          service/vllm-minimax-m25"));
  // The apply before recorded MiniMax's start: a rollback would take about that long again.
  EXPECT_THAT(out_.str(), HasSubstr("then vllm-minimax-m25.service's start, "));
  EXPECT_THAT(out_.str(), HasSubstr(" at the slowest recorded, if berth rolls back)"));
  EXPECT_EQ(ActiveState("vllm-kimi-k25.service"), "active");
  EXPECT_EQ(ActiveState("vllm-minimax-m25.service"), "inactive");
  ASSERT_TRUE(WaitFor([&] { return Healthy(port_); }));
  ASSERT_EQ(Plan(m), kExitOk) << out_.str();

  // The GPU has room for both: MiniMax starts on another port first, Kimi stops only once it
  // serves. Someone probing both ports never finds neither answering.
  kimi_claim_ = 30 * kGiB;
  minimax_claim_ = 36 * kGiB;
  SyncGpus();
  int port2 = FreePort();
  m = Manifest("stopped", "running", 0.45, port2);
  ASSERT_EQ(Plan(m), kExitChanges);
  plan = out_.str();
  ASSERT_LT(plan.find("> wait-healthy  service/vllm-minimax-m25"),
            plan.find("- stop          service/vllm-kimi-k25"))
      << plan;
  std::atomic<bool> done{false};
  std::atomic<int> dark{0}, probes{0};
  std::thread prober([&] {
    while (!done) {
      if (!Healthy(port_) && !Healthy(port2)) ++dark;
      ++probes;
    }
  });
  int rc = Apply(m);
  done = true;
  prober.join();
  ASSERT_EQ(rc, kExitOk) << out_.str() << err_.str();
  EXPECT_GT(probes.load(), 10);
  EXPECT_EQ(dark.load(), 0) << "a moment with neither Kimi nor MiniMax serving";
  EXPECT_TRUE(Healthy(port2));
}

// Back through a state-only service: berth never wrote Kimi's unit, but it saw Kimi's port and
// GPU memory while Kimi ran and remembers them. The switch back stops MiniMax (which holds both)
// before Kimi starts, and the apply returns only once Kimi answers /health.
TEST_F(LifecycleTest, BackToAStateOnlyServiceStopsTheHolderFirstAndWaitsUntilItServes) {
  // Kimi under a name no other sandbox uses: listening ports are attributed to units by name
  // host-wide, and LifecycleTests in parallel sandboxes each run a vllm-kimi-k25. It loads for
  // a second before it listens, as a real server loads weights: an apply that did not wait for
  // its health would return before it serves.
  ASSERT_TRUE(systemd_->Stop("vllm-kimi-k25.service", std::chrono::seconds(20)).ok());
  std::string text = ReadAll(sandbox_->units_dir() + "/vllm-kimi-k25.service");
  std::filesystem::remove(sandbox_->units_dir() + "/vllm-kimi-k25.service");
  text.replace(text.find("Type=exec\n"), 10, "Type=exec\nEnvironment=FAKE_VLLM_STARTUP_DELAY=1\n");
  kimi_ = "kimi-solo-" + std::to_string(::getpid());
  const std::string unit = kimi_ + ".service";
  std::ofstream(sandbox_->units_dir() + "/" + unit) << text;
  ASSERT_TRUE(systemd_->Reload().ok());
  ASSERT_TRUE(systemd_->Start(unit, std::chrono::seconds(20)).ok());
  ASSERT_TRUE(WaitFor([&] { return Healthy(port_); }));
  SyncGpus();

  ASSERT_EQ(Apply(Manifest("stopped", "running")), kExitOk) << out_.str() << err_.str();
  auto state = nlohmann::json::parse(ReadAll(state_ + "/state.json"));
  ASSERT_TRUE(state.contains("learned")) << state.dump(2);
  EXPECT_EQ(state["learned"][unit]["ports"], nlohmann::json::array({port_}));
  EXPECT_EQ(state["learned"][unit]["gpu_bytes"]["0"], kimi_claim_);

  std::string m = Manifest("running", "stopped");
  ASSERT_EQ(Plan(m), kExitChanges) << out_.str() << err_.str();
  const std::string plan = out_.str();
  int stop = StepOf(plan, "stop", "service/vllm-minimax-m25");
  int start = StepOf(plan, "start", "service/" + kimi_);
  int gate = StepOf(plan, "wait-healthy", "service/" + kimi_);
  ASSERT_GT(stop, 0) << plan;
  EXPECT_EQ(start, stop + 1) << plan;
  EXPECT_EQ(gate, start + 1) << plan;
  EXPECT_THAT(plan, HasSubstr("GET /health until 200 (timeout 30m)"));
  EXPECT_THAT(
      plan,
      HasSubstr("disruption: port " + std::to_string(port_) + " unavailable from step " +
                std::to_string(stop) + " until step " + std::to_string(gate) +
                " is healthy (vllm-minimax-m25.service stopped to make room for " + kimi_ + ")"));
  // Nothing about Kimi is unknown (MiniMax follows the Hub's main here, which is warned about).
  EXPECT_THAT(plan, Not(HasSubstr("warning: service/" + kimi_))) << plan;
  EXPECT_THAT(plan, Not(HasSubstr("unknown"))) << plan;

  // A prober on its own bus connection watches both units while the apply runs.
  SdBusOptions opts;
  opts.address = sandbox_->system_bus_address();
  auto watcher = ConnectSystemd(opts);
  ASSERT_TRUE(watcher.ok()) << watcher.status().message();
  std::atomic<bool> done{false};
  std::atomic<int> overlap{0}, samples{0}, kimi_seen_up{0};
  std::thread prober([&] {
    auto up = [](const std::string& s) { return s == "active" || s == "activating"; };
    while (!done) {
      auto units = (*watcher)->GetUnits({unit, "vllm-minimax-m25.service"});
      if (!units.ok()) continue;
      bool kimi = up((*units)[0].active_state);
      bool minimax = up((*units)[1].active_state) || (*units)[1].active_state == "deactivating";
      if (kimi && minimax) ++overlap;
      if (kimi) ++kimi_seen_up;
      ++samples;
    }
  });
  int rc = Apply(m);
  bool serving_when_apply_returned = Healthy(port_);
  done = true;
  prober.join();
  ASSERT_EQ(rc, kExitOk) << out_.str() << err_.str();
  EXPECT_TRUE(serving_when_apply_returned) << "the apply returned before Kimi answered /health";
  EXPECT_GT(samples.load(), 10);
  EXPECT_GT(kimi_seen_up.load(), 0) << "the prober saw Kimi come up";
  EXPECT_EQ(overlap.load(), 0) << "Kimi was started while MiniMax still ran on its port and GPU";
  EXPECT_EQ(ActiveState(unit), "active");
  EXPECT_EQ(ActiveState("vllm-minimax-m25.service"), "inactive");
  ASSERT_EQ(Plan(m), kExitOk) << out_.str();
}

TEST_F(LifecycleTest, KillNineAtEveryStepThenARerunConverges) {
  std::string m = Manifest("stopped", "running");
  ASSERT_EQ(Plan(m), kExitChanges);
  int steps = 0;
  std::string text = out_.str();
  for (const char* line = text.c_str(); *line; ++line)
    if (line[0] == '\n' && line[1] == ' ' && std::isdigit(static_cast<unsigned char>(line[3])))
      ++steps;
  ASSERT_GE(steps, 5) << out_.str();
  // The steps of MiniMax's health gate and enable, as this plan numbers them (a prewarm of
  // its weights comes before the stop where the host's memory holds them).
  auto step_of = [&](const std::string& what) {
    size_t at = text.find(what);
    if (at == std::string::npos) return 0;
    size_t line = text.rfind('\n', at) + 1;
    return std::atoi(text.c_str() + line);
  };
  const int gate_step = step_of("> wait-healthy  service/vllm-minimax-m25");
  const int enable_step = step_of("+ enable        unit/vllm-minimax-m25.service");
  ASSERT_GT(gate_step, 0) << text;
  ASSERT_EQ(enable_step, gate_step + 1) << text;
  for (int k = 1; k <= steps; ++k) {
    SCOPED_TRACE("killed before step " + std::to_string(k));
    // Back to the seed world: Kimi serving, MiniMax absent.
    ASSERT_EQ(Apply(Manifest("running", "absent")), kExitOk) << out_.str() << err_.str();
    std::filesystem::remove_all(store_ + "/models--MiniMaxAI--MiniMax-M2.5");
    SyncGpus();
    pid_t pid =
        ApplyProcess(m, {"BERTH_FAULT_KILL_AT_STEP=" + std::to_string(k)}, BERTH_FAULTY_BIN);
    int status = Wait(pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    SyncGpus();
    ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
    EXPECT_THAT(out_.str(), HasSubstr("this run looks at the host afresh"))
        << "the journal told of the kill";
    if (k == gate_step) {  // before the health gate: the rerun runs it
      EXPECT_THAT(out_.str(), HasSubstr("never saw it healthy"));
    }
    if (k == enable_step) {  // before the enable: the rerun enables it
      EXPECT_THAT(out_.str(), HasSubstr("+ enable        unit/vllm-minimax-m25.service"));
    }
    auto props = systemd_->GetUnits({"vllm-minimax-m25.service"});
    ASSERT_TRUE(props.ok());
    EXPECT_EQ((*props)[0].unit_file_state, "enabled") << "a reboot brings MiniMax back";
    EXPECT_EQ(ActiveState("vllm-minimax-m25.service"), "active");
    EXPECT_EQ(ActiveState("vllm-kimi-k25.service"), "inactive");
    EXPECT_TRUE(Healthy(port_));
    ExpectMinimaxVerified();
    ASSERT_EQ(Plan(m), kExitOk) << out_.str();
  }
}

TEST_F(LifecycleTest, TwoAppliesAtOnceOneWaitsOrIsToldWhoHoldsTheLock) {
  hub_->Fault(R"({"kind": "slow", "bytes_per_s": 3000, "port": "cdn"})");
  std::string m = Manifest("stopped", "running");
  pid_t first = ApplyProcess(m, {});
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(state_ + "/journal.json"); }));
  ApplyCommand cmd;
  cmd.manifest_path = m;
  cmd.yes = true;
  cmd.host = Access();
  cmd.state_dir = state_;
  std::istringstream in;
  std::ostringstream out, err;
  EXPECT_EQ(RunApply(cmd, in, out, err), kExitError);
  EXPECT_THAT(err.str(), HasSubstr("another berth holds"));
  EXPECT_THAT(err.str(), HasSubstr("pid " + std::to_string(first)));
  EXPECT_THAT(err.str(), HasSubstr("--lock-timeout"));
  hub_->Control("DELETE", "/_fake/faults");
  cmd.lock_timeout_s = 60;  // now it waits its turn, then finds nothing left to do
  out.str("");
  err.str("");
  EXPECT_EQ(RunApply(cmd, in, out, err), kExitOk) << out.str() << err.str();
  int status = Wait(first);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  SyncGpus();
}

TEST_F(LifecycleTest, ASavedPlanMadeStaleByAHandChangeIsRefused) {
  std::string m = Manifest("stopped", "running");
  std::string saved = (tmp_ / "plan.json").string();
  ASSERT_EQ(Plan(m, saved), kExitChanges) << err_.str();
  // By hand, someone stops Kimi: the plan was made for a host where Kimi ran.
  ASSERT_TRUE(systemd_->Stop("vllm-kimi-k25.service", std::chrono::seconds(20)).ok());
  SyncGpus();
  EXPECT_EQ(Apply(m, saved), kExitStale) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("unit/vllm-kimi-k25.service changed since"));
  EXPECT_THAT(err_.str(), HasSubstr("Nothing was changed"));
  EXPECT_FALSE(std::filesystem::exists(store_ + "/models--MiniMaxAI--MiniMax-M2.5"));
  // A fresh plan of the same manifest goes through, exactly as saved.
  ASSERT_EQ(Plan(m, saved), kExitChanges);
  ASSERT_EQ(Apply(m, saved), kExitOk) << out_.str() << err_.str();
  EXPECT_EQ(ActiveState("vllm-minimax-m25.service"), "active");
  // Its serial moved on: the same file cannot run twice.
  EXPECT_EQ(Apply(m, saved), kExitStale);
  EXPECT_THAT(err_.str(), HasSubstr("state serial"));
}

TEST_F(LifecycleTest, AReplacementThatNeverBecomesHealthyIsRolledBack) {
  std::string m =
      Manifest("stopped", "running", 0.9, 0, "    env: {FAKE_VLLM_FAIL_HEALTH: \"1\"}\n");
  std::string text = ReadAll(m);
  text.replace(text.find("timeout: 20s"), 12, "timeout: 2s");
  std::ofstream(m) << text;
  EXPECT_EQ(Apply(m), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("did not become healthy within 2s"));
  EXPECT_THAT(err_.str(), HasSubstr("rolled back"));
  EXPECT_THAT(err_.str(), HasSubstr("start vllm-kimi-k25.service again"));
  EXPECT_EQ(ActiveState("vllm-kimi-k25.service"), "active");
  EXPECT_EQ(ActiveState("vllm-minimax-m25.service"), "inactive");
  // berth returned only once Kimi served again (the port it learned while Kimi ran).
  EXPECT_TRUE(Healthy(port_)) << "Kimi serves the moment the apply returns";
  EXPECT_THAT(err_.str(), HasSubstr("vllm-kimi-k25.service is healthy again; port " +
                                    std::to_string(port_) + " was dark for"));
  // The next plan says what failed.
  Plan(m);
  EXPECT_THAT(out_.str(), HasSubstr("last apply failed on service/vllm-minimax-m25"));
  EXPECT_THAT(out_.str(), HasSubstr("this manifest's change is held"));

  // Reconcile passes (the loop's, or a cron'd apply) do not take Kimi down again: one outage.
  auto kimi = systemd_->GetUnits({"vllm-kimi-k25.service"});
  ASSERT_TRUE(kimi.ok());
  const std::string invocation = (*kimi)[0].invocation_id;
  for (int pass = 0; pass < 3; ++pass) {
    ReconcileCommand cmd;
    cmd.manifest_path = m;
    cmd.once = true;
    cmd.host = Access();
    cmd.state_dir = state_;
    out_.str("");
    err_.str("");
    EXPECT_EQ(RunReconcile(cmd, out_, err_), kExitBlocked) << out_.str() << err_.str();
    EXPECT_THAT(out_.str() + err_.str(), HasSubstr("not trying this change again"));
  }
  EXPECT_EQ(Apply(m), kExitBlocked) << out_.str() << err_.str();
  kimi = systemd_->GetUnits({"vllm-kimi-k25.service"});
  ASSERT_TRUE(kimi.ok());
  EXPECT_EQ((*kimi)[0].invocation_id, invocation) << "Kimi was never stopped again";
  EXPECT_EQ(ActiveState("vllm-minimax-m25.service"), "inactive");
  EXPECT_TRUE(Healthy(port_));
}

}  // namespace
}  // namespace berth::testing

namespace berth::testing {
namespace {

TEST_F(LifecycleTest, SigtermStopsTheApplyCleanlyAndTheNextRunFinishes) {
  hub_->Fault(R"({"kind": "slow", "bytes_per_s": 3000, "port": "cdn"})");
  std::string m = Manifest("stopped", "running");
  pid_t pid = ApplyProcess(m, {});
  std::string journal = state_ + "/journal.json";
  ASSERT_TRUE(WaitFor([&] { return ReadAll(journal).find("\"running\"") != std::string::npos; }));
  ::kill(pid, SIGTERM);
  int status = Wait(pid);
  ASSERT_TRUE(WIFEXITED(status)) << "berth finished its own way, not killed by the signal";
  EXPECT_EQ(WEXITSTATUS(status), 1);
  // It stopped before touching a service: Kimi still serves, the journal says where it was.
  EXPECT_EQ(ActiveState("vllm-kimi-k25.service"), "active");
  EXPECT_THAT(ReadAll(journal), HasSubstr("\"finished\": false"));
  EXPECT_THAT(ReadAll(journal), HasSubstr("interrupted"));
  hub_->Control("DELETE", "/_fake/faults");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("this run looks at the host afresh"));
  EXPECT_EQ(ActiveState("vllm-minimax-m25.service"), "active");
  ExpectMinimaxVerified();
  EXPECT_FALSE(std::filesystem::exists(journal)) << "a finished apply clears its journal";
}

}  // namespace
}  // namespace berth::testing

namespace berth::testing {
namespace {

// kill -9 after the download is verified and published, before the run ends: the revision is
// berth's already (state.json says so), so a manifest that no longer names it prunes it.
TEST_F(LifecycleTest, KillNineAfterAPublishedDownloadStillLeavesTheModelBerths) {
  std::string m = Manifest("stopped", "running");
  ASSERT_EQ(Plan(m), kExitChanges);
  int download = StepOf(out_.str(), "download", "model/minimax-m25");
  ASSERT_EQ(download, 1) << out_.str();
  pid_t pid = ApplyProcess(m, {"BERTH_FAULT_KILL_AT_STEP=" + std::to_string(download + 1)},
                           BERTH_FAULTY_BIN);
  int status = Wait(pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  ExpectMinimaxVerified();
  EXPECT_EQ(ActiveState("vllm-kimi-k25.service"), "active") << "killed before anything stopped";
  auto state = nlohmann::json::parse(ReadAll(state_ + "/state.json"));
  ASSERT_TRUE(state["models"].contains("MiniMaxAI/MiniMax-M2.5")) << state.dump(2);
  ASSERT_EQ(state["models"]["MiniMaxAI/MiniMax-M2.5"].size(), 1u);
  const std::string repo_dir = store_ + "/models--MiniMaxAI--MiniMax-M2.5";
  const std::string snapshot =
      repo_dir + "/snapshots/" + state["models"]["MiniMaxAI/MiniMax-M2.5"][0].get<std::string>();
  ASSERT_TRUE(std::filesystem::exists(snapshot + "/config.json"));

  // The manifest drops MiniMax: its weights are berth's, so they go.
  std::string kimi_only = (tmp_ / "kimi-only.yaml").string();
  std::ofstream(kimi_only) << "berth: 1\nhost:\n  store: " << store_
                           << "\n  reserve: 1MiB\n  unit_dir: " << sandbox_->units_dir()
                           << "\nmodels:\n  kimi-k25-nvfp4: {source: hf://nvidia/Kimi-K2.5-NVFP4, "
                              "revision: "
                           << kKimiCommit
                           << ", keep: true}\nservices:\n  vllm-kimi-k25: {state: running}\n";
  ASSERT_EQ(Plan(kimi_only), kExitChanges) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("remove-model  model/MiniMaxAI/MiniMax-M2.5"));
  ASSERT_EQ(Apply(kimi_only), kExitOk) << out_.str() << err_.str();
  EXPECT_FALSE(std::filesystem::exists(snapshot)) << "the revision berth downloaded is gone";
  size_t blobs = 0;
  if (std::filesystem::exists(repo_dir + "/blobs"))
    for ([[maybe_unused]] const auto& b : std::filesystem::directory_iterator(repo_dir + "/blobs"))
      ++blobs;
  EXPECT_EQ(blobs, 0u) << "and its blobs with it";
  EXPECT_EQ(ActiveState("vllm-kimi-k25.service"), "active");
  ASSERT_EQ(Plan(kimi_only), kExitOk) << out_.str();
}

// kill -9 after the unit file changed but before the restart that makes it run (after the
// write, and after the daemon-reload too): the rerun restarts the service, whatever the journal
// says, and the process that serves then runs the new unit.
TEST_F(LifecycleTest, KillNineBetweenWriteUnitAndRestartStillRestartsIntoTheNewUnit) {
  std::string argv_file = (tmp_ / "minimax-argv.json").string();
  std::string env = "    env: {FAKE_VLLM_ARGV_FILE: \"" + argv_file + "\"}\n";
  std::string before = Manifest("stopped", "running", 0.9, 0, env);
  std::string after =
      Manifest("stopped", "running", 0.9, 0, env + "    args: [\"--max-num-seqs\", \"64\"]\n");
  ASSERT_EQ(Apply(before), kExitOk) << out_.str() << err_.str();
  ASSERT_EQ(Plan(after), kExitChanges);
  const std::string plan = out_.str();
  int write = StepOf(plan, "write-unit", "unit/vllm-minimax-m25.service");
  int restart = StepOf(plan, "restart", "service/vllm-minimax-m25");
  ASSERT_GT(write, 0) << plan;
  ASSERT_GT(restart, write + 1) << plan << "a daemon-reload sits between them";
  for (int k = write + 1; k <= restart; ++k) {
    SCOPED_TRACE("killed before step " + std::to_string(k) + " of\n" + plan);
    ASSERT_EQ(Apply(before), kExitOk) << out_.str() << err_.str();
    ASSERT_TRUE(
        WaitFor([&] { return ReadAll(argv_file).find("max-num-seqs") == std::string::npos; }));
    auto units = systemd_->GetUnits({"vllm-minimax-m25.service"});
    ASSERT_TRUE(units.ok());
    std::string invocation = (*units)[0].invocation_id;
    pid_t pid =
        ApplyProcess(after, {"BERTH_FAULT_KILL_AT_STEP=" + std::to_string(k)}, BERTH_FAULTY_BIN);
    int status = Wait(pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    units = systemd_->GetUnits({"vllm-minimax-m25.service"});
    ASSERT_TRUE(units.ok());
    ASSERT_EQ((*units)[0].invocation_id, invocation) << "killed before the restart";
    EXPECT_THAT(ReadAll(sandbox_->units_dir() + "/vllm-minimax-m25.service"),
                HasSubstr("--max-num-seqs"))
        << "the new unit file is on disk";

    ASSERT_EQ(Plan(after), kExitChanges) << "the old process still runs: not converged";
    EXPECT_THAT(out_.str(), HasSubstr("restart       service/vllm-minimax-m25")) << out_.str();
    ASSERT_EQ(Apply(after), kExitOk) << out_.str() << err_.str();
    units = systemd_->GetUnits({"vllm-minimax-m25.service"});
    ASSERT_TRUE(units.ok());
    EXPECT_NE((*units)[0].invocation_id, invocation) << "restarted";
    ASSERT_TRUE(WaitFor([&] {
      return ReadAll(argv_file).find("max-num-seqs") != std::string::npos;
    })) << "the serving process runs the new unit: "
        << ReadAll(argv_file);
    EXPECT_TRUE(Healthy(port_));
    ASSERT_EQ(Plan(after), kExitOk) << out_.str();
  }
}

}  // namespace
}  // namespace berth::testing
