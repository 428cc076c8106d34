// A unit file change decided key by key (planners/unit_diff.h): settings only systemd reads
// (RestartSec=, Timeout*Sec=, [Install]) reach a running service by a daemon-reload, the others
// restart it. Each scenario asserts the plan's steps and their reasons and converges.
#include "planners/unit_diff.h"
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST(KeyEffect, SettingsOnlySystemdReadsNeedOnlyAReloadEveryOtherKeyARestart) {
  for (const char* key :
       {"Unit.Description", "Unit.Documentation", "Unit.StartLimitIntervalSec",
        "Unit.StartLimitBurst", "Service.Restart", "Service.RestartSec", "Service.RestartSteps",
        "Service.RestartMaxDelaySec", "Service.TimeoutStartSec", "Service.TimeoutStopSec",
        "Service.TimeoutSec", "Install.WantedBy", "Install.Alias", "Service.X-Berth-Note"})
    EXPECT_EQ(KeyEffect(key), UnitKeyEffect::kReload) << key;
  for (const char* key :
       {"Service.ExecStart", "Service.Environment", "Service.EnvironmentFile", "Service.User",
        "Service.WorkingDirectory", "Service.MemoryMax", "Service.CPUQuota",
        "Service.ProtectSystem", "Service.NoNewPrivileges", "Service.WatchdogSec", "Unit.After",
        "Unit.Requires", "Service.SomeKeyBerthDoesNotKnow", "Mount.Options", "NoSection"})
    EXPECT_EQ(KeyEffect(key), UnitKeyEffect::kRestart) << key;
}

TEST_F(ScenarioTest, AHandEditedRestartSecIsRestoredWithADaemonReloadAndNoRestart) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  EditUnit("svc.service", "RestartSec=10", "RestartSec=30");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_drift",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("RestartSec changed: 30 → 10"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("(daemon-reload only, no restart)"));
  EXPECT_THAT(p.disruptions, IsEmpty());
  Converge();
}

// The health timeout sets TimeoutStartSec=: a longer one is a new unit file, not a reload of
// 230 GB of weights.
TEST_F(ScenarioTest, ALongerHealthTimeoutRewritesTheUnitWithoutARestart) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].health.timeout_ms = 60 * 60 * 1000;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_changed",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_EQ(p.actions[0].detail,
            "TimeoutStartSec changed: 31m → 1h1m (daemon-reload only, no restart)");
  EXPECT_THAT(p.disruptions, IsEmpty());
  Converge();
}

TEST_F(ScenarioTest, AnExecStartChangeTogetherWithAReloadOnlyOneRestartsAndSaysWhy) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].health.timeout_ms = 60 * 60 * 1000;
  d.services["svc"].vllm.max_model_len = 4096;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_changed",
                                    "daemon-reload systemd unit_files_changed",
                                    "restart service/svc config_changed",
                                    "wait-healthy service/svc health_gate"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("+--max-model-len 4096"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("TimeoutStartSec changed"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("(restart: ExecStart)"));
  Converge();
}

// An [Install] change of an enabled unit: its links are made again (a disable, then an
// enable), and the process keeps running.
TEST_F(ScenarioTest, AnInstallChangeOfAnEnabledUnitReenablesItWithoutARestart) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  ASSERT_EQ(UnitOf("svc.service").unit_file_state, "enabled");
  EditUnit("svc.service", "WantedBy=multi-user.target", "WantedBy=graphical.target");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_drift",
                                    "daemon-reload systemd unit_files_changed",
                                    "disable unit/svc.service unit_changed",
                                    "enable unit/svc.service unit_changed"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("WantedBy changed: graphical.target → "
                                             "multi-user.target"));
  EXPECT_THAT(p.actions[3].detail, HasSubstr("[Install] changed: re-enabled"));
  Converge();
  EXPECT_EQ(UnitOf("svc.service").unit_file_state, "enabled");
}

// An apply killed after writing a reload-only change, before its daemon-reload: systemd says
// the file changed on disk, and berth's record says the process runs the settings the file
// holds, so the reload is all that is left.
TEST_F(ScenarioTest, APendingReloadOfAReloadOnlyChangeBerthRecordedOnlyReloads) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  ObservedUnit& u = UnitOf("svc.service");
  o.state.started[u.name] = {u.invocation_id, RestartDigest(u.content)};
  d.services["svc"].health.timeout_ms = 60 * 60 * 1000;
  Converge();  // the new unit file is written and systemd reloaded
  UnitOf("svc.service").need_daemon_reload = true;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("daemon-reload systemd pending_reload"));

  // The record of another invocation proves nothing: restarted, as before.
  o.state.started[u.name].first = "another-invocation";
  EXPECT_THAT(Steps(PlanNow()), ElementsAre("daemon-reload systemd pending_reload",
                                            "restart service/svc config_changed",
                                            "wait-healthy service/svc health_gate"));
}

