// Dark-window estimates: from the start-to-healthy times berth recorded for the unit whose health
// gate ends the window (none recorded: no expectation), and the worst case with a rollback.
#include "planners/dark_windows.h"
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kMinute = 60'000;

// old serves port 8000 on GPU 0; new takes port 8000 on GPU 1: old stops to make room.
class DarkWindowTest : public ScenarioTest {
 protected:
  void Replacement() {
    OneModel(2);
    Vllm("old", "a", {0}, 8000).health.timeout_ms = 10 * kMinute;
    Converge();
    d.services["old"].state = ServiceState::kStopped;
    Vllm("new", "a", {1}, 8000).health.timeout_ms = 15 * kMinute;
  }
  const Disruption& OnlyDisruption(const Plan& p) {
    EXPECT_EQ(p.disruptions.size(), 1u);
    static Disruption none;
    return p.disruptions.empty() ? none : p.disruptions[0];
  }
};

TEST_F(DarkWindowTest, NoStartRecordedGivesNoExpectationAndTheTimeoutsAsTheWorstCase) {
  Replacement();
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  const Disruption& dis = OnlyDisruption(p);
  EXPECT_EQ(dis.from_step, 2u);
  EXPECT_EQ(dis.until_step, 4u);
  const DarkEstimate& e = dis.estimate;
  EXPECT_EQ(e.gate_unit, "new.service");
  EXPECT_THAT(e.samples_ms, IsEmpty());
  EXPECT_FALSE(e.expected_ms.has_value());
  EXPECT_EQ(e.gate_timeout_ms, 15 * kMinute);
  ASSERT_EQ(e.rollback.size(), 1u);
  EXPECT_EQ(e.rollback[0].unit, "old.service");
  EXPECT_EQ(e.rollback[0].timeout_ms, 10 * kMinute);
  EXPECT_EQ(e.stop_unit, "old.service");
  EXPECT_EQ(e.stop_timeout_ms, 2 * kMinute) << "TimeoutStopSec=2min, as berth writes it";
  EXPECT_EQ(e.worst_ms, 2 * kMinute + 25 * kMinute)
      << "old's stop timeout, new's health timeout, then old's own to start again";
}

