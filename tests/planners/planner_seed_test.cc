// The scenarios of DESIGN.md and the core rules of order: each asserts the exact actions,
// their order and their reasons.
#include "tests/planners/planner_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class SeedTest : public PlannerTest {
 protected:
  // The blackwell-8x host: Kimi running by hand on 8 × 96 GiB, MiniMax wanted instead.
  void SetUpSeed() {
    Gpus(8, GiB(96));
    o.store.total_bytes = 1'700'000'000'000;
    o.store.free_bytes = 1'200'000'000'000;
    d.host.reserve_bytes = GiB(100);
    Model("kimi-k25-nvfp4", "nvidia/Kimi-K2.5-NVFP4").keep = true;
    InStore("nvidia/Kimi-K2.5-NVFP4", Commit("a"), 540'000'000'000, true, {"main"}, false);
    Model("minimax-m25", "MiniMaxAI/MiniMax-M2.5");
    Hub("MiniMaxAI/MiniMax-M2.5", "main", Commit("b"), 230'000'000'000);
    ForeignService("vllm-kimi-k25.service", {0, 1, 2, 3, 4, 5, 6, 7}, GiB(73.7), 8000);
    StateOnly("vllm-kimi-k25", ServiceState::kStopped);
    ServiceSpec& s = Vllm("vllm-minimax-m25", "minimax-m25", {0, 1, 2, 3, 4, 5, 6, 7}, 8000);
    s.vllm.enable_expert_parallel = true;
  }
};

TEST_F(SeedTest, KimiToMinimaxOnFullGpusDownloadsFirstThenStopsThenStarts) {
  SetUpSeed();
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("download model/minimax-m25 model_missing",
                                    "write-unit unit/vllm-minimax-m25.service unit_missing",
                                    "daemon-reload systemd unit_files_changed",
                                    "stop service/vllm-kimi-k25 frees_resources",
                                    "start service/vllm-minimax-m25 not_running",
                                    "wait-healthy service/vllm-minimax-m25 health_gate",
                                    "enable unit/vllm-minimax-m25.service not_enabled"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("230 GB"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("fits"));
  EXPECT_EQ(p.actions[0].As<DownloadStep>().commit, Commit("b"));
  EXPECT_THAT(p.actions[3].detail,
              HasSubstr("frees 8 × 73.7 GiB on GPU 0-7 and port 8000 for vllm-minimax-m25"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 3u);
  EXPECT_EQ(p.disruptions[0].until_step, 5u);
  // Kimi's weights stay: keep: true, and berth did not download them anyway. MiniMax's are not
  // prewarmed: this world says nothing of the host's memory (the seed's observation does).
  ASSERT_EQ(p.notes.size(), 2u);
  EXPECT_EQ(p.notes[0].address, "model/kimi-k25-nvfp4");
  EXPECT_THAT(p.notes[0].detail, HasSubstr("keep: true"));
  EXPECT_EQ(p.notes[1].address, "service/vllm-minimax-m25");
  EXPECT_EQ(p.notes[1].verb, "no prewarm");
  EXPECT_THAT(p.notes[1].detail, HasSubstr("host memory was not observed"));
  Converge();
}

TEST_F(SeedTest, BackToKimiWhenKimiBecomesBerthsService) {
  SetUpSeed();
  Converge();
  // The operator now describes Kimi fully and stops MiniMax.
  d.services["vllm-minimax-m25"].state = ServiceState::kStopped;
  d.services.erase("vllm-kimi-k25");
  ServiceSpec& k = Vllm("vllm-kimi-k25", "kimi-k25-nvfp4", {0, 1, 2, 3, 4, 5, 6, 7}, 8000);
  k.adopt = true;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/vllm-kimi-k25.service unit_adopted",
                                    "daemon-reload systemd unit_files_changed",
                                    "stop service/vllm-minimax-m25 frees_resources",
                                    "start service/vllm-kimi-k25 not_running",
                                    "wait-healthy service/vllm-kimi-k25 health_gate",
                                    "enable unit/vllm-kimi-k25.service not_enabled",
                                    "disable unit/vllm-minimax-m25.service wanted_stopped"));
  Converge();
}

TEST_F(PlannerTest, StartFirstWhenTheGpusHaveRoom) {
  Gpus(2, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Model("b", "org/b");
  InStore("org/b", Commit("b"), 1000);
  Vllm("old", "a", {0}, 8000, 0.45);
  Converge();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "b", {1}, 8001, 0.9);
  Plan p = PlanNow();
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/new not_running",
                  "wait-healthy service/new health_gate", "enable unit/new.service not_enabled",
                  "stop service/old wanted_stopped", "disable unit/old.service wanted_stopped"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt);
  Converge();
}

