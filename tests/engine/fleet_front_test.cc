// A fleet host behind a front: the plan's one definition of "takes a service down"
// (Action::takes_down, set by MarkTurnsAndGroups) is what `berth plan` says about the host's
// turn and what the executor asks the turn for (executor_switch_test pins that it reads
// takes_down and nothing else).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/output/plan_output.h"
#include "manifests/loader.h"
#include "planners/fleet.h"
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class FleetFrontTest : public ScenarioTest {
 protected:
  void SetUp() override {
    Gpus(2, GiB(141));
    InStore("org/a", Commit("a"), 1000);
    InStore("org/b", Commit("b"), 1000);
  }
  // svc-a and svc-b on port 8000 (behind a front when `fronted`), in fleet prod; svc-b on
  // `b_gpu` (0: svc-a's GPU, no room for both).
  void Load(const std::string& a_state, const std::string& b_state, int b_gpu, bool fronted) {
    std::string yaml = "berth: 1\nhost: {store: /models, front_dir: /run/fronts}\n";
    if (fronted) yaml += "fronts:\n  8000: {hold: 5m, drain: 1m}\n";
    yaml +=
        "models:\n  a: {source: hf://org/a, revision: " + Commit("a") +
        "}\n  b: {source: hf://org/b, revision: " + Commit("b") +
        "}\nservices:\n  svc-a: {model: a, engine: vllm, gpus: [0], port: 8000, state: " + a_state +
        "}\n  svc-b: {model: b, engine: vllm, gpus: [" + std::to_string(b_gpu) +
        "], port: 8000, state: " + b_state +
        "}\nfleet:\n  name: prod\n  etcd: {endpoints: [\"http://etcd-1:2379\"]}\n";
    LoadResult r = LoadManifestTexts({{"berth.yaml", yaml}});
    ASSERT_TRUE(r.ok()) << r.diagnostics[0].message;
    d = r.desired;
  }
  // svc-a serving, then the plan that switches port 8000 to svc-b.
  Plan Switch(int b_gpu, bool fronted) {
    Load("running", "absent", b_gpu, fronted);
    Converge();
    Load("stopped", "running", b_gpu, fronted);
    Plan p = PlanNow();
    EXPECT_FALSE(p.blocked()) << Problems(p);
    return p;
  }
  static const berth::Switch& To(const Plan& p, const std::string& address) {
    for (const berth::Switch& sw : p.switches)
      if (sw.address == address) return sw;
    ADD_FAILURE() << "no switch to " << address;
    static const berth::Switch none;
    return none;
  }
  static std::string Text(const Plan& p, const Desired& d) { return PlanToText(p, d); }
  // The plan's text names step `turn` (0-based) as the one that waits for the host's turn.
  void ExpectSaysItWaitsAt(const Plan& p, size_t turn) {
    EXPECT_THAT(Text(p, d), HasSubstr("fleet prod: step " + std::to_string(turn + 1) +
                                      " waits for this host's turn"));
  }
};

TEST_F(FleetFrontTest, AFrontedMakeBeforeBreakSwitchNeitherWaitsForATurnNorSaysItDoes) {
  Plan p = Switch(1, true);
  const berth::Switch& sw = To(p, "service/svc-b");
  ASSERT_EQ(sw.mode, SwitchMode::kMakeBeforeBreak);
  EXPECT_FALSE(sw.needs_turn);
  for (const Action& a : p.actions)
    EXPECT_FALSE(a.takes_down) << ActionKindName(a.kind) << " " << a.address;
  EXPECT_EQ(FirstDisruptiveStep(p), std::nullopt);
  std::string text = Text(p, d);
  EXPECT_THAT(text, HasSubstr("fleet prod: nothing here goes dark; no turn needed"));
  EXPECT_THAT(text, Not(HasSubstr("waits for this host's turn")));
  EXPECT_THAT(PlanSummary(p), Not(HasSubstr("dark"))) << "no port goes dark in it either";
}

TEST_F(FleetFrontTest, AStopFirstSwitchWaitsForTheTurnAtItsStopAndSaysSo) {
  Plan p = Switch(0, false);
  const berth::Switch& sw = To(p, "service/svc-b");
  ASSERT_EQ(sw.mode, SwitchMode::kStopFirst);
  EXPECT_TRUE(sw.needs_turn);
  std::optional<size_t> turn = FirstDisruptiveStep(p);
  ASSERT_TRUE(turn.has_value());
  EXPECT_EQ(p.actions[*turn].kind, ActionKind::kStop);
  EXPECT_EQ(p.actions[*turn].unit, "svc-a.service");
  ExpectSaysItWaitsAt(p, *turn);
}

TEST_F(FleetFrontTest, AFrontThatHoldsRequestsWhileTheOldServerStopsWaitsForTheTurnToo) {
  Plan p = Switch(0, true);
  const berth::Switch& sw = To(p, "service/svc-b");
  ASSERT_EQ(sw.mode, SwitchMode::kHold);
  EXPECT_TRUE(sw.needs_turn);
  std::optional<size_t> turn = FirstDisruptiveStep(p);
  ASSERT_TRUE(turn.has_value());
  EXPECT_TRUE(p.actions[*turn].takes_down);
  ExpectSaysItWaitsAt(p, *turn);
  EXPECT_THAT(PlanSummary(p), HasSubstr("port 8000 held from step"));
}

}  // namespace
}  // namespace berth::testing
