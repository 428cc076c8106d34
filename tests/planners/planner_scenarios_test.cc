// More planner scenarios: service states, unit drift and reloads, strategies, disk, pruning,
// GPU and port feasibility, engines and determinism. Each asserts the exact actions, their order
// and their reasons, and proves convergence where the plan can run.
#include <string>

#include "engine/core/hash.h"
#include "planners/unit_render.h"
#include "tests/planners/planner_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class ScenarioTest : public PlannerTest {
 protected:
  /// One 141 GiB GPU per index asked, model "a" complete in the store.
  void OneModel(int gpus = 1) {
    Gpus(gpus, GiB(141));
    Model("a", "org/a");
    InStore("org/a", Commit("a"), 1000);
  }
  ObservedUnit& UnitOf(const std::string& name) {
    for (auto& u : o.units)
      if (u.name == name) return u;
    ADD_FAILURE() << "no unit " << name;
    static ObservedUnit none;
    return none;
  }
  /// Replaces `from` by `to` in a managed unit's file, as a hand edit would.
  void EditUnit(const std::string& name, const std::string& from, const std::string& to) {
    ObservedUnit& u = UnitOf(name);
    size_t at = u.content.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in\n" << u.content;
    u.content.replace(at, from.size(), to);
    u.content_hash = Sha256Hex(u.content);
  }
  /// Forgets what a unit holds (GPU memory, ports), as when its process died.
  void DropHolds(const std::string& unit) {
    for (auto& g : o.gpus) {
      for (const auto& p : g.processes)
        if (p.unit == unit) g.memory_used -= p.used_bytes;
      std::erase_if(g.processes, [&](const GpuProcess& p) { return p.unit == unit; });
    }
    std::erase_if(o.ports, [&](const ListeningPort& p) { return p.unit == unit; });
  }
  ServiceSpec& Sglang(const std::string& name, const std::string& model, std::vector<int> gpus,
                      int port, double fraction) {
    ServiceSpec& s = d.services[name];
    s.name = name;
    s.has_engine = true;
    s.engine = EngineKind::kSglang;
    s.model = model;
    s.gpus = std::move(gpus);
    s.port = port;
    s.sglang.tp_size = static_cast<int>(s.gpus.size());
    s.sglang.mem_fraction_static = fraction;
    return s;
  }
  ServiceSpec& Command(const std::string& name, std::vector<int> gpus, int port, uint64_t per_gpu) {
    ServiceSpec& s = d.services[name];
    s.name = name;
    s.has_engine = true;
    s.engine = EngineKind::kCommand;
    s.command = {"/opt/srv/bin/serve", "--listen", std::to_string(port)};
    s.gpus = std::move(gpus);
    s.port = port;
    s.gpu_memory = per_gpu;
    return s;
  }
};

// ---- stopped and absent services ----------------------------------------------------------

TEST_F(ScenarioTest, ARunningServiceWantedStoppedIsStoppedAndItsUnitStays) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].state = ServiceState::kStopped;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("stop service/svc wanted_stopped"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("state: stopped; frees 1 × 126.9 GiB on GPU 0"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("port 8000"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 1);
  EXPECT_EQ(p.disruptions[0].until_step, 0);
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
                                    "remove-unit unit/svc.service wanted_absent",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_THAT(p.actions[1].detail, HasSubstr("removes /etc/systemd/system/svc.service"));
  EXPECT_THAT(p.actions[2].detail, HasSubstr("1 unit file removed"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].until_step, 0);
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
  EXPECT_EQ(p.disruptions[0].from_step, 3);
  EXPECT_EQ(p.disruptions[0].until_step, 4);
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
  EXPECT_EQ(p.actions[0].detail, "Description changed");
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
                  "start service/new not_running", "wait-healthy service/new health_gate"));
  EXPECT_THAT(p.actions[2].detail, HasSubstr("for new (state: stopped)"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 3);
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
                  "start service/new not_running", "wait-healthy service/new health_gate"));
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "strategy");
  EXPECT_EQ(p.problems[0].step, 3);
  EXPECT_THAT(p.problems[0].message,
              HasSubstr("service/new has strategy: start-first, but it cannot start while "
                        "old.service runs"));
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
  EXPECT_EQ(p.problems[0].step, 2);
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
  EXPECT_EQ(p.actions[0].commit, Commit("c"));
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
  EXPECT_EQ(p.actions[0].commit, "");
  EXPECT_FALSE(p.disk_known);
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_THAT(p.warnings[0], HasSubstr("disk check for model/a could not be made"));
  EXPECT_THAT(p.warnings[1], HasSubstr("resolved to a commit at apply"));
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
                  "wait-healthy service/svc health_gate"));
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
                  "wait-healthy service/svc health_gate",
                  "remove-model model/org/old not_in_manifest"));
  const Action& r = At(p, "remove-model model/org/old not_in_manifest");
  EXPECT_EQ(r.commit, Commit("0"));
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
                                    "remove-unit unit/gone.service not_in_manifest",
                                    "daemon-reload systemd unit_files_changed"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("no manifest names it any more"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].until_step, 0);
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
  EXPECT_THAT(Steps(p),
              ElementsAre("write-unit unit/svc.service unit_missing",
                          "daemon-reload systemd unit_files_changed",
                          "start service/svc not_running", "wait-healthy service/svc health_gate"));
  for (const auto& a : p.actions) EXPECT_NE(a.unit, "other.service");
  Converge();
  EXPECT_TRUE(o.FindUnit("other.service")->IsActive());
}

