// State-only services (no engine: berth starts or stops a unit it does not write): the port and
// GPUs berth learns while they run or the manifest declares, the stop-first order and health
// gate they give a switch back, and disruption texts that are always true.
#include "planners/state_only.h"
#include "tests/planners/planner_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

const std::vector<int> kAll = {0, 1, 2, 3, 4, 5, 6, 7};

// The seed host: Kimi running by hand (state-only) on 8 × 96 GiB and port 8000; MiniMax is
// berth's, on the same GPUs and port.
class StateOnlyTest : public PlannerTest {
 protected:
  void SetUpSeed() {
    Gpus(8, GiB(96));
    Model("kimi-k25-nvfp4", "nvidia/Kimi-K2.5-NVFP4");
    InStore("nvidia/Kimi-K2.5-NVFP4", Commit("a"), 540'000'000'000, true, {"main"}, false);
    Model("minimax-m25", "MiniMaxAI/MiniMax-M2.5");
    InStore("MiniMaxAI/MiniMax-M2.5", Commit("b"), 230'000'000'000);
    ForeignService("vllm-kimi-k25.service", kAll, GiB(73.7), 8000);
    StateOnly("vllm-kimi-k25", ServiceState::kStopped).loc = {"berth.yaml", 20, 3};
    Vllm("vllm-minimax-m25", "minimax-m25", kAll, 8000);
    // Pinned in berth.lock, so the plans hold no "not pinned" warnings.
    d.locks["kimi-k25-nvfp4"] = {"nvidia/Kimi-K2.5-NVFP4", "main", Commit("a"),
                                 "2026-12-01T06:00:00Z"};
    d.locks["minimax-m25"] = {"MiniMaxAI/MiniMax-M2.5", "main", Commit("b"),
                              "2026-12-01T06:00:00Z"};
  }
  // Kimi to MiniMax, with berth learning what Kimi held as an apply does before it acts.
  void SwitchToMinimax() {
    LearnStateOnly(d, o, &o.state.learned);
    Converge();
  }
  /// Forgets what a unit holds (GPU memory, ports), as when its process died.
  void DropHoldsOf(const std::string& unit) {
    for (auto& g : o.gpus) {
      for (const auto& p : g.processes)
        if (p.unit == unit) g.memory_used -= p.used_bytes;
      std::erase_if(g.processes, [&](const GpuProcess& p) { return p.unit == unit; });
    }
    std::erase_if(o.ports, [&](const ListeningPort& p) { return p.unit == unit; });
  }
  void WantKimiBack() {
    d.services["vllm-kimi-k25"].state = ServiceState::kRunning;
    d.services["vllm-minimax-m25"].state = ServiceState::kStopped;
  }
};

TEST_F(StateOnlyTest, WhatARunningStateOnlyServiceHoldsIsLearnedAndKeptWhenNotSeen) {
  SetUpSeed();
  std::map<std::string, LearnedService> learned;
  ASSERT_TRUE(LearnStateOnly(d, o, &learned));
  ASSERT_EQ(learned.size(), 1u) << "only the state-only service; MiniMax is berth's";
  const LearnedService& k = learned.at("vllm-kimi-k25.service");
  EXPECT_THAT(k.ports, ElementsAre(8000));
  ASSERT_EQ(k.gpu_bytes.size(), 8u);
  EXPECT_EQ(k.gpu_bytes.at(7), GiB(73.7));
  EXPECT_FALSE(LearnStateOnly(d, o, &learned)) << "nothing new";
  // Restarted by hand and still loading: on its GPUs, no port open yet. The port stays known.
  std::erase_if(o.ports, [](const ListeningPort& p) { return p.port == 8000; });
  for (auto& g : o.gpus) g.processes[0].used_bytes = GiB(10);
  ASSERT_TRUE(LearnStateOnly(d, o, &learned));
  EXPECT_THAT(learned.at("vllm-kimi-k25.service").ports, ElementsAre(8000));
  EXPECT_EQ(learned.at("vllm-kimi-k25.service").gpu_bytes.at(0), GiB(10));
  // Stopped: nothing is seen, everything is kept.
  o.units[0].active_state = "inactive";
  EXPECT_FALSE(LearnStateOnly(d, o, &learned));
}

TEST_F(StateOnlyTest, BackToALearnedStateOnlyServiceStopsTheHolderFirstThenGatesItsStart) {
  SetUpSeed();
  d.services["vllm-kimi-k25"].state = ServiceState::kStopped;
  SwitchToMinimax();
  WantKimiBack();
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("stop service/vllm-minimax-m25 frees_resources",
                                    "start service/vllm-kimi-k25 not_running",
                                    "wait-healthy service/vllm-kimi-k25 health_gate",
                                    "disable unit/vllm-minimax-m25.service wanted_stopped"));
  EXPECT_EQ(p.actions[0].detail,
            "frees 8 × 86.4 GiB on GPU 0-7 and port 8000 for vllm-kimi-k25 (state: stopped)");
  EXPECT_EQ(p.actions[1].detail,
            "GPU 0-7, port 8000: not running (no engine: port, GPUs and GPU memory as berth saw "
            "it run)");
  EXPECT_EQ(p.actions[1].requires_.gpu_bytes.at(0), GiB(73.7));
  const Action& gate = p.actions[2];
  EXPECT_EQ(gate.As<HealthStep>().port, 8000);
  EXPECT_EQ(gate.As<HealthStep>().path, "/health");
  EXPECT_EQ(gate.As<HealthStep>().served_name, "") << "berth does not know what Kimi serves";
  EXPECT_EQ(gate.detail, "GET /health until 200 (timeout 30m)");
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 0u);
  EXPECT_EQ(p.disruptions[0].until_step, 2u) << "Kimi serves port 8000 again";
  EXPECT_EQ(p.disruptions[0].reason,
            "vllm-minimax-m25.service stopped to make room for vllm-kimi-k25");
  EXPECT_THAT(p.warnings, IsEmpty());
}

