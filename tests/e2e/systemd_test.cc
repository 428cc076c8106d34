// The systemd provider against a real systemd: unit files, jobs, states, journal lines.
#include <gmock/gmock.h>

#include "core/hash.h"
#include "planners/unit_render.h"
#include "providers/systemd/observe_units.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

class SystemdTest : public SandboxSuite {
 protected:
  /// A berth-rendered unit running fake_vllm with `extra` arguments.
  std::string WriteFakeService(const std::string& name, int port,
                               std::vector<std::string> extra = {},
                               std::map<std::string, std::string> env = {}) {
    std::string model = MakeModel((tmp_ / "store").string(), "org/m", std::string(40, 'a'));
    ServiceSpec s;
    s.name = name;
    s.has_engine = true;
    s.engine = EngineKind::kCommand;
    s.command = {FakeVllm(), "serve", model, "--port", std::to_string(port), "--served-model-name",
                 name};
    s.args = std::move(extra);
    s.env = std::move(env);
    s.port = port;
    RenderContext ctx;
    ctx.store = (tmp_ / "store").string();
    ctx.berth_version = "test";
    RenderedUnit u = RenderUnit(s, ctx);
    auto w = files_->Write(u.name, u.content);
    EXPECT_TRUE(w.ok()) << w.status().message();
    return u.name;
  }
  UnitProperties Props(const std::string& unit) {
    auto p = systemd_->GetUnits({unit});
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok() ? (*p)[0] : UnitProperties{};
  }
};

TEST_F(SystemdTest, ArgumentsReachTheProcessByteForByte) {
  std::string argv_file = (tmp_ / "argv").string();
  std::vector<std::string> tricky = {"with space", "say \"hi\"",
                                     "single 'q'", "100%",
                                     "%n",         "$HOME",
                                     "${HOME}",    "back\\slash",
                                     "ünïcødé ✓",  "two\nlines",
                                     "tab\there",  "",
                                     ";",          "--json={\"a\": [1, 2]}"};
  int port = FreePort();
  std::string unit =
      WriteFakeService("argv-check", port, tricky, {{"FAKE_VLLM_ARGV_FILE", argv_file}});
  ASSERT_TRUE(systemd_->Reload().ok());
  Status s = systemd_->Start(unit, seconds(20));
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(argv_file + ".bin"); }));
  std::string got = ReadAll(argv_file + ".bin");
  std::vector<std::string> argv;
  for (size_t at = 0; at < got.size();) {
    size_t nul = got.find('\0', at);
    argv.push_back(got.substr(at, nul - at));
    at = nul + 1;
  }
  ASSERT_GE(argv.size(), tricky.size());
  std::vector<std::string> tail(argv.end() - static_cast<long>(tricky.size()), argv.end());
  EXPECT_EQ(tail, tricky);
  EXPECT_EQ(argv[0], FakeVllm());
}

TEST_F(SystemdTest, StartRestartAndStopConfirmTheFinalState) {
  std::string unit = WriteFakeService("lifecycle", FreePort());
  ASSERT_TRUE(systemd_->Reload().ok());
  Status s = systemd_->Start(unit, seconds(20));
  ASSERT_TRUE(s.ok()) << s.message();
  UnitProperties p = Props(unit);
  EXPECT_EQ(p.active_state, "active");
  EXPECT_EQ(p.sub_state, "running");
  EXPECT_EQ(p.load_state, "loaded");
  EXPECT_EQ(p.fragment_path, "/etc/systemd/system/" + unit);
  EXPECT_GT(p.main_pid, 0u);
  EXPECT_FALSE(p.invocation_id.empty());
  std::string first = p.invocation_id;

  ASSERT_TRUE(systemd_->Restart(unit, seconds(20)).ok());
  p = Props(unit);
  EXPECT_EQ(p.active_state, "active");
  EXPECT_NE(p.invocation_id, first) << "a restart gives a new invocation";

  // Starting what runs is a no-op, as every action must be.
  ASSERT_TRUE(systemd_->Start(unit, seconds(20)).ok());
  EXPECT_EQ(Props(unit).invocation_id, p.invocation_id);

  ASSERT_TRUE(systemd_->Stop(unit, seconds(20)).ok());
  EXPECT_EQ(Props(unit).active_state, "inactive");
  ASSERT_TRUE(systemd_->Stop(unit, seconds(20)).ok()) << "stopping a stopped unit is a no-op";
}

TEST_F(SystemdTest, AMissingBinaryFailsWithTheUnitsJournalLines) {
  std::string unit = "missing-binary.service";
  ASSERT_TRUE(
      files_->Write(unit, "[Service]\nType=exec\nExecStart=/nonexistent/vllm serve x\n").ok());
  ASSERT_TRUE(systemd_->Reload().ok());
  Status s = systemd_->Start(unit, seconds(20));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("missing-binary.service"));
  EXPECT_THAT(s.message(), HasSubstr("last journal lines"));
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/vllm"));
  EXPECT_EQ(Props(unit).active_state, "failed");
}

TEST_F(SystemdTest, AStartThatExceedsItsTimeoutFails) {
  std::string unit = "slow-start.service";
  // systemd's own limit: the start job fails when TimeoutStartSec passes.
  ASSERT_TRUE(files_
                  ->Write(unit,
                          "[Service]\nType=exec\nExecStartPre=/bin/sleep 30\n"
                          "ExecStart=/bin/sleep 300\nTimeoutStartSec=1\n")
                  .ok());
  ASSERT_TRUE(systemd_->Reload().ok());
  auto t0 = std::chrono::steady_clock::now();
  Status s = systemd_->Start(unit, seconds(20));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("Result=timeout"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(15));

  // berth's own limit: a job still running at the deadline is given up and the unit stopped.
  ASSERT_TRUE(files_
                  ->Write(unit,
                          "[Service]\nType=exec\nExecStartPre=/bin/sleep 30\n"
                          "ExecStart=/bin/sleep 300\nTimeoutStartSec=60\n")
                  .ok());
  ASSERT_TRUE(systemd_->Reload().ok());
  s = systemd_->Start(unit, seconds(1));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("did not start within 1 s"));
  EXPECT_TRUE(WaitFor([&] { return Props(unit).active_state != "activating"; }));
}

