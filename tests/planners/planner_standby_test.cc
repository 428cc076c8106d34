// Standby (planners/standby.h): a `standby: sleep` vLLM service the plan takes down is put to
// sleep instead of stopped when host memory holds its weights, kept asleep while memory allows,
// stopped when it no longer does, and woken instead of started cold when it is wanted again.
// Where it cannot sleep, the plan says why.
#include "planners/standby.h"

#include "core/unit_marker.h"
#include "planners/prewarm.h"
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kGB = 1'000'000'000;

class StandbyTest : public ScenarioTest {
 protected:
  /// One 141 GiB GPU; "one" serves model a on port 8000, "two" model b on port 8001, both
  /// standby: sleep on loopback with 90% of the GPU each (they cannot run side by side); `a`
  /// and `b` bytes of safetensors. "one" runs.
  void TwoStandbys(uint64_t a = 100 * kGB, uint64_t b = 100 * kGB, int two_port = 8001) {
    Gpus(1, GiB(141));
    StoredModel("a", a);
    StoredModel("b", b);
    for (auto [name, model, port] :
         {std::tuple{"one", "a", 8000}, std::tuple{"two", "b", two_port}}) {
      ServiceSpec& s = Vllm(name, model, {0}, port);
      s.bind = "127.0.0.1";
      s.standby = Standby::kSleep;
    }
    d.services["two"].state = ServiceState::kStopped;
    Memory(1000 * kGB, 600 * kGB);
    Converge();
  }
  void SwitchTo(const std::string& running, const std::string& stopped) {
    d.services[running].state = ServiceState::kRunning;
    d.services[stopped].state = ServiceState::kStopped;
  }
  static const Action* Find(const Plan& p, ActionKind kind, const std::string& address) {
    for (const Action& a : p.actions)
      if (a.kind == kind && a.address == address) return &a;
    return nullptr;
  }
  static const Note* NoteOf(const Plan& p, const std::string& verb, const std::string& address) {
    for (const Note& n : p.notes)
      if (n.verb == verb && n.address == address) return &n;
    return nullptr;
  }
  uint64_t GpuHeldBy(const std::string& unit) const {
    uint64_t b = 0;
    for (const auto& g : o.gpus)
      for (const auto& p : g.processes)
        if (p.unit == unit) b += p.used_bytes;
    return b;
  }
};

TEST_F(StandbyTest, TheUnitRendersSleepModeAndItsDevRoutesOnlyForAStandby) {
  TwoStandbys();
  d.services["plain"] = d.services["two"];
  d.services["plain"].name = "plain";
  d.services["plain"].port = 8002;
  d.services["plain"].standby = Standby::kStop;
  Plan p = PlanNow();
  const std::string& two = UnitOf("two.service").content;
  EXPECT_THAT(two, HasSubstr("\"--enable-sleep-mode\""));
  EXPECT_THAT(two, HasSubstr("Environment=\"VLLM_SERVER_DEV_MODE=1\""));
  const Action& plain = At(p, "write-unit unit/plain.service unit_missing");
  EXPECT_THAT(plain.As<UnitFileStep>().content, Not(HasSubstr("sleep-mode")));
  EXPECT_THAT(plain.As<UnitFileStep>().content, Not(HasSubstr("VLLM_SERVER_DEV_MODE")));
}

TEST_F(StandbyTest, ASwitchPutsWhatItReplacesToSleepWhenMemoryHoldsItsWeights) {
  TwoStandbys();
  SwitchTo("two", "one");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_EQ(Find(p, ActionKind::kStop, "service/one"), nullptr);
  const Action* sleep = Find(p, ActionKind::kSleep, "service/one");
  ASSERT_NE(sleep, nullptr) << ::testing::PrintToString(Steps(p));
  EXPECT_EQ(sleep->reason, Reason::kStandby);
  EXPECT_TRUE(sleep->takes_down);
  const StandbyStep& st = sleep->As<StandbyStep>();
  EXPECT_EQ(st.host, "127.0.0.1");
  EXPECT_EQ(st.port, 8000);
  EXPECT_EQ(st.level, 1);
  EXPECT_EQ(st.gpus, std::vector<int>{0});
  EXPECT_EQ(st.residual_bytes, StandbyResidual(GiB(141)));
  EXPECT_EQ(st.memory_bytes, 100 * kGB);
  EXPECT_THAT(sleep->detail, HasSubstr("put to sleep, not stopped"));
  EXPECT_THAT(sleep->detail, HasSubstr("100 GB of weights kept in host memory"));
  // It frees its GPU memory less the residue it keeps; its port stays its own.
  const uint64_t claim = static_cast<uint64_t>(0.9 * static_cast<double>(GiB(141)));
  EXPECT_EQ(sleep->frees.gpu_bytes.at(0), claim - StandbyResidual(GiB(141)));
  EXPECT_TRUE(sleep->frees.ports.empty());
  // The switch's undo wakes it.
  ASSERT_EQ(p.switches.size(), 1u);
  ASSERT_EQ(p.switches[0].replaces.size(), 1u);
  EXPECT_TRUE(p.switches[0].replaces[0].asleep);
  EXPECT_EQ(p.switches[0].replaces[0].gate.port, 8000);
  // Applied: asleep, holding the residue; the next plan keeps it so and says so.
  Converge();
  EXPECT_TRUE(o.Asleep("one.service"));
  EXPECT_EQ(GpuHeldBy("one.service"), StandbyResidual(GiB(141)));
  Plan again = PlanNow();
  const Note* kept = NoteOf(again, "keep", "service/one");
  ASSERT_NE(kept, nullptr);
  EXPECT_THAT(kept->detail, HasSubstr("asleep (standby: sleep): its 100 GB of weights in host"));
}

