// Boot state: a running service's unit is enabled (a reboot brings it back), a stopped one's
// disabled, and only once the new service is healthy, so a failed switch leaves what a reboot
// brings up as it was. Units berth cannot enable (static, masked, ...) are left alone with a
// note; foreign units are never touched.
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string NotesText(const Plan& p) {
  std::string s;
  for (const auto& n : p.notes) s += n.address + ": " + n.detail + "\n";
  return s;
}

TEST_F(ScenarioTest, ANewRunningServiceIsEnabledOnceHealthy) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/svc.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "start service/svc not_running",
                  "wait-healthy service/svc health_gate", "enable unit/svc.service not_enabled"));
  EXPECT_EQ(p.actions[4].unit, "svc.service");
  EXPECT_EQ(p.actions[4].detail, "new unit file: a reboot starts it once enabled");
  EXPECT_TRUE(p.actions[4].requires_.empty());
  EXPECT_TRUE(p.actions[4].frees.empty());
  Converge();
  EXPECT_EQ(UnitOf("svc.service").unit_file_state, "enabled");
}

TEST_F(ScenarioTest, ASwitchEnablesTheNewServiceAndDisablesTheOldAfterTheNewIsHealthy) {
  OneModel();
  Model("b", "org/b");
  InStore("org/b", Commit("b"), 1000);
  Vllm("old", "a", {0}, 8000);
  Converge();
  ASSERT_EQ(UnitOf("old.service").unit_file_state, "enabled");
  d.services["old"].state = ServiceState::kStopped;
  Vllm("new", "b", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("write-unit unit/new.service unit_missing",
                  "daemon-reload systemd unit_files_changed", "stop service/old frees_resources",
                  "start service/new not_running", "wait-healthy service/new health_gate",
                  "enable unit/new.service not_enabled",
                  "disable unit/old.service wanted_stopped"));
  EXPECT_EQ(p.actions[6].detail, "state: stopped; enabled: a reboot would start it");
  // Enabling and disabling are not disruptive: the port is dark from the stop to the gate only.
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].from_step, 2u);
  EXPECT_EQ(p.disruptions[0].until_step, 4u);
  Converge();
  EXPECT_EQ(UnitOf("new.service").unit_file_state, "enabled");
  EXPECT_EQ(UnitOf("old.service").unit_file_state, "disabled");
}

TEST_F(ScenarioTest, AStopWithoutReplacementIsFollowedByItsDisable) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].state = ServiceState::kStopped;
  EXPECT_THAT(Steps(PlanNow()), ElementsAre("stop service/svc wanted_stopped",
                                            "disable unit/svc.service wanted_stopped"));
  Converge();
}

TEST_F(ScenarioTest, AnEnabledRunningUnitGetsNoActionADisabledOneOnlyAnEnable) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  EXPECT_THAT(Steps(PlanNow()), IsEmpty());
  // Someone ran `systemctl disable svc`: it still runs, but a reboot would not bring it back.
  UnitOf("svc.service").unit_file_state = "disabled";
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), ElementsAre("enable unit/svc.service not_enabled"));
  EXPECT_THAT(p.disruptions, IsEmpty());
  Converge();
}

TEST_F(ScenarioTest, AMaskedOrStaticUnitIsLeftAloneAndTheNoteSaysWhy) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  UnitOf("svc.service").unit_file_state = "masked";
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), IsEmpty());
  EXPECT_THAT(NotesText(p), HasSubstr("unit/svc.service: masked: berth does not change its boot "
                                      "state; a reboot may not start it"));

  // A state-only service whose unit has no [Install] section.
  ForeignService("hand.service", {}, 0, 0);
  UnitOf("hand.service").unit_file_state = "static";
  StateOnly("hand", ServiceState::kRunning);
  p = PlanNow();
  EXPECT_THAT(Steps(p), IsEmpty());
  EXPECT_THAT(NotesText(p), HasSubstr("unit/hand.service: static: berth does not change its boot "
                                      "state (no [Install] section)"));
  // Stopped, a static or masked unit needs no note: nothing brings it up.
  d.services["hand"].state = ServiceState::kStopped;
  d.services.erase("svc");
  UnitOf("svc.service").unit_file_state = "masked";
  p = PlanNow();
  EXPECT_THAT(NotesText(p), Not(HasSubstr("boot state")));
}

