// What a reboot brings up. berth enables the units that should run and disables those that
// should not, so a host switched from Kimi to MiniMax boots MiniMax, not Kimi. Each test boots
// its own sandbox that reaches multi-user.target (as a host does), applies, stops it, and boots
// a new one over the same unit directory: a reboot.
#include <gmock/gmock.h>

#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;

const std::string kKimiCommit(40, 'c');
const std::string kMinimaxCommit(40, 'd');

class BootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!SystemdSandbox::Available(&why)) {
      if (SystemdSandbox::MissingAllowed())
        GTEST_SKIP() << "no systemd sandbox (BERTH_ALLOW_NO_SANDBOX=1): " << why;
      FAIL() << "no systemd sandbox here: " << why;
    }
    name_ = SystemdSandbox::UniqueName("boot");
    ASSERT_NO_FATAL_FAILURE(Boot(/*again=*/false));
    tmp_ = std::filesystem::temp_directory_path() /
           ("berth-boot-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(tmp_);
    store_ = (tmp_ / "store").string();
    MakeModel("nvidia/Kimi-K2.5-NVFP4", kKimiCommit);
    MakeModel("MiniMaxAI/MiniMax-M2.5", kMinimaxCommit);
    port_ = FreePort();
    kimi_port_ = FreePort();
    while (kimi_port_ == port_) kimi_port_ = FreePort();
    ::setenv("HF_HUB_OFFLINE", "1", 1);
  }
  void TearDown() override {
    ::unsetenv("HF_HUB_OFFLINE");
    systemd_.reset();
    sandbox_.reset();  // stops it and proves nothing is left
    std::error_code ec;
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_, ec);
  }

  /// Boots the sandbox; `again`: over the units dir the stopped one left.
  void Boot(bool again) {
    SystemdSandbox::Options options;
    options.multi_user = true;
    options.keep_units = again;
    std::string error;
    sandbox_ = SystemdSandbox::Start(name_, options, &error);
    ASSERT_TRUE(sandbox_) << error;
    SdBusOptions bus;
    bus.address = sandbox_->system_bus_address();
    auto mgr = ConnectSystemd(bus);
    ASSERT_TRUE(mgr.ok()) << mgr.status().message();
    systemd_ = std::move(mgr).value();
  }
  /// Power off (every process of the sandbox is killed, /run is gone) and boot again.
  void Reboot() {
    systemd_.reset();
    sandbox_->set_keep_artifacts(true);  // the units dir survives, as /etc does
    std::string error;
    ASSERT_TRUE(sandbox_->Stop(&error)) << error;
    ASSERT_FALSE(Healthy(port_) || Healthy(kimi_port_)) << "nothing serves while the host is down";
    sandbox_.reset();
    Boot(/*again=*/true);
  }

  void MakeModel(const std::string& repo, const std::string& commit) {
    HfCachePaths paths(store_, repo);
    CommandResult r =
        RunCommand({"/usr/bin/python3", SourceDir() + "/tests/fake_vllm/make_model.py",
                    paths.SnapshotDir(commit)});
    ASSERT_TRUE(r.ok()) << r.output << r.error;
  }

  /// Kimi as an operator set it up by hand: its own unit file, enabled, running.
  void HandWrittenKimi() {
    std::ofstream(sandbox_->units_dir() + "/vllm-kimi-k25.service")
        << "[Unit]\nDescription=Kimi, written by hand\n[Service]\nType=exec\nExecStart="
        << FakeVllm() << " serve "
        << HfCachePaths(store_, "nvidia/Kimi-K2.5-NVFP4").SnapshotDir(kKimiCommit)
        << " --served-model-name kimi --host 127.0.0.1 --port " << kimi_port_
        << "\n[Install]\nWantedBy=multi-user.target\n";
    CommandResult enabled = sandbox_->Exec({"systemctl", "enable", "vllm-kimi-k25.service"});
    ASSERT_TRUE(enabled.ok()) << enabled.output << enabled.error;
    ASSERT_TRUE(systemd_->Start("vllm-kimi-k25.service", std::chrono::seconds(20)).ok());
    ASSERT_TRUE(WaitFor([&] { return Healthy(kimi_port_); }));
  }

  /// Kimi is state-only (its unit is the operator's); MiniMax is berth's.
  std::string Manifest(const std::string& kimi_state, const std::string& minimax_state) {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n  minimax-m25: {source: hf://MiniMaxAI/MiniMax-M2.5, revision: "
      << kMinimaxCommit << "}\n"
      << "services:\n  vllm-kimi-k25: {state: " << kimi_state << "}\n"
      << "  vllm-minimax-m25:\n    model: minimax-m25\n    engine: vllm\n    gpus: [0]\n"
      << "    port: " << port_ << "\n    bind: 127.0.0.1\n    state: " << minimax_state << "\n"
      << "    vllm: {served_model_name: MiniMax-M2.5}\n"
      << "    health: {timeout: 20s, interval: 100ms}\n";
    std::string path = (tmp_ / ("berth-" + std::to_string(++manifests_) + ".yaml")).string();
    std::ofstream(path) << m.str();
    return path;
  }
  ApplyCommand Command(const std::string& manifest, bool yes) {
    ApplyCommand cmd;
    cmd.manifest_path = manifest;
    cmd.yes = yes;
    cmd.host.bus_address = sandbox_->system_bus_address();
    cmd.host.journal_dir = sandbox_->journal_dir();
    cmd.state_dir = (tmp_ / "state").string();
    return cmd;
  }
  int Apply(const std::string& manifest) {
    out_.str("");
    err_.str("");
    std::istringstream in;
    return RunApply(Command(manifest, true), in, out_, err_);
  }
  /// The plan `berth apply` would run now (answered "no").
  std::string PlanText(const std::string& manifest) {
    std::ostringstream out, err;
    std::istringstream no("no\n");
    RunApply(Command(manifest, false), no, out, err);
    return out.str();
  }

  UnitProperties Unit(const std::string& unit) {
    auto p = systemd_->GetUnits({unit});
    return p.ok() ? (*p)[0] : UnitProperties();
  }
  /// What `systemctl is-enabled` says: read from the unit directory, not systemd's cache.
  std::string IsEnabled(const std::string& unit) {
    CommandResult r = sandbox_->Exec({"systemctl", "is-enabled", unit});
    std::string s = r.output;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  /// Whether `port` answers GET /health with 200 (and says which model it serves).
  std::string Serving(int port) {
    CommandResult r =
        RunCommand({"/usr/bin/python3", "-c",
                    "import urllib.request,sys; print(urllib.request.urlopen('http://127.0.0.1:" +
                        std::to_string(port) + "/v1/models', timeout=2).read().decode())"},
                   {}, std::chrono::seconds(10));
    return r.ok() ? r.output : "";
  }
  static bool Healthy(int port) {
    CommandResult r = RunCommand(
        {"/usr/bin/python3", "-c",
         "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:" +
             std::to_string(port) + "/health', timeout=2).status == 200 else 1)"},
        {}, std::chrono::seconds(10));
    return r.ok();
  }

  std::string name_;
  std::unique_ptr<SystemdSandbox> sandbox_;
  std::unique_ptr<SystemdManager> systemd_;
  std::filesystem::path tmp_;
  std::string store_;
  int port_ = 0;       // MiniMax
  int kimi_port_ = 0;  // Kimi
  int manifests_ = 0;
  std::ostringstream out_, err_;
};

TEST_F(BootTest, KimiToMinimaxThenRebootBringsUpMinimaxNotKimi) {
  ASSERT_NO_FATAL_FAILURE(HandWrittenKimi());
  ASSERT_EQ(IsEnabled("vllm-kimi-k25.service"), "enabled");
  std::string m = Manifest("stopped", "running");

  // The switch: MiniMax is enabled once healthy; Kimi (state-only) is stopped and disabled.
  std::string plan = PlanText(m);
  size_t gate = plan.find("> wait-healthy  service/vllm-minimax-m25");
  size_t enable = plan.find("+ enable        unit/vllm-minimax-m25.service");
  size_t disable = plan.find("- disable       unit/vllm-kimi-k25.service");
  ASSERT_NE(gate, std::string::npos) << plan;
  ASSERT_NE(enable, std::string::npos) << plan;
  ASSERT_NE(disable, std::string::npos) << plan;
  EXPECT_LT(gate, enable) << plan;

  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_EQ(IsEnabled("vllm-minimax-m25.service"), "enabled");
  EXPECT_EQ(IsEnabled("vllm-kimi-k25.service"), "disabled");
  EXPECT_EQ(Unit("vllm-minimax-m25.service").unit_file_state, "enabled")
      << "systemd's own property shows it at once (berth reloads after enabling)";
  EXPECT_EQ(Unit("vllm-kimi-k25.service").unit_file_state, "disabled");
  EXPECT_THAT(PlanText(m), HasSubstr("No changes"));
  std::ostringstream observed, observe_err;
  ASSERT_EQ(RunObserve(m, "text", Command(m, true).host, observed, observe_err), kExitOk)
      << observe_err.str();
  EXPECT_THAT(observed.str(),
              HasSubstr("unit vllm-minimax-m25.service: loaded active/running, enabled (berth)"));
  EXPECT_THAT(observed.str(),
              HasSubstr("unit vllm-kimi-k25.service: loaded inactive/dead, disabled"));

  ASSERT_NO_FATAL_FAILURE(Reboot());
  ASSERT_TRUE(WaitFor([&] { return Healthy(port_); })) << "MiniMax came back at boot";
  EXPECT_THAT(Serving(port_), HasSubstr("MiniMax-M2.5"));
  EXPECT_EQ(Unit("vllm-minimax-m25.service").active_state, "active");
  EXPECT_EQ(Unit("vllm-kimi-k25.service").active_state, "inactive");
  EXPECT_FALSE(Healthy(kimi_port_)) << "Kimi stayed down";
  EXPECT_THAT(PlanText(m), HasSubstr("No changes")) << "the rebooted host is the manifest's";

  // And back: Kimi runs and is enabled again, MiniMax stopped and disabled; a reboot keeps it so.
  m = Manifest("running", "stopped");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("- disable       unit/vllm-minimax-m25.service"));
  EXPECT_THAT(out_.str(), HasSubstr("+ enable        unit/vllm-kimi-k25.service"));
  ASSERT_NO_FATAL_FAILURE(Reboot());
  ASSERT_TRUE(WaitFor([&] { return Healthy(kimi_port_); })) << "Kimi came back at boot";
  EXPECT_THAT(Serving(kimi_port_), HasSubstr("kimi"));
  EXPECT_EQ(Unit("vllm-minimax-m25.service").active_state, "inactive");
  EXPECT_FALSE(Healthy(port_)) << "MiniMax stayed down";
  EXPECT_THAT(PlanText(m), HasSubstr("No changes"));
}

}  // namespace
}  // namespace berth::testing
