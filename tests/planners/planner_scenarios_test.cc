// Planner scenarios: service states, unit drift and reloads, strategies, disk, downloads and
// pruning. Each asserts the exact actions, their order and their reasons, and proves convergence
// where the plan can run. GPU, port and ordering scenarios are in planner_resources_test.cc.
#include "core/unit_marker.h"
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// The loader refuses a newline in a unit value; should one reach the planner anyway (a Desired
// built another way), the plan is blocked and no unit is written.
TEST_F(ScenarioTest, AValueNoUnitFileCanHoldBlocksThePlan) {
  OneModel();
  Vllm("svc", "a", {0}, 8000).vllm.served_model_name = "x\nExecStartPre=/bin/touch /tmp/pwned";
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Problems(p), HasSubstr("unit svc.service"));
  for (const Action& a : p.actions) EXPECT_NE(a.kind, ActionKind::kWriteUnit);
}

// vllm.speculative.model names a model of the manifest: berth downloads it with the service's
// model, and the unit passes its snapshot path in --speculative-config.
TEST_F(ScenarioTest, ADraftModelIsDownloadedAndNamedByItsSnapshotPath) {
  OneModel();
  Model("draft", "org/draft-eagle3").keep = false;
  Hub("org/draft-eagle3", "main", Commit("d"), 1000);
  ServiceSpec& svc = Vllm("svc", "a", {0}, 8000);
  svc.vllm.speculative = VllmSpeculative{"eagle3", 3, "draft", {}, {}, {}};
  svc.draft_model = "draft";  // as the loader sets it from vllm.speculative.model
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  ASSERT_GE(p.actions.size(), 2u);
  EXPECT_EQ(Steps(p)[0], "download model/draft model_missing");
  const Action& w = p.actions[1];
  ASSERT_EQ(w.kind, ActionKind::kWriteUnit);
  EXPECT_THAT(w.As<UnitFileStep>().content,
              HasSubstr("\"--speculative-config\" \"{\\\"method\\\":\\\"eagle3\\\","
                        "\\\"model\\\":\\\"" +
                        d.host.store + "/models--org--draft-eagle3/snapshots/" + Commit("d") +
                        "\\\",\\\"num_speculative_tokens\\\":3}\""));
  Converge();
  // The draft is in use: keep: false does not remove it while the service runs.
  EXPECT_TRUE(PlanNow().empty()) << Problems(PlanNow());
}

TEST_F(ScenarioTest, ARunningServiceWantedStoppedIsStoppedAndItsUnitStays) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].state = ServiceState::kStopped;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("stop service/svc wanted_stopped",
                                    "disable unit/svc.service wanted_stopped"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("state: stopped; frees 1 × 126.9 GiB on GPU 0"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("port 8000"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 0u);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt);
  Converge();
  EXPECT_TRUE(UnitOf("svc.service").HasFile());
}

TEST_F(ScenarioTest, ARunningServiceWantedAbsentIsStoppedAndItsUnitRemovedLast) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].state = ServiceState::kAbsent;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("stop service/svc wanted_absent",
                                    "disable unit/svc.service wanted_absent",
                                    "remove-unit unit/svc.service wanted_absent",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_THAT(p.actions[2].detail, HasSubstr("removes /etc/systemd/system/svc.service"));
  EXPECT_THAT(p.actions[3].detail, HasSubstr("1 unit file removed"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt);
  Converge();
  EXPECT_EQ(o.FindUnit("svc.service"), nullptr);
}

TEST_F(ScenarioTest, AnAbsentServiceThatDoesNotExistPlansNothing) {
  OneModel();
  Vllm("svc", "a", {0}, 8000).state = ServiceState::kAbsent;
  Plan p = PlanNow();
  EXPECT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), IsEmpty());
  EXPECT_THAT(p.disruptions, IsEmpty());
  EXPECT_THAT(p.warnings, IsEmpty());
}

TEST_F(ScenarioTest, AStoppedServiceWithAnEngineGetsItsUnitWrittenButNotStarted) {
  OneModel();
  Vllm("svc", "a", {0}, 8000).state = ServiceState::kStopped;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_missing",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("new unit file in /etc/systemd/system"));
  EXPECT_THAT(p.disruptions, IsEmpty());
  Converge();
  EXPECT_FALSE(UnitOf("svc.service").IsActive());
}

// ---- failed, drifted, pending reload, cosmetic ----------------------------------------------