TEST_F(StandbyTest, ASwitchBackWakesTheSleeperInsteadOfAColdStart) {
  TwoStandbys();
  SwitchTo("two", "one");
  Converge();
  SwitchTo("one", "two");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  const Action* wake = Find(p, ActionKind::kWake, "service/one");
  ASSERT_NE(wake, nullptr) << ::testing::PrintToString(Steps(p));
  EXPECT_EQ(wake->reason, Reason::kAsleep);
  EXPECT_EQ(wake->As<StandbyStep>().port, 8000);
  EXPECT_EQ(Find(p, ActionKind::kStart, "service/one"), nullptr);
  EXPECT_EQ(Find(p, ActionKind::kRestart, "service/one"), nullptr);
  // Nothing of a cold start: no engine check, no prewarm of weights already in memory.
  for (const Action& a : p.actions) {
    EXPECT_FALSE(a.kind == ActionKind::kPreflight && a.address == "service/one") << a.detail;
    EXPECT_NE(a.kind, ActionKind::kPrewarm) << a.detail;
  }
  // Two goes to sleep first (it holds the GPU), then one wakes; its gates follow the wake.
  const Action* sleep = Find(p, ActionKind::kSleep, "service/two");
  ASSERT_NE(sleep, nullptr);
  EXPECT_LT(sleep, wake);
  ASSERT_EQ(p.switches.size(), 1u);
  const Switch& sw = p.switches[0];
  EXPECT_EQ(&p.actions[sw.start], wake);
  ASSERT_FALSE(sw.gates.empty());
  EXPECT_EQ(p.actions[sw.gates[0]].kind, ActionKind::kWaitHealthy);
  EXPECT_TRUE(sw.replaces.at(0).asleep);
  Converge();
  EXPECT_FALSE(o.Asleep("one.service"));
  EXPECT_TRUE(o.Asleep("two.service"));
}

TEST_F(StandbyTest, WithTooLittleMemoryThePlanSaysWhyItNeitherSleepsNorPrewarms) {
  TwoStandbys();
  SwitchTo("two", "one");
  Memory(400 * kGB, 120 * kGB);  // margin 40 GB: 80 GB of room for 100 GB of weights
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_EQ(Find(p, ActionKind::kSleep, "service/one"), nullptr);
  const Action* stop = Find(p, ActionKind::kStop, "service/one");
  ASSERT_NE(stop, nullptr);
  EXPECT_FALSE(p.switches.at(0).replaces.at(0).asleep);
  const Note* no_standby = NoteOf(p, "no standby", "service/one");
  ASSERT_NE(no_standby, nullptr);
  EXPECT_EQ(no_standby->detail,
            "its 100 GB of weights do not fit in the 120 GB of host memory available, less a "
            "margin of 40 GB; it is stopped instead");
  const Note* no_prewarm = NoteOf(p, "no prewarm", "service/two");
  ASSERT_NE(no_prewarm, nullptr);
  EXPECT_THAT(no_prewarm->detail, HasSubstr("do not fit in the 120 GB of memory available"));
  Converge();
  EXPECT_FALSE(o.Asleep("one.service"));
}

TEST_F(StandbyTest, TheSleepsTakeHostMemoryFromThePrewarmsAfterThem) {
  TwoStandbys(100 * kGB, 150 * kGB);
  SwitchTo("two", "one");
  // margin 100 GB: the sleep's 100 GB leave 150 GB of room, 150 GB of b fit exactly; with
  // 10 GB less they do not.
  Memory(1000 * kGB, 340 * kGB);
  Plan p = PlanNow();
  ASSERT_NE(Find(p, ActionKind::kSleep, "service/one"), nullptr);
  EXPECT_EQ(Find(p, ActionKind::kPrewarm, "model/b"), nullptr);
  const Note* no_prewarm = NoteOf(p, "no prewarm", "service/two");
  ASSERT_NE(no_prewarm, nullptr);
  EXPECT_THAT(no_prewarm->detail, HasSubstr("(100 GB of it taken by earlier prewarms and sleeps)"));
  Memory(1000 * kGB, 350 * kGB);
  p = PlanNow();
  EXPECT_NE(Find(p, ActionKind::kSleep, "service/one"), nullptr);
  EXPECT_NE(Find(p, ActionKind::kPrewarm, "model/b"), nullptr);
}