TEST_F(DarkWindowTest, RecordedStartsGiveTheirMedianAndTheirRange) {
  Replacement();
  o.state.start_times_ms["new.service"] = {47'000, 38'000, 42'000};
  Plan p = PlanNow();
  const DarkEstimate& e = OnlyDisruption(p).estimate;
  EXPECT_THAT(e.samples_ms, ElementsAre(47'000, 38'000, 42'000)) << "oldest first, as recorded";
  ASSERT_TRUE(e.expected_ms.has_value());
  EXPECT_EQ(*e.expected_ms, 42'000u);
  EXPECT_EQ(e.worst_ms, 27 * kMinute) << "the worst case stays the timeouts";
}

TEST_F(DarkWindowTest, TheWorstCaseWithRollbackCountsTheOldServicesSlowestRecordedStart) {
  Replacement();
  o.state.start_times_ms["new.service"] = {40'000};
  o.state.start_times_ms["old.service"] = {41'000, 44'000, 43'000};
  Plan p = PlanNow();
  const DarkEstimate& e = OnlyDisruption(p).estimate;
  ASSERT_EQ(e.rollback.size(), 1u);
  EXPECT_THAT(e.rollback[0].samples_ms, ElementsAre(41'000, 44'000, 43'000));
  EXPECT_EQ(e.worst_ms, 2 * kMinute + 15 * kMinute + 44'000);
}

// A stop-first switch is dark from the old server's stop: a server with requests in flight
// stops listening at once and exits only when they end (llama-server waits 30 s for them), or
// when systemd kills it at its stop timeout.
TEST_F(DarkWindowTest, TheOldServersStopCountsInTheExpectationAndItsStopTimeoutInTheWorstCase) {
  Replacement();
  o.state.start_times_ms["new.service"] = {2'000};
  o.state.stop_times_ms["old.service"] = {100, 30'020, 30'010};
  for (ObservedUnit& u : o.units)
    if (u.name == "old.service") u.timeout_stop_usec = 45'000'000;
  Plan p = PlanNow();
  const DarkEstimate& e = OnlyDisruption(p).estimate;
  EXPECT_EQ(e.stop_unit, "old.service");
  EXPECT_THAT(e.stop_samples_ms, ElementsAre(100, 30'020, 30'010));
  EXPECT_EQ(e.stop_timeout_ms, 45'000u);
  ASSERT_TRUE(e.expected_ms.has_value());
  EXPECT_EQ(*e.expected_ms, 2'000u + 30'010u) << "the median start plus the median stop";
  EXPECT_EQ(e.worst_ms, 45'000 + 15 * kMinute + 10 * kMinute)
      << "old's stop timeout, new's health timeout, then old's own to start again";
}

// A saved observation is untrusted: times near 2^64 add up to at most 2^64-1, never wrap round
// to a small "expected" window.
TEST_F(DarkWindowTest, HugeRecordedTimesSaturateInsteadOfWrapping) {
  Replacement();
  o.state.start_times_ms["new.service"] = {UINT64_MAX - 5};
  o.state.stop_times_ms["old.service"] = {UINT64_MAX - 5};
  o.state.start_times_ms["old.service"] = {UINT64_MAX};
  Plan p = PlanNow();
  const DarkEstimate& e = OnlyDisruption(p).estimate;
  EXPECT_EQ(e.expected_ms, UINT64_MAX);
  EXPECT_EQ(e.worst_ms, UINT64_MAX);
}

TEST_F(DarkWindowTest, AStopWhoseTimeoutIsUnknownOrInfiniteIsNotCountedInTheWorstCase) {
  Replacement();
  for (ObservedUnit& u : o.units)
    if (u.name == "old.service") u.timeout_stop_usec = 0;
  Plan unknown = PlanNow();
  EXPECT_EQ(OnlyDisruption(unknown).estimate.stop_timeout_ms, 0u);
  EXPECT_EQ(OnlyDisruption(unknown).estimate.worst_ms, 25 * kMinute);
  for (ObservedUnit& u : o.units)
    if (u.name == "old.service") u.timeout_stop_usec = ObservedUnit::kNoStopTimeout;
  Plan infinite = PlanNow();
  EXPECT_EQ(OnlyDisruption(infinite).estimate.stop_timeout_ms, ObservedUnit::kNoStopTimeout);
  EXPECT_EQ(OnlyDisruption(infinite).estimate.worst_ms, 25 * kMinute);
}

TEST_F(DarkWindowTest, AnInPlaceUpdateRollsBackToItselfOnItsPreviousUnitFile) {
  OneModel();
  Vllm("svc", "a", {0}, 8000).health.timeout_ms = 10 * kMinute;
  Converge();
  EditUnit("svc.service", "\"--gpu-memory-utilization\" \"0.9\"",
           "\"--gpu-memory-utilization\" \"0.8\"");
  o.state.start_times_ms["svc.service"] = {30'000, 50'000};
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  const DarkEstimate& e = OnlyDisruption(p).estimate;
  EXPECT_EQ(e.gate_unit, "svc.service");
  ASSERT_TRUE(e.expected_ms.has_value());
  EXPECT_EQ(*e.expected_ms, 40'000u) << "the mean of the two middle values";
  ASSERT_EQ(e.rollback.size(), 1u);
  EXPECT_EQ(e.rollback[0].unit, "svc.service");
  EXPECT_EQ(e.worst_ms, 2 * kMinute + 10 * kMinute + 50'000) << "its restart's stop timeout too";
}

TEST_F(DarkWindowTest, ARestartWithoutANewUnitFileHasNoRollbackInItsWorstCase) {
  // A model update restarts the service on the same unit file: nothing to roll back to.
  Plan p;
  Disruption dis;
  dis.port = 8000;
  dis.from_step = 0;
  dis.until_step = 1;
  Action restart = MakeAction(ActionKind::kRestart);
  restart.address = "service/svc";
  restart.unit = "svc.service";
  Action gate = MakeAction(ActionKind::kWaitHealthy, restart.address, Reason::kHealthGate);
  gate.unit = restart.unit;
  gate.As<HealthStep>().timeout_ms = 10 * kMinute;
  p.actions = {restart, gate};
  p.disruptions = {dis};
  EstimateDarkWindows(o, &p);
  EXPECT_EQ(p.disruptions[0].estimate.gate_unit, "svc.service");
  EXPECT_THAT(p.disruptions[0].estimate.rollback, IsEmpty());
  EXPECT_EQ(p.disruptions[0].estimate.worst_ms, 10 * kMinute);
  // Its stop is part of the restart: its timeout bounds it, its start times already hold it.
  ObservedUnit u;
  u.name = "svc.service";
  u.timeout_stop_usec = 30'000'000;
  o.units.push_back(u);
  o.state.start_times_ms["svc.service"] = {5'000};
  o.state.stop_times_ms["svc.service"] = {4'000};
  EstimateDarkWindows(o, &p);
  const DarkEstimate& e = p.disruptions[0].estimate;
  EXPECT_EQ(e.stop_unit, "svc.service");
  EXPECT_THAT(e.stop_samples_ms, IsEmpty());
  EXPECT_EQ(e.expected_ms, 5'000u);
  EXPECT_EQ(e.worst_ms, 30'000 + 10 * kMinute);
}

TEST_F(DarkWindowTest, APortThatStaysDarkHasNoEstimate) {
  OneModel();
  Vllm("svc", "a", {0}, 8000);
  Converge();
  o.state.start_times_ms["svc.service"] = {30'000};
  d.services["svc"].state = ServiceState::kStopped;
  Plan p = PlanNow();
  const Disruption& dis = OnlyDisruption(p);
  EXPECT_EQ(dis.until_step, std::nullopt);
  EXPECT_EQ(dis.estimate.gate_unit, "");
  EXPECT_FALSE(dis.estimate.expected_ms.has_value());
  EXPECT_EQ(dis.estimate.worst_ms, 0u);
}

TEST(MedianMs, OddCountsTakeTheMiddleEvenCountsTheMeanOfTheTwoMiddle) {
  EXPECT_EQ(MedianMs({}), 0u);
  EXPECT_EQ(MedianMs({5}), 5u);
  EXPECT_EQ(MedianMs({9, 1, 5}), 5u);
  EXPECT_EQ(MedianMs({9, 1, 5, 3}), 4u);
}

}  // namespace
}  // namespace berth::testing