// The process berth started ran other settings than the file now holds (a kill -9 between a
// unit write and its restart): restarted, with the digest berth records now as with the spec
// hash an older berth recorded.
TEST_F(ScenarioTest, AProcessStartedWithOtherSettingsThanTheFileHoldsIsRestarted) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  ObservedUnit& u = UnitOf("svc.service");
  const std::string before = RestartDigest(u.content);
  d.services["svc"].vllm.max_model_len = 4096;
  Converge();
  ObservedUnit& now = UnitOf("svc.service");
  for (const std::string& recorded : {before, std::string("0123abcd")}) {
    o.state.started[now.name] = {now.invocation_id, recorded};
    Plan p = PlanNow();
    EXPECT_THAT(Steps(p), ElementsAre("restart service/svc config_changed",
                                      "wait-healthy service/svc health_gate"))
        << recorded;
    EXPECT_THAT(p.actions[0].detail, HasSubstr("started from an older unit file"));
  }
  o.state.started[now.name] = {now.invocation_id, RestartDigest(now.content)};
  EXPECT_THAT(Steps(PlanNow()), IsEmpty());
  o.state.started[now.name] = {now.invocation_id, now.spec_hash};  // an older berth's record
  EXPECT_THAT(Steps(PlanNow()), IsEmpty());
}

TEST(RestartDigest, OnlySettingsThatNeedARestartChangeIt) {
  ServiceSpec s;
  s.name = "x";
  s.has_engine = true;
  s.engine = EngineKind::kVllm;
  s.port = 8000;
  RenderContext c;
  c.executable = "/opt/vllm/bin/vllm";
  c.snapshot_path = "/models/snap";
  std::string a = RenderUnit(s, c).content;
  std::string restart_sec = a, exec = a, moved = a;
  restart_sec.replace(restart_sec.find("RestartSec=10"), 13, "RestartSec=99");
  exec.replace(exec.find("\"8000\""), 6, "\"8001\"");
  moved.replace(moved.find("Type=exec\n"), 10, "");
  moved.replace(moved.find("KillMode=mixed\n"), 15, "KillMode=mixed\nType=exec\n");
  EXPECT_EQ(RestartDigest(a), RestartDigest(restart_sec));
  EXPECT_EQ(RestartDigest(a), RestartDigest(moved)) << "a line moved within its section";
  EXPECT_NE(RestartDigest(a), RestartDigest(exec));
  EXPECT_TRUE(RestartDigest(a).starts_with("restart-keys:"));
  EXPECT_THAT(RestartDigest(a), Not(HasSubstr(" ")));
}

}  // namespace
}  // namespace berth::testing

namespace berth::testing {
namespace {

// vLLM's compile cache (VLLM_CACHE_ROOT, one folder per service) is rendered into every vLLM
// unit; a unit written before berth rendered it takes it with a daemon-reload, not a restart,
// and a process berth started from that older unit is not taken for a stale one.
TEST_F(ScenarioTest, TheCompileCacheLineReachesARunningVllmByAReloadAlone) {
  OneModel();
  ServiceSpec& s = Vllm("svc", "a", {0}, 8000);
  Sglang("sg", "a", {0}, 30000, 0.05);
  Plan first = PlanNow();
  EXPECT_THAT(At(first, "write-unit unit/svc.service unit_missing").As<UnitFileStep>().content,
              HasSubstr("Environment=\"VLLM_CACHE_ROOT=/var/cache/berth/vllm/svc\"\n"));
  EXPECT_THAT(At(first, "write-unit unit/sg.service unit_missing").As<UnitFileStep>().content,
              Not(HasSubstr("VLLM_CACHE_ROOT")));
  Converge();
  // As an older berth wrote it: no cache line (the marker's hash is the file's).
  ObservedUnit& u = UnitOf("svc.service");
  const std::string line = "Environment=\"VLLM_CACHE_ROOT=/var/cache/berth/vllm/svc\"\n";
  const std::string with = u.content;
  std::string without = with;
  without.erase(without.find(line), line.size());
  EXPECT_EQ(RestartDigest(with), RestartDigest(without));
  UnitDiff diff = DiffUnits(without, with);
  EXPECT_FALSE(diff.needs_restart) << diff.detail;
  EXPECT_THAT(diff.detail, HasSubstr("VLLM_CACHE_ROOT=/var/cache/berth/vllm/svc"));
  // Any other Environment= change still restarts; so does a line with more than the cache.
  std::string other = with;
  other.replace(other.find(line), line.size(), "Environment=VLLM_CACHE_ROOT=/x OTHER=1\n");
  EXPECT_TRUE(DiffUnits(with, other).needs_restart);
  EXPECT_NE(RestartDigest(with), RestartDigest(other));
  // The operator's env places it: berth renders theirs, once.
  s.env["VLLM_CACHE_ROOT"] = "/nvme/vllm-cache";
  Plan placed = PlanNow();
  const std::string& content =
      At(placed, "write-unit unit/svc.service unit_changed").As<UnitFileStep>().content;
  EXPECT_THAT(content, HasSubstr("Environment=\"VLLM_CACHE_ROOT=/nvme/vllm-cache\"\n"));
  EXPECT_THAT(content, Not(HasSubstr("/var/cache/berth")));
  EXPECT_THAT(placed.actions[0].detail, HasSubstr("(daemon-reload only, no restart)"));
}

}  // namespace
}  // namespace berth::testing