TEST_F(ScenarioTest, StateOnlyServicesAreEnabledAndDisabledThroughSystemd) {
  ForeignService("kimi.service", {}, 0, 0);
  UnitOf("kimi.service").unit_file_state = "enabled";
  ForeignService("minimax.service", {}, 0, 0, /*active=*/false);
  UnitOf("minimax.service").unit_file_state = "disabled";
  StateOnly("kimi", ServiceState::kStopped);
  StateOnly("minimax", ServiceState::kRunning);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(
      Steps(p),
      ElementsAre("start service/minimax not_running", "enable unit/minimax.service not_enabled",
                  "stop service/kimi wanted_stopped", "disable unit/kimi.service wanted_stopped"));
  Converge();
}

TEST_F(ScenarioTest, AForeignUnitIsNeverEnabledNorDisabled) {
  OneModel();
  // Not in the manifest, enabled: not berth's to disable.
  ForeignService("other.service", {}, 0, 0, /*active=*/false);
  UnitOf("other.service").unit_file_state = "enabled";
  // In the manifest with an engine, but written by hand: blocked, and no enable either.
  ForeignService("svc.service", {}, 0, 0, /*active=*/false);
  UnitOf("svc.service").unit_file_state = "disabled";
  Vllm("svc", "a", {0}, 8000);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  for (const Action& a : p.actions) {
    EXPECT_NE(a.kind, ActionKind::kEnable) << a.address;
    EXPECT_NE(a.kind, ActionKind::kDisable) << a.address;
  }
}

TEST_F(ScenarioTest, AnAdoptedUnitWithoutInstallIsEnabledOnceBerthsUnitReplacesIt) {
  OneModel();
  ForeignService("svc.service", {}, 0, 0, /*active=*/false);
  UnitOf("svc.service").unit_file_state = "static";
  Vllm("svc", "a", {0}, 8000).adopt = true;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_EQ(Steps(p).back(), "enable unit/svc.service not_enabled");
}

TEST_F(ScenarioTest, AnEnabledUnitBerthRemovesIsDisabledBeforeItsFileGoes) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  d.services["svc"].state = ServiceState::kAbsent;
  EXPECT_THAT(Steps(PlanNow()), ElementsAre("stop service/svc wanted_absent",
                                            "disable unit/svc.service wanted_absent",
                                            "remove-unit unit/svc.service wanted_absent",
                                            "daemon-reload systemd unit_files_changed"));
  Converge();

  // Dropped from the manifest, stopped by hand meanwhile: disabled, then removed.
  Vllm("svc", "a", {0}, 8000);
  d.services["svc"].state = ServiceState::kRunning;
  Converge();
  UnitOf("svc.service").active_state = "inactive";
  DropHolds("svc.service");
  d.services.erase("svc");
  EXPECT_THAT(Steps(PlanNow()), ElementsAre("disable unit/svc.service not_in_manifest",
                                            "remove-unit unit/svc.service not_in_manifest",
                                            "daemon-reload systemd unit_files_changed"));
  Converge();
}

TEST_F(ScenarioTest, AServiceAnInterruptedApplyStartedIsGatedBeforeItIsEnabled) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  UnitOf("svc.service").unit_file_state = "disabled";
  o.state.ungated = {"service/svc"};
  EXPECT_THAT(Steps(PlanNow()), ElementsAre("wait-healthy service/svc interrupted_switch",
                                            "enable unit/svc.service not_enabled"));
}

// Killed during its smoke gate (or its floor, or its health gate): the service runs, its unit is
// as wanted, and yet the switch is not done: every gate of its chain runs again, in order.
TEST_F(ScenarioTest, AServiceAnInterruptedApplyLeftBeforeItsLastGateGetsItsWholeChainAgain) {
  OneModel();
  ServiceSpec& s = Vllm("svc", "a", {0}, 8000);
  s.gates.smoke = SmokeSpec{};
  s.gates.floor = FloorSpec{};
  s.gates.floor->output_tps = 100;
  Converge();
  ASSERT_TRUE(PlanNow().empty());
  o.state.ungated = {"service/svc"};
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), ElementsAre("wait-healthy service/svc interrupted_switch",
                                    "smoke service/svc interrupted_switch",
                                    "floor service/svc interrupted_switch"));
  EXPECT_EQ(p.actions[1].As<SmokeStep>().port, 8000);
  EXPECT_THAT(p.actions[2].detail, ::testing::HasSubstr("never saw this gate pass"));
  // A service no longer wanted running is not gated.
  s.state = ServiceState::kStopped;
  for (const Action& a : PlanNow().actions) EXPECT_FALSE(IsGate(a.kind)) << a.address;
}

}  // namespace
}  // namespace berth::testing