// ---- GPUs -----------------------------------------------------------------------------------

TEST_F(ScenarioTest, AnUnmanagedProcessFitsWhenTheClaimFitsAndBlocksWhenNot) {
  OneModel();
  Hold(0, 777, GiB(10));  // 141 − 10 = 131 GiB free ≥ 126.9 GiB claimed
  Vllm("svc", "a", {0}, 8000, 0.9);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p),
              ElementsAre("write-unit unit/svc.service unit_missing",
                          "daemon-reload systemd unit_files_changed",
                          "start service/svc not_running", "wait-healthy service/svc health_gate"));
  EXPECT_EQ(p.actions[2].requires_.gpu_bytes.at(0), static_cast<uint64_t>(0.9 * GiB(141)));

  Hold(0, 778, GiB(10));  // now 121 GiB free
  p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].resource, "gpu 0");
  EXPECT_EQ(p.problems[0].step, 3);
  EXPECT_EQ(p.problems[0].available, GiB(121));
  EXPECT_THAT(p.problems[0].message, HasSubstr("needs 126.9 GiB on GPU 0 (of 141.0 GiB)"));
  EXPECT_THAT(p.problems[0].message, HasSubstr("only 121.0 GiB can be freed: short by 5.9 GiB"));
  EXPECT_THAT(p.problems[0].message, HasSubstr("pid 777 (python3) holds 10.0 GiB"));
  EXPECT_THAT(p.problems[0].message, HasSubstr("pid 778 (python3) holds 10.0 GiB"));
}

TEST_F(ScenarioTest, AGpuIndexTheHostDoesNotHaveIsBlocked) {
  OneModel(2);
  Vllm("svc", "a", {0, 5}, 8000);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Steps(p),
              ElementsAre("write-unit unit/svc.service unit_missing",
                          "daemon-reload systemd unit_files_changed",
                          "start service/svc not_running", "wait-healthy service/svc health_gate"));
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "gpu 5");
  EXPECT_EQ(p.problems[0].step, 3);
  EXPECT_THAT(p.problems[0].message,
              HasSubstr("service/svc asks for GPU 5, which this host does not have (2 GPUs)"));
}

TEST_F(ScenarioTest, UnknownGpusWarnAndSkipTheGpuCheck) {
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  o.gpus_known = false;
  o.gpu_error = "NVML: libnvidia-ml.so.1 not found";
  Vllm("svc", "a", {0, 1}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p),
              ElementsAre("write-unit unit/svc.service unit_missing",
                          "daemon-reload systemd unit_files_changed",
                          "start service/svc not_running", "wait-healthy service/svc health_gate"));
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0],
            "GPU memory checks skipped: NVML: libnvidia-ml.so.1 not found (state host.gpus in the "
            "manifest to check against it)");
  EXPECT_TRUE(p.actions[2].requires_.gpu_bytes.empty());
  Converge();
}

