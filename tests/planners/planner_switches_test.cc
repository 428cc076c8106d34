// The switches the planner states (core/plan.h Switch): for each service a plan starts or
// restarts, its mode, its steps, its gates, what it replaces with that service's own gate, its
// undo, whether it needs the fleet's turn and its side-by-side group. The executor runs them as
// stated and works out nothing, so each is asserted here exactly.
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const Switch& SwitchOf(const Plan& p, const std::string& address) {
  for (const Switch& sw : p.switches)
    if (sw.address == address) return sw;
  ADD_FAILURE() << "no switch of " << address;
  static Switch none;
  return none;
}

TEST_F(ScenarioTest, AStopFirstSwitchReplacesTheStoppedServiceWithItsOwnGate) {
  OneModel();
  Vllm("old", "a", {0}, 8000, 0.45);
  Converge();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "a", {0}, 8001, 0.45).strategy = Strategy::kStopFirst;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  ASSERT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "stop service/old frees_resources",
                  "start service/new not_running", "wait-healthy service/new health_gate",
                  "enable unit/new.service not_enabled",
                  "disable unit/old.service wanted_stopped"));
  ASSERT_EQ(p.switches.size(), 1u);
  const Switch& sw = p.switches[0];
  EXPECT_EQ(sw.address, "service/new");
  EXPECT_EQ(sw.unit, "new.service");
  EXPECT_EQ(sw.mode, SwitchMode::kStopFirst);
  EXPECT_THAT(sw.steps, ElementsAre(2u, 3u, 4u, 5u, 6u));
  EXPECT_EQ(sw.start, 3u);
  EXPECT_THAT(sw.gates, ElementsAre(4u));
  EXPECT_FALSE(sw.restores_unit);
  EXPECT_TRUE(sw.needs_turn);
  EXPECT_EQ(sw.group, -1);
  ASSERT_EQ(sw.replaces.size(), 1u);
  const Replaced& old = sw.replaces[0];
  EXPECT_EQ(old.address, "service/old");
  EXPECT_EQ(old.unit, "old.service");
  EXPECT_EQ(old.stop_step, 2u);
  EXPECT_EQ(old.gate.port, 8000);
  EXPECT_EQ(old.gate.path, "/health");
  EXPECT_GT(old.gate.timeout_ms, 0u);
  // The stop itself carries no gate (its payload is a service step's): the switch does.
  const Action& stop = p.actions[2];
  EXPECT_TRUE(std::holds_alternative<ServiceStep>(stop.step));
  EXPECT_EQ(stop.As<ServiceStep>().for_service, "new");
  EXPECT_TRUE(stop.takes_down);
  EXPECT_FALSE(p.actions[3].takes_down) << "new serves 8001, which was not dark";
  EXPECT_FALSE(p.actions[4].takes_down);
  EXPECT_THAT(p.groups, IsEmpty());
}

TEST_F(ScenarioTest, ANewServiceThatFitsBesideTheOldStartsFirstAndTheOldStopsAfterItsGates) {
  OneModel();
  Vllm("old", "a", {0}, 8000, 0.45);
  Converge();
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "a", {0}, 8001, 0.45);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  ASSERT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/new not_running",
                  "wait-healthy service/new health_gate", "enable unit/new.service not_enabled",
                  "stop service/old wanted_stopped", "disable unit/old.service wanted_stopped"));
  ASSERT_EQ(p.switches.size(), 1u);
  const Switch& sw = p.switches[0];
  EXPECT_EQ(sw.mode, SwitchMode::kStartFirst);
  EXPECT_THAT(sw.steps, ElementsAre(2u, 3u, 4u));
  EXPECT_EQ(sw.start, 2u);
  EXPECT_THAT(sw.gates, ElementsAre(3u));
  EXPECT_THAT(sw.replaces, IsEmpty()) << "old still runs if new fails: nothing to start again";
  EXPECT_FALSE(sw.needs_turn);
  EXPECT_TRUE(p.actions[5].takes_down);
}

TEST_F(ScenarioTest, ARestartOfARewrittenUnitIsInPlaceAndRestoresTheUnit) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  EditUnit("svc.service", "\"--gpu-memory-utilization\" \"0.9\"",
           "\"--gpu-memory-utilization\" \"0.8\"");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  ASSERT_THAT(Steps(p), ElementsAre("write-unit unit/svc.service unit_drift",
                                    "daemon-reload systemd unit_files_changed",
                                    "restart service/svc config_changed",
                                    "wait-healthy service/svc health_gate"));
  const Switch& sw = SwitchOf(p, "service/svc");
  EXPECT_EQ(sw.mode, SwitchMode::kInPlace);
  EXPECT_THAT(sw.steps, ElementsAre(2u, 3u));
  EXPECT_EQ(sw.start, 2u);
  EXPECT_THAT(sw.gates, ElementsAre(3u));
  EXPECT_TRUE(sw.restores_unit);
  EXPECT_TRUE(sw.needs_turn);
  EXPECT_THAT(sw.replaces, IsEmpty());
  EXPECT_TRUE(p.actions[2].takes_down);
}

TEST_F(ScenarioTest, AFirstStartIsFreshAndNeedsNoTurn) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  const Switch& sw = SwitchOf(p, "service/svc");
  EXPECT_EQ(sw.mode, SwitchMode::kFresh);
  EXPECT_EQ(p.actions[sw.start].kind, ActionKind::kStart);
  ASSERT_EQ(sw.gates.size(), 1u);
  EXPECT_EQ(p.actions[sw.gates[0]].kind, ActionKind::kWaitHealthy);
  EXPECT_FALSE(sw.restores_unit);
  EXPECT_FALSE(sw.needs_turn);
  EXPECT_THAT(sw.replaces, IsEmpty());
  for (const Action& a : p.actions) EXPECT_FALSE(a.takes_down) << ActionKindName(a.kind);
}

TEST_F(ScenarioTest, ServicesOnDisjointGpusAndPortsShareAGroupTheirSwitchesName) {
  OneModel(2);
  Vllm("one", "a", {0}, 8000);
  Vllm("two", "a", {1}, 8001);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  ASSERT_EQ(p.groups.size(), 1u) << ::testing::PrintToString(Steps(p));
  EXPECT_EQ(p.groups[0].chains.size(), 2u);
  const Switch& one = SwitchOf(p, "service/one");
  const Switch& two = SwitchOf(p, "service/two");
  EXPECT_EQ(one.group, 0);
  EXPECT_EQ(two.group, 0);
  EXPECT_EQ(p.groups[0].chains[0].start, one.start);
  EXPECT_EQ(p.groups[0].chains[1].start, two.start);
  EXPECT_EQ(p.groups[0].chains[0].last, one.steps.back());
}

}  // namespace
}  // namespace berth::testing