TEST_F(ScenarioTest, AFailedUnitIsStartedAgainWithReasonFailed) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  ObservedUnit& u = UnitOf("svc.service");
  u.active_state = "failed";
  u.sub_state = "failed";
  u.main_pid = 0;
  DropHolds("svc.service");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p),
              ElementsAre("start service/svc failed", "wait-healthy service/svc health_gate"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("GPU 0, port 8000: failed; starting again"));
  EXPECT_THAT(p.actions[1].detail, HasSubstr("GET /health until 200"));
  Converge();
}

// A unit whose body is what berth renders but whose hash line was edited is drift too (the
// planner does not hash a body again that is the rendered one; the recorded hash still counts).
TEST_F(ScenarioTest, AUnitWhoseHashLineAloneWasEditedIsRestoredWithoutARestart) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  EXPECT_TRUE(PlanNow().empty());
  ObservedUnit& u = UnitOf("svc.service");
  const std::string zeros(64, '0');
  EditUnit("svc.service", std::string(kSpecHashKey) + u.spec_hash, kSpecHashKey + zeros);
  u.spec_hash = UnitSpecHash(u.content);
  ASSERT_EQ(u.spec_hash, zeros);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_drift",
                                    "daemon-reload systemd unit_files_changed"));
  Converge();
  EXPECT_TRUE(PlanNow().empty());
}

TEST_F(ScenarioTest, AHandEditedUnitIsRewrittenAndItsRunningServiceRestarted) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  EditUnit("svc.service", "\"--gpu-memory-utilization\" \"0.9\"",
           "\"--gpu-memory-utilization\" \"0.8\"");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_drift",
                                    "daemon-reload systemd unit_files_changed",
                                    "restart service/svc config_changed",
                                    "wait-healthy service/svc health_gate"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("edited by hand since berth wrote it"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("--gpu-memory-utilization 0.8 → 0.9"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("restoring"));
  EXPECT_THAT(p.actions[2].detail, HasSubstr("unit restored after a hand edit"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].from_step, 2u);
  EXPECT_EQ(p.disruptions[0].until_step, 3u);
  Converge();
}

TEST_F(ScenarioTest, AHandEditedUnitOfAStoppedServiceIsRewrittenWithoutStarting) {
  OneModel();
  Vllm("svc", "a", {0}, 8000).state = ServiceState::kStopped;
  Converge();
  EditUnit("svc.service", "RestartSec=10", "RestartSec=1");
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_drift",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("RestartSec changed: 1 → 10"));
  Converge();
}

TEST_F(ScenarioTest, APendingDaemonReloadOfAStoppedServiceOnlyReloads) {
  OneModel();
  Vllm("svc", "a", {0}, 8000).state = ServiceState::kStopped;
  Converge();
  UnitOf("svc.service").need_daemon_reload = true;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("daemon-reload systemd pending_reload"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("systemd reports unit files changed on disk"));
  Converge();
}

TEST_F(ScenarioTest, APendingDaemonReloadOfARunningServiceReloadsThenRestartsIt) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  UnitOf("svc.service").need_daemon_reload = true;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("daemon-reload systemd pending_reload",
                                    "restart service/svc config_changed",
                                    "wait-healthy service/svc health_gate"));
  EXPECT_THAT(p.actions[1].detail, HasSubstr("changed on disk since systemd loaded it"));
  Converge();
}

TEST_F(ScenarioTest, ACosmeticOnlyChangeRewritesTheUnitWithoutARestart) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  // An older berth described the unit differently: the file is berth's (its header hash matches
  // its body), only the Description differs from what berth renders now.
  ObservedUnit& u = UnitOf("svc.service");
  std::string body = UnitBody(u.content);
  std::string from = "Description=vllm serving svc (org/a) on port 8000";
  size_t at = body.find(from);
  ASSERT_NE(at, std::string::npos) << body;
  body.replace(at, from.size(), "Description=svc on 8000");
  std::string hash = Sha256Hex(body);
  u.content = std::string(kUnitMarker) + " 0.0.1. Edits are drift: berth rewrites this file.\n" +
              kSpecHashKey + hash + "\n" + body;
  u.content_hash = Sha256Hex(u.content);
  u.spec_hash = hash;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_changed",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_EQ(p.actions[0].detail, "Description changed (daemon-reload only, no restart)");
  EXPECT_THAT(p.disruptions, IsEmpty());
  Converge();
}

// ---- strategies -----------------------------------------------------------------------------