TEST_F(PlannerTest, StartFirstOnTheSameGpuWhenBothClaimsFit) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("old", "a", {0}, 8000, 0.4);
  Converge();
  d.services["old"].state = ServiceState::kAbsent;
  Vllm("new", "a", {0}, 8001, 0.5);
  Plan p = PlanNow();
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/new not_running",
                  "wait-healthy service/new health_gate", "enable unit/new.service not_enabled",
                  "stop service/old wanted_absent", "disable unit/old.service wanted_absent",
                  "remove-unit unit/old.service wanted_absent"));
  Converge();
}

TEST_F(PlannerTest, StopFirstWhenTheGpuIsFull) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("old", "a", {0}, 8000, 0.9);
  Converge();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "a", {0}, 8001, 0.9);
  Plan p = PlanNow();
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "stop service/old frees_resources",
                  "start service/new not_running", "wait-healthy service/new health_gate",
                  "enable unit/new.service not_enabled",
                  "disable unit/old.service wanted_stopped"));
  EXPECT_THAT(p.actions[2].detail, HasSubstr("for new"));
  Converge();
}

TEST_F(PlannerTest, NothingToDoWhenConverged) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("svc", "a", {0}, 8000);
  Converge();
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), IsEmpty());
  EXPECT_FALSE(p.blocked());
  EXPECT_THAT(p.disruptions, IsEmpty());
}

TEST_F(PlannerTest, AChangedFlagRestartsOnlyThatService) {
  Gpus(2, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("one", "a", {0}, 8000);
  Vllm("two", "a", {1}, 8001);
  Converge();
  d.services["two"].vllm.max_model_len = 32768;
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/two.service unit_changed",
                                    "daemon-reload systemd unit_files_changed",
                                    "restart service/two config_changed",
                                    "wait-healthy service/two health_gate"));
  EXPECT_THAT(p.actions[0].detail, HasSubstr("ExecStart changed: +--max-model-len 32768"));
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8001);
  EXPECT_EQ(p.disruptions[0].from_step, 2u);
  EXPECT_EQ(p.disruptions[0].until_step, 3u);
  Converge();
}

TEST_F(PlannerTest, APortChangeShowsOldAndNewValues) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].port = 8001;
  Plan p = PlanNow();
  EXPECT_THAT(p.actions[0].detail, HasSubstr("--port 8000 → 8001"));
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_changed",
                                    "daemon-reload systemd unit_files_changed",
                                    "restart service/svc config_changed",
                                    "wait-healthy service/svc health_gate"));
  Converge();
}

TEST_F(PlannerTest, DiskShortByOneByteIsBlocked) {
  Model("big", "org/big");
  Hub("org/big", "main", Commit("c"), 500);
  d.host.reserve_bytes = 100;
  o.store.free_bytes = 599;  // 599 − 100 = 499 available, 500 needed
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].step, 0u);
  EXPECT_EQ(p.problems[0].resource, "disk");
  EXPECT_EQ(p.problems[0].needed, 500u);
  EXPECT_EQ(p.problems[0].available, 499u);
  EXPECT_THAT(p.problems[0].message, HasSubstr("short by 1 B (1 bytes)"));
  o.store.free_bytes = 600;
  EXPECT_FALSE(PlanNow().blocked());
}

TEST_F(PlannerTest, AnUnmanagedProcessOnAGpuBlocksWithItsPidAndMemory) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  Hold(0, 777, GiB(40));
  Vllm("svc", "a", {0}, 8000, 0.9);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].resource, "gpu 0");
  EXPECT_EQ(p.problems[0].step, 2u);
  EXPECT_THAT(p.problems[0].message, HasSubstr("pid 777 (python3) holds 40.0 GiB"));
  EXPECT_THAT(p.problems[0].message, HasSubstr("short by"));
}

TEST_F(PlannerTest, APortHeldByAnotherProcessBlocks) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  o.ports.push_back({8000, "0.0.0.0", 321, "nginx", ""});
  Vllm("svc", "a", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_EQ(p.problems[0].resource, "port 8000");
  EXPECT_THAT(p.problems[0].message, HasSubstr("held by pid 321 (nginx)"));
}

