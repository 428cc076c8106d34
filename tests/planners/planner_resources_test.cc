// Planner scenarios about GPU memory, ports and the order of starts and stops.
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST_F(ScenarioTest, AnUnmanagedProcessFitsWhenTheClaimFitsAndBlocksWhenNot) {
  OneModel();
  Hold(0, 777, GiB(10));  // 141 − 10 = 131 GiB free ≥ 126.9 GiB claimed
  Vllm("svc", "a", {0}, 8000, 0.9);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/svc.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/svc not_running",
                  "wait-healthy service/svc health_gate", "enable unit/svc.service not_enabled"));
  EXPECT_EQ(p.actions[2].requires_.gpu_bytes.at(0), static_cast<uint64_t>(0.9 * GiB(141)));

  Hold(0, 778, GiB(10));  // now 121 GiB free
  p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].resource, "gpu 0");
  EXPECT_EQ(p.problems[0].step, 2u);
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
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/svc.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/svc not_running",
                  "wait-healthy service/svc health_gate", "enable unit/svc.service not_enabled"));
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "gpu 5");
  EXPECT_EQ(p.problems[0].step, 2u);
  EXPECT_THAT(p.problems[0].message,
              HasSubstr("service/svc asks for GPU 5, which this host does not have (2 GPUs)"));
}

TEST_F(ScenarioTest, UnknownGpusWarnAndSkipTheGpuCheck) {
  Model("a", "org/a").revision = Commit("a");  // pinned: no warning says it is not
  InStore("org/a", Commit("a"), 1000);
  o.gpus_known = false;
  o.gpu_error = "NVML: libnvidia-ml.so.1 not found";
  Vllm("svc", "a", {0, 1}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/svc.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/svc not_running",
                  "wait-healthy service/svc health_gate", "enable unit/svc.service not_enabled"));
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
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/two.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/two not_running",
                  "wait-healthy service/two health_gate", "enable unit/two.service not_enabled"));
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "port 8000");
  EXPECT_EQ(p.problems[0].step, 2u);
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
  // one runs on GPU 0: two frees only the port for it; its GPU memory is freed apart.
  EXPECT_EQ(p.actions[3].detail,
            "frees port 8001 for one; also frees 1 × 126.9 GiB on GPU 1 (Description changed; "
            "ExecStart changed: --port 8001 → 8000)");
  EXPECT_THAT(p.actions[4].detail, HasSubstr("--port 8000 → 8001"));
  EXPECT_EQ(p.actions[6].kind, ActionKind::kStart);
  EXPECT_THAT(
      p.actions[6].detail,
      HasSubstr("GPU 1, port 8000: Description changed; ExecStart changed: --port 8001 → 8000"));
  ASSERT_EQ(p.disruptions.size(), 2u);
  EXPECT_EQ(p.disruptions[0].port, 8001);
  EXPECT_EQ(p.disruptions[0].from_step, 3u);
  EXPECT_EQ(p.disruptions[0].until_step, 5u);
  EXPECT_EQ(p.disruptions[1].port, 8000);
  EXPECT_EQ(p.disruptions[1].from_step, 4u);
  EXPECT_EQ(p.disruptions[1].until_step, 7u);
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
                  "start service/new not_running", "wait-healthy service/new health_gate",
                  "enable unit/new.service not_enabled",
                  "disable unit/old.service wanted_stopped"));
  EXPECT_EQ(p.actions[2].detail,
            "frees port 8000 for new; also frees 1 × 126.9 GiB on GPU 0 (state: stopped)")
      << "new runs on GPU 1: what old frees on GPU 0 is not for it";
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 2u);
  EXPECT_EQ(p.disruptions[0].until_step, 4u);
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
  EXPECT_EQ(p.disruptions[0].from_step, 2u);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt);
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
  for (auto& [name, s] : d.services) s.env["SAFETENSORS_FAST_GPU"] = "1";
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
  EXPECT_THAT(p.actions[0].detail, HasSubstr("Environment changed: +\"SAFETENSORS_FAST_GPU=1\""));
  EXPECT_EQ(p.actions[3].detail, "3 unit files changed");
  ASSERT_EQ(p.disruptions.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.disruptions[static_cast<size_t>(i)].port, 8000 + i);
    EXPECT_EQ(p.disruptions[static_cast<size_t>(i)].from_step, static_cast<size_t>(4 + 2 * i));
    EXPECT_EQ(p.disruptions[static_cast<size_t>(i)].until_step, static_cast<size_t>(5 + 2 * i));
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
      ElementsAre(
          "write-unit unit/alpha.service unit_missing", "write-unit unit/beta.service unit_missing",
          "write-unit unit/gamma.service unit_missing", "daemon-reload systemd unit_files_changed",
          "start service/beta not_running", "wait-healthy service/beta health_gate",
          "enable unit/beta.service not_enabled", "start service/gamma not_running",
          "wait-healthy service/gamma health_gate", "enable unit/gamma.service not_enabled",
          "stop service/old frees_resources", "start service/alpha not_running",
          "wait-healthy service/alpha health_gate", "enable unit/alpha.service not_enabled",
          "disable unit/old.service wanted_stopped"));
  EXPECT_EQ(p.actions[10].detail,
            "frees 1 × 126.9 GiB on GPU 0 for alpha; port 8000 goes dark with it (state: "
            "stopped)")
      << "alpha serves port 8001: old's port 8000 is not freed for it";
  Converge();
}