TEST_F(ScenarioTest, ARestartCountsTheMemoryItGivesBack) {
  OneModel();
  Vllm("svc", "a", {0}, 8000, 0.9);
  Converge();
  d.services["svc"].vllm.gpu_memory_utilization = 0.95;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_changed",
                                    "daemon-reload systemd unit_files_changed",
                                    "restart service/svc config_changed",
                                    "wait-healthy service/svc health_gate"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("--gpu-memory-utilization 0.9 → 0.95"));
  Converge();
}

// ---- ports ----------------------------------------------------------------------------------

TEST_F(ScenarioTest, APortHeldByAnotherBerthServiceThatStaysRunningBlocks) {
  OneModel(2);
  Vllm("one", "a", {0}, 8000);
  Converge();
  Vllm("two", "a", {1}, 8000);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Steps(p),
              ElementsAre("write-unit unit/two.service unit_missing",
                          "daemon-reload systemd unit_files_changed",
                          "start service/two not_running", "wait-healthy service/two health_gate"));
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "port 8000");
  EXPECT_EQ(p.problems[0].step, 3);
  EXPECT_THAT(p.problems[0].message,
              HasSubstr("service/two needs port 8000, held by one.service, which the manifest "
                        "does not stop"));
}

TEST_F(ScenarioTest, TwoServicesSwappingPortsRestartBothWithoutBlocking) {
  OneModel(2);
  Vllm("one", "a", {0}, 8000);
  Vllm("two", "a", {1}, 8001);
  Converge();
  d.services["one"].port = 8001;
  d.services["two"].port = 8000;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/one.service unit_changed",
                  "write-unit unit/two.service unit_changed",
                  "daemon-reload systemd unit_files_changed", "stop service/two frees_resources",
                  "restart service/one config_changed", "wait-healthy service/one health_gate",
                  "start service/two config_changed", "wait-healthy service/two health_gate"));
  // two is stopped to free 8001 for one, then started (not restarted) on 8000.
  EXPECT_THAT(p.actions[3].detail, HasSubstr("frees 1 × 126.9 GiB on GPU 1 and port 8001 for one"));
  EXPECT_THAT(p.actions[4].detail, HasSubstr("--port 8000 → 8001"));
  EXPECT_EQ(p.actions[6].kind, ActionKind::kStart);
  EXPECT_THAT(
      p.actions[6].detail,
      HasSubstr("GPU 1, port 8000: Description changed; ExecStart changed: --port 8001 → 8000"));
  ASSERT_EQ(p.disruptions.size(), 2u);
  EXPECT_EQ(p.disruptions[0].port, 8001);
  EXPECT_EQ(p.disruptions[0].from_step, 4);
  EXPECT_EQ(p.disruptions[0].until_step, 6);
  EXPECT_EQ(p.disruptions[1].port, 8000);
  EXPECT_EQ(p.disruptions[1].from_step, 5);
  EXPECT_EQ(p.disruptions[1].until_step, 8);
  EXPECT_THAT(p.disruptions[1].reason, HasSubstr("moves it from port 8000 to port 8001"));
  Converge();
}

TEST_F(ScenarioTest, AStopFreesAPortForAServiceOnOtherGpusAndTheEndpointIsDarkUntilHealthy) {
  OneModel(2);
  Vllm("old", "a", {0}, 8000);
  Converge();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "a", {1}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "stop service/old frees_resources",
                  "start service/new not_running", "wait-healthy service/new health_gate"));
  EXPECT_THAT(p.actions[2].detail,
              HasSubstr("frees 1 × 126.9 GiB on GPU 0 and port 8000 for new (state: stopped)"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 3);
  EXPECT_EQ(p.disruptions[0].until_step, 5);
  EXPECT_EQ(p.disruptions[0].service, "service/old");
  EXPECT_THAT(p.disruptions[0].reason, HasSubstr("old.service stopped to make room for new"));
  Converge();
}

TEST_F(ScenarioTest, APortChangeClosesTheOldPortForGood) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].port = 8001;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_changed",
                                    "daemon-reload systemd unit_files_changed",
                                    "restart service/svc config_changed",
                                    "wait-healthy service/svc health_gate"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 3);
  EXPECT_EQ(p.disruptions[0].until_step, 0);
  EXPECT_THAT(p.disruptions[0].reason, HasSubstr("moves it from port 8000 to port 8001"));
  Converge();
}