TEST_F(StandbyTest, AStandbyOnThePortItsReplacementNeedsIsStoppedAndThePlanSaysWhy) {
  TwoStandbys(100 * kGB, 100 * kGB, /*two_port=*/8000);
  SwitchTo("two", "one");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_NE(Find(p, ActionKind::kStop, "service/one"), nullptr);
  const Note* why = NoteOf(p, "no standby", "service/one");
  ASSERT_NE(why, nullptr);
  EXPECT_THAT(why->detail, HasSubstr("two starts on port 8000, which a sleeping server keeps"));
  EXPECT_THAT(why->detail, HasSubstr("behind a front (fronts:)"));
}

TEST_F(StandbyTest, ASleeperMemoryCanNoLongerHoldIsStoppedAndThePlanSaysSo) {
  TwoStandbys();
  SwitchTo("two", "one");
  Converge();
  ASSERT_TRUE(o.Asleep("one.service"));
  Memory(1000 * kGB, 90 * kGB);  // below the margin of 100 GB
  Plan p = PlanNow();
  const Action* stop = Find(p, ActionKind::kStop, "service/one");
  ASSERT_NE(stop, nullptr) << ::testing::PrintToString(Steps(p));
  EXPECT_EQ(stop->reason, Reason::kStandbyEvicted);
  EXPECT_THAT(stop->detail, HasSubstr("host memory available (90 GB) is below the margin of "
                                      "100 GB: stopped to give back the 100 GB of weights"));
  EXPECT_EQ(Find(p, ActionKind::kStop, "service/two"), nullptr);
  Converge();
  EXPECT_FALSE(o.Asleep("one.service"));
}

TEST_F(StandbyTest, AbsentOrUnobservedMemoryMeansAStop) {
  TwoStandbys();
  SwitchTo("two", "one");
  o.memory = {};
  Plan p = PlanNow();
  EXPECT_NE(Find(p, ActionKind::kStop, "service/one"), nullptr);
  const Note* why = NoteOf(p, "no standby", "service/one");
  ASSERT_NE(why, nullptr);
  EXPECT_THAT(why->detail, HasSubstr("host memory was not observed"));
  // state: absent is never a sleep, and needs no note.
  Memory(1000 * kGB, 600 * kGB);
  d.services["one"].state = ServiceState::kAbsent;
  p = PlanNow();
  EXPECT_NE(Find(p, ActionKind::kStop, "service/one"), nullptr);
  EXPECT_EQ(Find(p, ActionKind::kSleep, "service/one"), nullptr);
  EXPECT_EQ(NoteOf(p, "no standby", "service/one"), nullptr);
}

TEST_F(StandbyTest, AChangedUnitOfASleeperRestartsItColdWhenItIsWantedAgain) {
  TwoStandbys();
  SwitchTo("two", "one");
  Converge();
  SwitchTo("one", "two");
  d.services["one"].vllm.max_model_len = 4096;
  Plan p = PlanNow();
  EXPECT_EQ(Find(p, ActionKind::kWake, "service/one"), nullptr);
  EXPECT_NE(Find(p, ActionKind::kRestart, "service/one"), nullptr)
      << ::testing::PrintToString(Steps(p));
  Converge();
  EXPECT_FALSE(o.Asleep("one.service"));
}

// An observation is not trusted to say a service sleeps that the manifest does not put on
// standby (a saved observation edited, or a standby: sleep removed while it slept): berth
// neither wakes it (its server may have no sleep routes) nor keeps it asleep.
TEST_F(StandbyTest, SleepIsBelievedOnlyOfAStandby) {
  TwoStandbys();
  SwitchTo("two", "one");
  Converge();
  ASSERT_TRUE(o.Asleep("one.service"));
  d.services["one"].standby = Standby::kStop;  // no longer a standby, still wanted stopped
  Plan p = PlanNow();
  EXPECT_NE(Find(p, ActionKind::kStop, "service/one"), nullptr)
      << ::testing::PrintToString(Steps(p));
  // Wanted running, said asleep, no standby: started again as a running service is (its unit
  // changed: a restart), never woken.
  SwitchTo("one", "two");
  p = PlanNow();
  EXPECT_EQ(Find(p, ActionKind::kWake, "service/one"), nullptr);
  EXPECT_NE(Find(p, ActionKind::kRestart, "service/one"), nullptr)
      << ::testing::PrintToString(Steps(p));
}

}  // namespace
}  // namespace berth::testing