TEST_F(ScenarioTest, StopFirstStopsTheOldServiceBeforeTheStartEvenWhenTheGpuHasRoom) {
  OneModel();
  Vllm("old", "a", {0}, 8000, 0.45);
  Converge();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "a", {0}, 8001, 0.45).strategy = Strategy::kStopFirst;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "stop service/old frees_resources",
                  "start service/new not_running", "wait-healthy service/new health_gate",
                  "enable unit/new.service not_enabled",
                  "disable unit/old.service wanted_stopped"));
  EXPECT_EQ(p.actions[2].detail,
            "frees 1 × 63.4 GiB on GPU 0 for new; port 8000 goes dark with it (state: stopped)");
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 2u);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt)
      << "new serves 8001; nothing serves 8000 after";
  EXPECT_EQ(p.disruptions[0].reason,
            "old.service stopped (state: stopped) to make room for new, which serves port 8001");
  Converge();
}

TEST_F(ScenarioTest, StartFirstThatCannotFitIsBlockedWithAStrategyProblem) {
  OneModel();
  Vllm("old", "a", {0}, 8000, 0.9);
  Converge();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "a", {0}, 8001, 0.9).strategy = Strategy::kStartFirst;
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "stop service/old frees_resources",
                  "start service/new not_running", "wait-healthy service/new health_gate",
                  "enable unit/new.service not_enabled",
                  "disable unit/old.service wanted_stopped"));
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "strategy");
  EXPECT_EQ(p.problems[0].step, 2u);
  EXPECT_EQ(p.problems[0].message,
            "service/new has strategy: start-first, but it cannot start while old.service runs: "
            "GPU 0: needs 126.9 GiB, 14.1 GiB free while old.service runs. Use strategy: auto or "
            "stop-first");
  d.services["new"].strategy = Strategy::kAuto;
  Converge();
}

// ---- disk -----------------------------------------------------------------------------------

TEST_F(ScenarioTest, SeveralDownloadsAreCheckedCumulativelyAndTheSecondIsTheOneShort) {
  Model("a", "org/a");
  Hub("org/a", "main", Commit("a"), 500);
  Model("b", "org/b");
  Hub("org/b", "main", Commit("b"), 500);
  d.host.reserve_bytes = 100;
  o.store.free_bytes = 1000;  // 900 available: a fits, a + b does not
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p),
              ElementsAre("download model/a model_missing", "download model/b model_missing"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("(fits: 1 kB free, reserve 100 B)"));
  EXPECT_THAT(p.actions[1].detail, Not(HasSubstr("fits")));
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].step, 1u);
  EXPECT_EQ(p.problems[0].resource, "disk");
  EXPECT_EQ(p.problems[0].needed, 1000u);
  EXPECT_EQ(p.problems[0].available, 900u);
  EXPECT_THAT(p.problems[0].message, HasSubstr("downloads up to step 2 need 1 kB"));
  EXPECT_THAT(p.problems[0].message, HasSubstr("short by 100 B"));
  EXPECT_EQ(p.disk_needed, 1000u);
  o.store.free_bytes = 1100;
  Converge();
}

TEST_F(ScenarioTest, APartialDownloadResumesAndNeedsOnlyTheMissingBytes) {
  Model("a", "org/a");
  Hub("org/a", "main", Commit("c"), 1000);
  InStore("org/a", Commit("c"), 400, /*complete=*/false);
  d.host.reserve_bytes = 0;
  o.store.free_bytes = 600;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("download model/a model_partial"));
  EXPECT_EQ(p.actions[0].requires_.disk_bytes, 600u);
  EXPECT_EQ(p.actions[0].As<DownloadStep>().commit, Commit("c"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("600 B more (400 B of 1 kB present)"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("partial in the store, resuming"));
  EXPECT_EQ(p.disk_needed, 600u);
  Converge();
}

TEST_F(ScenarioTest, ADownloadOfUnknownSizeWarnsAndLeavesTheDiskUnknown) {
  Model("a", "org/a");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("download model/a model_missing"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("org/a@main, size unknown: not in the store"));
  EXPECT_EQ(p.actions[0].As<DownloadStep>().commit, "");
  EXPECT_FALSE(p.disk_known);
  ASSERT_EQ(p.warnings.size(), 3u);
  EXPECT_THAT(p.warnings[0], HasSubstr("model/a is not pinned"));
  EXPECT_THAT(p.warnings[1], HasSubstr("disk check for model/a could not be made"));
  EXPECT_THAT(p.warnings[2], HasSubstr("resolved to a commit at apply"));
  Converge();
}

TEST_F(ScenarioTest, ASizeFromTheManifestsHintIsSaidInTheDetail) {
  Model("a", "org/a", 5000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("download model/a model_missing"));
  EXPECT_EQ(p.actions[0].requires_.disk_bytes, 5000u);
  EXPECT_THAT(p.actions[0].detail,
              HasSubstr("5 kB (size from the manifest's size:, the Hub was not asked)"));
  EXPECT_TRUE(p.disk_known);
  EXPECT_EQ(p.disk_needed, 5000u);
  Converge();
}

// ---- which models stay, which go ------------------------------------------------------------

TEST_F(ScenarioTest, AModelWithKeepFalseAndNoServiceIsNotDownloaded) {
  Model("a", "org/a").keep = false;
  Hub("org/a", "main", Commit("a"), 1000);
  Plan p = PlanNow();
  EXPECT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), IsEmpty());
  EXPECT_THAT(p.notes, IsEmpty());
  EXPECT_EQ(p.disk_needed, 0u);
}