TEST_F(StateOnlyTest, DeclaredPortGpusAndMemoryWinOverWhatWasLearned) {
  SetUpSeed();
  SwitchToMinimax();
  WantKimiBack();
  ServiceSpec& k = d.services["vllm-kimi-k25"];
  k.port = 8001;
  k.gpus = {0, 1};
  k.gpu_memory = GiB(5);  // fits beside MiniMax: Kimi starts first
  k.health.path = "/ready";
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("start service/vllm-kimi-k25 not_running",
                                    "wait-healthy service/vllm-kimi-k25 health_gate",
                                    "stop service/vllm-minimax-m25 wanted_stopped",
                                    "disable unit/vllm-minimax-m25.service wanted_stopped"));
  EXPECT_EQ(p.actions[0].detail,
            "GPU 0,1, port 8001: not running (no engine: port, GPUs and GPU memory from the "
            "manifest)");
  EXPECT_THAT(p.actions[0].requires_.gpu_bytes,
              UnorderedElementsAre(Pair(0, GiB(5)), Pair(1, GiB(5))));
  EXPECT_EQ(p.actions[1].As<HealthStep>().port, 8001);
  EXPECT_EQ(p.actions[1].detail, "GET /ready until 200 (timeout 30m)");
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt)
      << "nothing of this plan serves 8000 afterwards";
  EXPECT_EQ(p.disruptions[0].caveat, "") << "Kimi's port is known: 8001";
  EXPECT_EQ(p.disruptions[0].reason, "vllm-minimax-m25.service stopped (state: stopped)");
}

TEST_F(StateOnlyTest, StartingAStateOnlyServiceBerthNeverSawRunWarnsWhatIsUnknown) {
  SetUpSeed();
  o.units[0].active_state = "inactive";  // never seen running by berth
  DropHoldsOf("vllm-kimi-k25.service");
  Converge();
  WantKimiBack();
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("start service/vllm-kimi-k25 not_running",
                                    "stop service/vllm-minimax-m25 wanted_stopped",
                                    "disable unit/vllm-minimax-m25.service wanted_stopped"))
      << "no gate: berth cannot tell when it serves";
  EXPECT_EQ(p.actions[0].detail, "not running (no engine)");
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt);
  EXPECT_EQ(p.disruptions[0].caveat,
            "service/vllm-kimi-k25 starts at step 1 on a port berth does not know")
      << "berth cannot say nothing serves 8000 afterwards";
  EXPECT_THAT(p.warnings,
              ElementsAre("service/vllm-kimi-k25 has no engine and berth has never seen it run: "
                          "its port and GPUs are unknown, so nothing that holds them is stopped "
                          "before it starts and no health gate follows its start. Declare port:, "
                          "gpus: and gpu_memory: on it (berth.yaml:20:3)"));
}