TEST_F(ScenarioTest, UnknownPortsWarnAndStillSeeBerthsOwnServices) {
  OneModel(2);
  Vllm("one", "a", {0}, 8000);
  Converge();
  o.ports_known = false;
  o.ports.clear();
  Vllm("two", "a", {1}, 8000);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_THAT(p.warnings[0], HasSubstr("listening ports not observed"));
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "port 8000");
  EXPECT_THAT(p.problems[0].message, HasSubstr("held by one.service"));
}

// ---- several services -----------------------------------------------------------------------

TEST_F(ScenarioTest, SeveralRestartsEachWaitForTheirOwnHealthAndDisruptOnlyTheirPort) {
  OneModel(3);
  Vllm("a1", "a", {0}, 8000);
  Vllm("a2", "a", {1}, 8001);
  Vllm("a3", "a", {2}, 8002);
  Converge();
  for (auto& [name, s] : d.services) s.env["VLLM_USE_V1"] = "1";
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre(
          "write-unit unit/a1.service unit_changed", "write-unit unit/a2.service unit_changed",
          "write-unit unit/a3.service unit_changed", "daemon-reload systemd unit_files_changed",
          "restart service/a1 config_changed", "wait-healthy service/a1 health_gate",
          "restart service/a2 config_changed", "wait-healthy service/a2 health_gate",
          "restart service/a3 config_changed", "wait-healthy service/a3 health_gate"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("Environment changed: +\"VLLM_USE_V1=1\""));
  EXPECT_EQ(p.actions[3].detail, "3 unit files changed");
  ASSERT_EQ(p.disruptions.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.disruptions[static_cast<size_t>(i)].port, 8000 + i);
    EXPECT_EQ(p.disruptions[static_cast<size_t>(i)].from_step, 5 + 2 * i);
    EXPECT_EQ(p.disruptions[static_cast<size_t>(i)].until_step, 6 + 2 * i);
  }
  Converge();
}

TEST_F(ScenarioTest, StartsThatFitGoFirstInNameOrderAndTheOneNeedingAStopGoesAfter) {
  OneModel(2);
  Vllm("old", "a", {0}, 8000, 0.9);
  Converge();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("alpha", "a", {0}, 8001, 0.9);  // needs old's memory
  Vllm("beta", "a", {1}, 8002, 0.5);   // fits
  Vllm("gamma", "a", {1}, 8003, 0.4);  // fits beside beta
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/alpha.service unit_missing",
                  "write-unit unit/beta.service unit_missing",
                  "write-unit unit/gamma.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/beta not_running",
                  "wait-healthy service/beta health_gate", "start service/gamma not_running",
                  "wait-healthy service/gamma health_gate", "stop service/old frees_resources",
                  "start service/alpha not_running", "wait-healthy service/alpha health_gate"));
  EXPECT_THAT(p.actions[8].detail,
              HasSubstr("frees 1 × 126.9 GiB on GPU 0 and port 8000 for alpha"));
  Converge();
}

// ---- state-only and foreign units -----------------------------------------------------------

TEST_F(ScenarioTest, AStateOnlyServiceWantedRunningWhoseUnitIsMissingIsBlocked) {
  StateOnly("ghost", ServiceState::kRunning);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Steps(p), IsEmpty());
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].step, 0);
  EXPECT_EQ(p.problems[0].resource, "unit ghost.service");
  EXPECT_THAT(p.problems[0].message, HasSubstr("has no engine"));
  EXPECT_THAT(p.problems[0].message, HasSubstr("ghost.service does not exist on this host"));
}

TEST_F(ScenarioTest, AStateOnlyStopOfAForeignActiveUnitStopsItWithoutWritingIt) {
  Gpus(1, GiB(141));
  ForeignService("kimi.service", {0}, GiB(70), 8000);
  StateOnly("kimi", ServiceState::kStopped);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("stop service/kimi wanted_stopped"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("frees 1 × 70.0 GiB on GPU 0 and port 8000"));
  Converge();
  EXPECT_EQ(UnitOf("kimi.service").content_hash, "hand-written");
}