TEST_F(ScenarioTest, AModelWithKeepFalseIsDownloadedWhileARunningServiceUsesIt) {
  Gpus(1, GiB(141));
  Model("a", "org/a").keep = false;
  Hub("org/a", "main", Commit("a"), 1000);
  Vllm("svc", "a", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("download model/a model_missing", "write-unit unit/svc.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/svc not_running",
                  "wait-healthy service/svc health_gate", "enable unit/svc.service not_enabled"));
  Converge();
}

TEST_F(ScenarioTest, AKeptModelNoServiceUsesIsNoted) {
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), IsEmpty());
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0].address, "model/a");
  EXPECT_EQ(p.notes[0].detail, "org/a@aaaaaaa, 1 kB, complete, kept (keep: true)");
}

TEST_F(ScenarioTest, AModelBerthDidNotDownloadIsNeverRemoved) {
  InStore("org/mine", Commit("a"), 1000, true, {"main"}, /*by_berth=*/false);
  // Dropped from the manifest altogether: not berth's, so it stays.
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), IsEmpty());
  // Named with keep: false and unused: still not berth's to remove.
  Model("mine", "org/mine").keep = false;
  p = PlanNow();
  EXPECT_THAT(Steps(p), IsEmpty());
  EXPECT_FALSE(p.blocked()) << Problems(p);
}

TEST_F(ScenarioTest, ARepoBerthDownloadedThatNoModelNamesIsRemovedLast) {
  Gpus(1, GiB(141));
  InStore("org/old", Commit("0"), 3000);
  Model("b", "org/b");
  Hub("org/b", "main", Commit("b"), 2000);
  Vllm("svc", "b", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("download model/b model_missing", "write-unit unit/svc.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/svc not_running",
                  "wait-healthy service/svc health_gate", "enable unit/svc.service not_enabled",
                  "remove-model model/org/old not_in_manifest"));
  const Action& r = At(p, "remove-model model/org/old not_in_manifest");
  EXPECT_EQ(r.As<RemoveModelStep>().commit, Commit("0"));
  EXPECT_EQ(r.frees.disk_bytes, 3000u);
  EXPECT_THAT(r.detail, HasSubstr("berth downloaded it and no manifest model names it"));
  Converge();
  EXPECT_EQ(o.FindRepo("org/old"), nullptr);
}

// ---- units the manifest does not name -------------------------------------------------------

TEST_F(ScenarioTest, ABerthUnitNoManifestNamesIsStoppedAndRemoved) {
  OneModel(2);
  Vllm("gone", "a", {0}, 8000);
  Vllm("stays", "a", {1}, 8001);
  Converge();
  d.services.erase("gone");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("stop service/gone not_in_manifest",
                                    "disable unit/gone.service not_in_manifest",
                                    "remove-unit unit/gone.service not_in_manifest",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("no manifest names it any more"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt);
  Converge();
  EXPECT_EQ(o.FindUnit("gone.service"), nullptr);
  EXPECT_TRUE(o.FindUnit("stays.service")->IsActive());
}

TEST_F(ScenarioTest, AForeignUnitNotInTheManifestIsLeftAlone) {
  OneModel();
  ForeignService("other.service", {0}, GiB(10), 9000);
  Vllm("svc", "a", {0}, 8000, 0.5);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/svc.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/svc not_running",
                  "wait-healthy service/svc health_gate", "enable unit/svc.service not_enabled"));
  for (const auto& a : p.actions) EXPECT_NE(a.unit, "other.service");
  Converge();
  EXPECT_TRUE(o.FindUnit("other.service")->IsActive());
}

// ---- GPUs -----------------------------------------------------------------------------------

}  // namespace
}  // namespace berth::testing