TEST_F(StateOnlyTest, KnownGpusWithoutMemoryAreOrderedStopFirstAndTheMemoryIsAskedFor) {
  SetUpSeed();
  o.units[0].active_state = "inactive";
  DropHoldsOf("vllm-kimi-k25.service");
  Converge();
  WantKimiBack();
  d.services["vllm-kimi-k25"].gpus = kAll;
  d.services["vllm-kimi-k25"].port = 8000;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("stop service/vllm-minimax-m25 frees_resources",
                                    "start service/vllm-kimi-k25 not_running",
                                    "wait-healthy service/vllm-kimi-k25 health_gate",
                                    "disable unit/vllm-minimax-m25.service wanted_stopped"));
  EXPECT_THAT(p.warnings,
              ElementsAre("service/vllm-kimi-k25 has no engine and its GPU memory is unknown: "
                          "what this plan stops on its GPUs stops before it starts. Declare "
                          "gpu_memory: on it (berth.yaml:20:3)"));
}

TEST_F(StateOnlyTest, AStateOnlyServiceThatStaysStoppedNeedsNothingAndWarnsNothing) {
  SetUpSeed();
  o.units[0].active_state = "inactive";
  DropHoldsOf("vllm-kimi-k25.service");
  Plan p = Converge();
  EXPECT_THAT(p.warnings, IsEmpty());
}

// ---- start-first, explained exactly -------------------------------------------------------

TEST_F(StateOnlyTest, StartFirstOnASharedPortSaysThePortIsHeldUntilTheOldOneStops) {
  SetUpSeed();
  d.services["vllm-kimi-k25"].state = ServiceState::kStopped;
  d.services["vllm-minimax-m25"].strategy = Strategy::kStartFirst;
  Plan p = PlanNow();
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "strategy");
  EXPECT_EQ(p.problems[0].message,
            "service/vllm-minimax-m25 has strategy: start-first, but it cannot start while "
            "vllm-kimi-k25.service runs: port 8000 is held by vllm-kimi-k25.service until it "
            "stops; GPU 0-7: needs 86.4 GiB each, 22.3 GiB free while vllm-kimi-k25.service "
            "runs. Use strategy: auto or stop-first");
}

TEST_F(StateOnlyTest, StartFirstShortOfGpuMemorySaysByHowMuchOnWhichGpus) {
  SetUpSeed();
  d.services["vllm-kimi-k25"].state = ServiceState::kStopped;
  ServiceSpec& m = d.services["vllm-minimax-m25"];
  m.strategy = Strategy::kStartFirst;
  m.port = 8001;
  Plan p = PlanNow();
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].message,
            "service/vllm-minimax-m25 has strategy: start-first, but it cannot start while "
            "vllm-kimi-k25.service runs: GPU 0-7: needs 86.4 GiB each, 22.3 GiB free while "
            "vllm-kimi-k25.service runs. Use strategy: auto or stop-first");
}

// ---- disruption texts are true ------------------------------------------------------------

TEST_F(StateOnlyTest, AStopFirstSwitchToAnotherPortDoesNotSayItFreesTheOldPortForTheNewService) {
  SetUpSeed();
  d.services["vllm-kimi-k25"].state = ServiceState::kStopped;
  d.services["vllm-minimax-m25"].port = 8001;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("write-unit unit/vllm-minimax-m25.service unit_missing",
                                    "daemon-reload systemd unit_files_changed",
                                    "stop service/vllm-kimi-k25 frees_resources",
                                    "start service/vllm-minimax-m25 not_running",
                                    "wait-healthy service/vllm-minimax-m25 health_gate",
                                    "enable unit/vllm-minimax-m25.service not_enabled"));
  EXPECT_EQ(p.actions[2].detail,
            "frees 8 × 73.7 GiB on GPU 0-7 for vllm-minimax-m25; port 8000 goes dark with it "
            "(state: stopped)");
  ASSERT_EQ(p.disruptions.size(), 1u) << "8001 served nobody before: only 8000 goes dark";
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].from_step, 2u);
  EXPECT_EQ(p.disruptions[0].until_step, std::nullopt);
  EXPECT_EQ(p.disruptions[0].reason,
            "vllm-kimi-k25.service stopped (state: stopped) to make room for "
            "vllm-minimax-m25, which serves port 8001");
  Converge();
}

TEST_F(StateOnlyTest, EveryPortThatGoesDarkWithAStopIsNamed) {
  SetUpSeed();
  o.ports.push_back({9000, "0.0.0.0", 4000, "vllm", "vllm-kimi-k25.service"});  // its metrics
  d.services["vllm-minimax-m25"].port = 8001;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_EQ(At(p, "stop service/vllm-kimi-k25 frees_resources").detail,
            "frees 8 × 73.7 GiB on GPU 0-7 for vllm-minimax-m25; ports 8000 and 9000 go dark with "
            "it (state: stopped)");
  ASSERT_EQ(p.disruptions.size(), 2u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[1].port, 9000);
}

}  // namespace
}  // namespace berth::testing