TEST_F(ScenarioTest, AnAbsentServiceWhoseForeignUnitExistsIsBlockedWithoutAdoptRemovedWithIt) {
  Gpus(1, GiB(141));
  ForeignService("x.service", {0}, GiB(10), 8000);
  StateOnly("x", ServiceState::kAbsent);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].resource, "unit x.service");
  EXPECT_THAT(p.problems[0].message, HasSubstr("berth did not write it; berth will not remove it"));
  EXPECT_THAT(p.problems[0].message, HasSubstr("adopt: true"));
  for (const auto& a : p.actions) EXPECT_NE(a.kind, ActionKind::kRemoveUnit);

  d.services["x"].adopt = true;
  p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("stop service/x wanted_absent",
                                    "remove-unit unit/x.service wanted_absent",
                                    "daemon-reload systemd unit_files_changed"));
  Converge();
  EXPECT_EQ(o.FindUnit("x.service"), nullptr);
}

// ---- revisions and engines ------------------------------------------------------------------

TEST_F(ScenarioTest, ARevisionPinnedToACommitNeedsNoHub) {
  Gpus(1, GiB(141));
  Model("a", "org/a", 2000).revision = Commit("d");
  Vllm("svc", "a", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("download model/a model_missing", "write-unit unit/svc.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/svc not_running",
                  "wait-healthy service/svc health_gate"));
  EXPECT_EQ(p.actions[0].commit, Commit("d"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("org/a@ddddddd, 2 kB"));
  EXPECT_THAT(p.warnings, IsEmpty());
  EXPECT_THAT(p.actions[1].unit_content,
              HasSubstr("/models/models--org--a/snapshots/" + Commit("d")));
  Converge();
}

TEST_F(ScenarioTest, AnSglangServiceClaimsItsMemFractionOfEachGpu) {
  Gpus(2, GiB(100));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Hold(1, 900, GiB(20));
  Sglang("sg", "a", {0, 1}, 30000, 0.85);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "gpu 1");
  EXPECT_THAT(p.problems[0].message,
              HasSubstr("needs 85.0 GiB on GPU 1 (of 100.0 GiB), only 80.0 GiB can be freed: "
                        "short by 5.0 GiB"));
  d.services["sg"].sglang.mem_fraction_static = 0.75;
  p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p),
              ElementsAre("write-unit unit/sg.service unit_missing",
                          "daemon-reload systemd unit_files_changed",
                          "start service/sg not_running", "wait-healthy service/sg health_gate"));
  EXPECT_EQ(p.actions[2].requires_.gpu_bytes.at(0), static_cast<uint64_t>(0.75 * GiB(100)));
  EXPECT_EQ(p.actions[2].requires_.gpu_bytes.at(1), static_cast<uint64_t>(0.75 * GiB(100)));
  EXPECT_THAT(p.actions[0].unit_content, HasSubstr("\"--mem-fraction-static\" \"0.75\""));
  Converge();
}

TEST_F(ScenarioTest, ACommandServiceClaimsItsGpuMemory) {
  Gpus(1, GiB(141));
  Hold(0, 555, GiB(100));
  Command("srv", {0}, 9000, GiB(30));  // 41 GiB free
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p),
              ElementsAre("write-unit unit/srv.service unit_missing",
                          "daemon-reload systemd unit_files_changed",
                          "start service/srv not_running", "wait-healthy service/srv health_gate"));
  EXPECT_EQ(p.actions[2].requires_.gpu_bytes.at(0), GiB(30));
  EXPECT_THAT(p.actions[0].unit_content, HasSubstr("ExecStart=\"/opt/srv/bin/serve\""));
  d.services["srv"].gpu_memory = GiB(50);
  Plan blocked = PlanNow();
  ASSERT_TRUE(blocked.blocked());
  EXPECT_THAT(blocked.problems[0].message, HasSubstr("needs 50.0 GiB on GPU 0"));
  EXPECT_THAT(blocked.problems[0].message, HasSubstr("short by 9.0 GiB"));
  EXPECT_THAT(blocked.problems[0].message, HasSubstr("pid 555 (python3) holds 100.0 GiB"));
  d.services["srv"].gpu_memory = GiB(30);
  Converge();
}