TEST_F(PlannerTest, AForeignUnitOfTheSameNameIsNotOverwrittenWithoutAdopt) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  ForeignService("svc.service", {}, 0, 0, false);
  Vllm("svc", "a", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_EQ(p.problems[0].resource, "unit svc.service");
  EXPECT_THAT(p.problems[0].message, HasSubstr("adopt: true"));
  for (const auto& a : p.actions) EXPECT_NE(a.kind, ActionKind::kWriteUnit);
  d.services["svc"].adopt = true;
  o.units.back().content = "[Service]\nExecStart=/opt/by-hand\n";
  p = PlanNow();
  EXPECT_FALSE(p.blocked());
  EXPECT_EQ(Steps(p)[0], "write-unit unit/svc.service unit_adopted");
  // What it replaces travels with it, for the reviewer's diff.
  EXPECT_EQ(p.actions[0].As<UnitFileStep>().old_content, "[Service]\nExecStart=/opt/by-hand\n");
  EXPECT_EQ(p.actions[0].As<UnitFileStep>().old_note, "");
}

// Another state directory's berth unit is foreign too: its lineage line, stamped at write, is
// not shown as a change; a file whose text the observation lacks says why.
TEST_F(PlannerTest, AnAdoptedUnitCarriesItsOldTextWithoutTheLineageOrWhyItHasNone) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 1000);
  ForeignService("svc.service", {}, 0, 0, false);
  ObservedUnit& u = o.units.back();
  u.content = "# Managed by berth 0.1.0\n# berth-spec-hash: 1\n# berth-lineage: ffff\n[Unit]\n";
  u.managed = true;
  u.lineage = "ffff";
  Vllm("svc", "a", {0}, 8000).adopt = true;
  Plan p = PlanNow();
  ASSERT_EQ(Steps(p)[0], "write-unit unit/svc.service unit_adopted") << Problems(p);
  EXPECT_EQ(p.actions[0].As<UnitFileStep>().old_content,
            "# Managed by berth 0.1.0\n# berth-spec-hash: 1\n[Unit]\n");
  u.managed = false;
  u.lineage.clear();
  u.content.clear();
  u.content_note = "the file is larger than 64 KiB (70000 bytes)";
  p = PlanNow();
  EXPECT_EQ(p.actions[0].As<UnitFileStep>().old_note,
            "the file is larger than 64 KiB (70000 bytes)");
}

TEST_F(PlannerTest, AModelDroppedWithKeepFalseIsRemovedLastAfterItsServiceStops) {
  Gpus(1, GiB(141));
  Model("a", "org/a");
  InStore("org/a", Commit("a"), 5000);
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.models["a"].keep = false;
  d.services["svc"].state = ServiceState::kStopped;
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), ElementsAre("stop service/svc wanted_stopped",
                                    "disable unit/svc.service wanted_stopped",
                                    "remove-model model/a not_used"));
  EXPECT_EQ(p.actions[2].frees.disk_bytes, 5000u);
  Converge();
}

TEST_F(PlannerTest, ARevisionChangeDownloadsRestartsAndPrunesTheOldOneLastWhenNoneIsKept) {
  Gpus(1, GiB(141));
  d.host.keep_revisions = 0;  // no revision kept for a rollback (planner_pins_test.cc keeps one)
  Model("a", "org/a");
  Hub("org/a", "main", Commit("1"), 1000);
  Vllm("svc", "a", {0}, 8000);
  Converge();
  o.hub.clear();
  Hub("org/a", "main", Commit("2"), 1200);
  Plan p = PlanNow();
  EXPECT_THAT(
      Steps(p),
      ElementsAre("download model/a revision_changed", "write-unit unit/svc.service unit_changed",
                  "daemon-reload systemd unit_files_changed", "restart service/svc model_updated",
                  "wait-healthy service/svc health_gate", "remove-model model/a old_revision"));
  EXPECT_EQ(p.actions[5].As<RemoveModelStep>().commit, Commit("1"));
  EXPECT_THAT(p.actions[1].detail, HasSubstr("snapshots/" + Commit("2")));
  Converge();
}

TEST_F(PlannerTest, AFleetFileWhoseMatchExcludesThisHostPlansNothing) {
  Gpus(1, GiB(141));
  d.host.match["hostname"] = "gpu-b*";
  Model("a", "org/a");
  Vllm("svc", "a", {0}, 8000);
  Plan p = PlanNow();
  EXPECT_FALSE(p.host_matches);
  EXPECT_THAT(Steps(p), IsEmpty());
  EXPECT_THAT(p.skip_reason, HasSubstr("'gpu-b*' does not match host 'gpu-01'"));
  d.host.match["hostname"] = "gpu-*";
  EXPECT_FALSE(PlanNow().empty());
}

}  // namespace
}  // namespace berth::testing