TEST_F(SystemdTest, ObservationReadsTheFileStateAndNeedDaemonReload) {
  std::string unit = WriteFakeService("observed", FreePort());
  ASSERT_TRUE(systemd_->Reload().ok());
  ASSERT_TRUE(systemd_->Start(unit, seconds(20)).ok());
  auto before = ObserveUnits(*systemd_, *files_, {});
  ASSERT_TRUE(before.ok()) << before.status().message();
  ASSERT_EQ(before->size(), 1u) << "berth's units are found by their marker";
  const ObservedUnit& u = (*before)[0];
  EXPECT_TRUE(u.managed);
  EXPECT_EQ(Sha256Hex(UnitBody(u.content)), u.spec_hash);
  EXPECT_FALSE(u.need_daemon_reload);
  EXPECT_EQ(u.n_restarts, 0u);
  // A hand edit: systemd notices the file changed; berth notices the body no longer matches.
  std::ofstream(files_->PathOf(unit), std::ios::app) << "Environment=EDITED=1\n";
  auto after = ObserveUnits(*systemd_, *files_, {unit, "never-heard-of.service"});
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 2u);
  EXPECT_EQ((*after)[0].load_state, "not-found");
  EXPECT_TRUE((*after)[1].need_daemon_reload);
  EXPECT_NE(Sha256Hex(UnitBody((*after)[1].content)), (*after)[1].spec_hash);
}

// EnvironmentFile= takes its path as written but expands specifiers: a path with '%' and '$'
// must reach systemd literally (berth writes '%%'), or the unit cannot find its file and fails.
TEST_F(SystemdTest, AnEnvFilePathWithSpecifiersIsReadLiterally) {
  std::string argv_file = (tmp_ / "argv-envfile").string();
  std::filesystem::path env_file = tmp_ / "env-%n-$X.env";
  std::ofstream(env_file) << "FAKE_VLLM_ARGV_FILE=" << argv_file << "\n";
  int port = FreePort();
  std::string model = MakeModel((tmp_ / "store").string(), "org/m", std::string(40, 'a'));
  ServiceSpec s;
  s.name = "envfile-check";
  s.has_engine = true;
  s.engine = EngineKind::kCommand;
  s.command = {FakeVllm(), "serve", model, "--port", std::to_string(port), "--served-model-name",
               "m-%n-$X"};
  s.env_file = env_file.string();
  s.port = port;
  RenderContext ctx;
  ctx.store = (tmp_ / "store").string();
  ctx.berth_version = "test";
  Result<RenderedUnit> u = TryRenderUnit(s, ctx);
  ASSERT_TRUE(u.ok()) << u.status().message();
  ASSERT_TRUE(files_->Write(u->name, u->content).ok());
  ASSERT_TRUE(systemd_->Reload().ok());
  Status started = systemd_->Start(u->name, seconds(20));
  ASSERT_TRUE(started.ok()) << started.message();
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(argv_file + ".bin"); }));
  EXPECT_THAT(ReadAll(argv_file + ".bin"), HasSubstr(std::string("\0m-%n-$X", 8)));
}

TEST_F(SystemdTest, EnableAndDisableChangeTheBootSymlinksAndTheUnitFileStateAtOnce) {
  std::string unit = WriteFakeService("boot-check", FreePort());
  ASSERT_TRUE(systemd_->Reload().ok());
  EXPECT_EQ(Props(unit).unit_file_state, "disabled");
  std::string link = sandbox_->units_dir() + "/multi-user.target.wants/" + unit;

  Status s = systemd_->Enable(unit);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(std::filesystem::is_symlink(link)) << "WantedBy=multi-user.target";
  // systemd caches UnitFileState until a reload; Enable reloads, as systemctl enable does.
  EXPECT_EQ(Props(unit).unit_file_state, "enabled");
  EXPECT_TRUE(systemd_->Enable(unit).ok()) << "enabling twice changes nothing";

  s = systemd_->Disable(unit);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(link)));
  EXPECT_EQ(Props(unit).unit_file_state, "disabled");
  EXPECT_TRUE(systemd_->Disable(unit).ok()) << "disabling twice changes nothing";
}

TEST_F(SystemdTest, EnablingAStaticOrMaskedUnitFailsAndSaysWhy) {
  std::ofstream(sandbox_->units_dir() + "/static-check.service")
      << "[Service]\nType=exec\nExecStart=/bin/sleep 100\n";
  std::filesystem::create_symlink("/dev/null", sandbox_->units_dir() + "/masked-check.service");
  ASSERT_TRUE(systemd_->Reload().ok());
  EXPECT_EQ(Props("static-check.service").unit_file_state, "static");
  Status s = systemd_->Enable("static-check.service");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("has no [Install] section"));
  s = systemd_->Enable("masked-check.service");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("systemd refused to enable masked-check.service"));
  EXPECT_THAT(s.message(), HasSubstr("masked"));
  std::filesystem::remove(sandbox_->units_dir() + "/masked-check.service");
}

}  // namespace
}  // namespace berth::testing