// ---- state-only and foreign units -----------------------------------------------------------

TEST_F(ScenarioTest, AStateOnlyServiceWantedRunningWhoseUnitIsMissingIsBlocked) {
  StateOnly("ghost", ServiceState::kRunning);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Steps(p), IsEmpty());
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].step, std::nullopt);
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
                  "wait-healthy service/svc health_gate", "enable unit/svc.service not_enabled"));
  EXPECT_EQ(p.actions[0].As<DownloadStep>().commit, Commit("d"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("org/a@ddddddd, 2 kB"));
  EXPECT_THAT(p.warnings, IsEmpty());
  EXPECT_THAT(p.actions[1].As<UnitFileStep>().content,
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
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/sg.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/sg not_running",
                  "wait-healthy service/sg health_gate", "enable unit/sg.service not_enabled"));
  EXPECT_EQ(p.actions[2].requires_.gpu_bytes.at(0), static_cast<uint64_t>(0.75 * GiB(100)));
  EXPECT_EQ(p.actions[2].requires_.gpu_bytes.at(1), static_cast<uint64_t>(0.75 * GiB(100)));
  EXPECT_THAT(p.actions[0].As<UnitFileStep>().content,
              HasSubstr("\"--mem-fraction-static\" \"0.75\""));
  Converge();
}

TEST_F(ScenarioTest, ACommandServiceClaimsItsGpuMemory) {
  Gpus(1, GiB(141));
  Hold(0, 555, GiB(100));
  Command("srv", {0}, 9000, GiB(30));  // 41 GiB free
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/srv.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/srv not_running",
                  "wait-healthy service/srv health_gate", "enable unit/srv.service not_enabled"));
  EXPECT_EQ(p.actions[2].requires_.gpu_bytes.at(0), GiB(30));
  EXPECT_THAT(p.actions[0].As<UnitFileStep>().content,
              HasSubstr("ExecStart=\"/opt/srv/bin/serve\""));
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
    EXPECT_TRUE(p1.actions[i].step == p2.actions[i].step) << "step " << i + 1;
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
                  "wait-healthy service/side health_gate", "enable unit/side.service not_enabled",
                  "stop service/old frees_resources", "start service/new not_running",
                  "wait-healthy service/new health_gate", "enable unit/new.service not_enabled",
                  "disable unit/old.service wanted_stopped",
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
  Model("a", "org/a").revision = Commit("a");  // pinned: no warning says it is not
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
                  "start service/new not_running", "wait-healthy service/new health_gate",
                  "enable unit/new.service not_enabled",
                  "disable unit/old.service wanted_stopped"));
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
  Model("a", "org/a").revision = Commit("a");  // pinned: no warning says it is not
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