// ---- determinism ----------------------------------------------------------------------------

TEST_F(ScenarioTest, PlanningTheSameInputsTwiceGivesTheSamePlan) {
  OneModel(4);
  Vllm("old", "a", {0, 1}, 8000);
  Vllm("keep", "a", {2}, 8002);
  Converge();
  Model("b", "org/b");
  Hub("org/b", "main", Commit("b"), 7000);
  InStore("org/gone", Commit("9"), 300);
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "b", {0, 1}, 8000);
  Vllm("side", "b", {3}, 8003, 0.5);
  d.services["keep"].vllm.max_model_len = 4096;
  Plan p1 = PlanNow();
  Plan p2 = PlanNow();
  ASSERT_FALSE(p1.blocked()) << Problems(p1);
  EXPECT_EQ(Steps(p1), Steps(p2));
  ASSERT_EQ(p1.actions.size(), p2.actions.size());
  for (size_t i = 0; i < p1.actions.size(); ++i) {
    EXPECT_EQ(p1.actions[i].detail, p2.actions[i].detail);
    EXPECT_EQ(p1.actions[i].unit_content, p2.actions[i].unit_content);
  }
  ASSERT_EQ(p1.disruptions.size(), p2.disruptions.size());
  for (size_t i = 0; i < p1.disruptions.size(); ++i) {
    EXPECT_EQ(p1.disruptions[i].from_step, p2.disruptions[i].from_step);
    EXPECT_EQ(p1.disruptions[i].until_step, p2.disruptions[i].until_step);
    EXPECT_EQ(p1.disruptions[i].reason, p2.disruptions[i].reason);
  }
  ASSERT_EQ(p1.notes.size(), p2.notes.size());
  for (size_t i = 0; i < p1.notes.size(); ++i) EXPECT_EQ(p1.notes[i].detail, p2.notes[i].detail);
  EXPECT_THAT(
      Steps(p1),
      ElementsAre("download model/b model_missing", "write-unit unit/keep.service unit_changed",
                  "write-unit unit/new.service unit_missing",
                  "write-unit unit/side.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "restart service/keep config_changed",
                  "wait-healthy service/keep health_gate", "start service/side not_running",
                  "wait-healthy service/side health_gate", "stop service/old frees_resources",
                  "start service/new not_running", "wait-healthy service/new health_gate",
                  "remove-model model/org/gone not_in_manifest"));
  Converge();
}

}  // namespace
}  // namespace berth::testing

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(PlannerTest, WithoutObservedGpusTheManifestsInventoryDecidesStopFirst) {
  Gpus(1, GiB(80));
  d.host.gpus = GpuInventory{1, GiB(80)};
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("old", "a", {0}, 8000, 0.6);
  Converge();
  o.gpus_known = false;
  o.gpu_error = "no NVIDIA driver";
  o.gpus.clear();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "a", {0}, 8001, 0.6);  // 0.6 + 0.6 of 80 GiB does not fit beside old
  Plan p = PlanNow();
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "stop service/old frees_resources",
                  "start service/new not_running", "wait-healthy service/new health_gate"));
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_THAT(p.warnings[0], HasSubstr("manifest's host.gpus (1 × 80.0 GiB)"));
  d.services["new"].gpus = {1};
  p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(p.problems[0].message, HasSubstr("GPU 1, which this host does not have (1 GPUs)"));
}

}  // namespace
}  // namespace berth::testing

namespace berth::testing {
namespace {

TEST_F(PlannerTest, DropInsOnABerthUnitAreReportedNotRemoved) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("svc", "a", {0}, 8000);
  Converge();
  for (auto& u : o.units)
    if (u.name == "svc.service") u.drop_in_paths = {"/etc/systemd/system/svc.service.d/x.conf"};
  Plan p = PlanNow();
  EXPECT_TRUE(p.empty());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_THAT(p.warnings[0], ::testing::HasSubstr("svc.service has drop-ins berth did not write "
                                                  "(/etc/systemd/system/svc.service.d/x.conf)"));
}

}  // namespace
}  // namespace berth::testing
