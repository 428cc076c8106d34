// An apply killed (-9) in the middle of a switch, then run again, on the in-memory host: the
// next plan sees the switch through with every gate of its chain (health, smoke, floor), a gate
// that fails then is rolled back and held as it would have been without the kill, from what the
// killed apply's journal kept; and an apply that finds nothing left closes that journal.
// tests/e2e/gates_e2e_test.cc kills a real berth on a real systemd the same way.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/state/state.h"
#include "tests/engine/reconciler_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSmoke = "      smoke: {prompt: Say hello., max_tokens: 4, timeout: 30s}\n";
const std::string kFloor = "      floor: {concurrency: 4, duration: 10s, output_tps: 10}\n";

class ResumeTest : public ReconcilerTest {
 protected:
  ResumeTest() {
    // MiniMax replaces Kimi, with a smoke gate and a throughput floor after its health gate.
    dir.Write("gated/berth.yaml", Manifest(true) + "    gates:\n" + kSmoke + kFloor);
    dir.Write("smoked/berth.yaml", Manifest(true) + "    gates:\n" + kSmoke);
    // Kimi updated in place (a new argument: write, reload, restart), smoke-gated.
    dir.Write("kimi-smoked/berth.yaml", Manifest(false, "    gates:\n" + kSmoke));
    dir.Write("kimi-smoked-longer/berth.yaml",
              Manifest(false, "    args: [\"--max-num-seqs\", \"64\"]\n    gates:\n" + kSmoke));
  }
  bool JournalIn(const std::string& state) {
    return std::filesystem::exists(dir / (state + "/journal.json"));
  }
};

TEST_F(ResumeTest, AKillDuringAnyGateOfASwitchMakesTheNextApplyRunEveryGateOfItAgain) {
  for (ActionKind gate : {ActionKind::kWaitHealthy, ActionKind::kSmoke, ActionKind::kFloor}) {
    SCOPED_TRACE(std::string("killed during ") + ActionKindName(gate));
    world.host = FakeHost(EmptyHost());
    const std::string state = std::string("state-") + ActionKindName(gate);
    ASSERT_EQ(Pass("kimi", true, PlanFormat::kText, state).outcome, Outcome::kApplied) << err.str();
    int k =
        StepOf(Pass("gated", false, PlanFormat::kText, state).plan, gate, "service/vllm-minimax");
    ASSERT_GT(k, 0) << out.str();
    ASSERT_TRUE(KillAt("gated", k, state));
    ASSERT_TRUE(Running("vllm-minimax.service"));
    ASSERT_FALSE(Running("vllm-kimi.service"));

    RunReport resumed = Pass("gated", false, PlanFormat::kText, state);
    EXPECT_THAT(Steps(resumed.plan),
                ElementsAre("wait-healthy service/vllm-minimax interrupted_switch",
                            "smoke service/vllm-minimax interrupted_switch",
                            "floor service/vllm-minimax interrupted_switch",
                            "enable unit/vllm-minimax.service not_enabled",
                            "disable unit/vllm-kimi.service wanted_stopped"))
        << out.str();
    EXPECT_THAT(out.str(), HasSubstr("never saw this gate pass"));
    EXPECT_THAT(out.str(), HasSubstr("stopped at step " + std::to_string(k)));

    RunReport r = Pass("gated", true, PlanFormat::kText, state);
    ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
    EXPECT_GE(Count("probe 8000"), 1u);
    EXPECT_EQ(Count("smoke 8000"), 1u);
    EXPECT_EQ(Count("load 8000"), 1u);
    EXPECT_EQ(Count("start vllm-minimax.service"), 0u) << "it ran already; only its gates again";
    EXPECT_FALSE(JournalIn(state));
    EXPECT_EQ(Pass("gated", false, PlanFormat::kText, state).outcome, Outcome::kNoChanges)
        << out.str();
  }
}

TEST_F(ResumeTest, ASmokeGateKilledMidwayStillCatchesAFailingReplacementRollsItBackAndHolds) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.smoke_empty.insert("vllm-minimax.service");
  int k = StepOf(Plan("smoked").plan, ActionKind::kSmoke, "service/vllm-minimax");
  ASSERT_TRUE(KillAt("smoked", k));
  ASSERT_FALSE(Running("vllm-kimi.service"));

  RunReport r = Apply("smoked");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << out.str() << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_THAT(r.status.message(), HasSubstr("the smoke gate of vllm-minimax.service failed"));
  EXPECT_TRUE(r.exec.rolled_back) << err.str();
  EXPECT_THAT(err.str(), HasSubstr("start vllm-kimi.service again"));
  EXPECT_THAT(err.str(), HasSubstr("vllm-kimi.service is healthy again; port 8000"));
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_FALSE(Running("vllm-minimax.service"));
  EXPECT_TRUE(r.terminal) << "held, as a switch that was never killed would be";
  EXPECT_FALSE(JournalLeft());

  EXPECT_EQ(Apply("smoked").outcome, Outcome::kHeld) << out.str() << err.str();
  EXPECT_EQ(Count("stop vllm-kimi.service"), 0u) << "Kimi was not taken down again";
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

TEST_F(ResumeTest, AnInPlaceUpdateKilledDuringItsSmokeGateIsRolledBackToItsUnitFileBefore) {
  ASSERT_EQ(Apply("kimi-smoked").outcome, Outcome::kApplied) << err.str();
  auto before = world.unit_files.Read("vllm-kimi.service");
  ASSERT_TRUE(before.ok() && before->has_value());
  world.smoke_empty.insert("vllm-kimi.service");
  int k = StepOf(Plan("kimi-smoked-longer").plan, ActionKind::kSmoke, "service/vllm-kimi");
  ASSERT_GT(k, 0) << out.str();
  ASSERT_TRUE(KillAt("kimi-smoked-longer", k));
  auto killed = world.unit_files.Read("vllm-kimi.service");
  ASSERT_TRUE(killed.ok() && killed->has_value());
  ASSERT_THAT(**killed, HasSubstr("--max-num-seqs")) << "the new unit file is in place";

  RunReport r = Apply("kimi-smoked-longer");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << out.str() << err.str();
  EXPECT_TRUE(r.exec.rolled_back) << err.str();
  EXPECT_THAT(err.str(), HasSubstr("restore the unit file of vllm-kimi.service"));
  auto after = world.unit_files.Read("vllm-kimi.service");
  ASSERT_TRUE(after.ok() && after->has_value());
  EXPECT_EQ(**after, **before) << "the file the killed apply replaced, byte for byte";
  EXPECT_EQ(Count("restart vllm-kimi.service"), 1u);
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

// A kill after the last step, before the journal was closed: nothing is left to do, and the
// apply that finds so closes the journal, so that the warning is not repeated by every plan.
TEST_F(ResumeTest, ANoOpApplyAfterAnInterruptedOneClosesItsJournal) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  Journal j;
  j.started = "2026-12-01T03:00:00Z";
  j.pid = "4242";
  j.entries = {{1, "start", "service/vllm-kimi", "done", ""},
               {2, "wait-healthy", "service/vllm-kimi", "done", ""},
               {3, "enable", "unit/vllm-kimi.service", "done", ""}};
  ASSERT_TRUE(StateDir(dir / "state").SaveJournal(j).ok());
  world.calls.clear();
  EXPECT_EQ(Plan("kimi").outcome, Outcome::kNoChanges) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("by pid 4242 stopped at step 3"));

  EXPECT_EQ(Apply("kimi").outcome, Outcome::kNoChanges) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("its journal is closed"));
  EXPECT_FALSE(JournalLeft());
  EXPECT_EQ(Count("start vllm-kimi.service") + Count("restart vllm-kimi.service"), 0u);

  EXPECT_EQ(Plan("kimi").outcome, Outcome::kNoChanges);
  EXPECT_THAT(out.str(), Not(HasSubstr("stopped at step"))) << "the warning is not repeated";
  EXPECT_EQ(Apply("kimi").outcome, Outcome::kNoChanges);
  EXPECT_THAT(out.str(), Not(HasSubstr("journal")));
}

// kill -9 between the create and the rename of the journal's temp file left it behind for good;
// the next pass that holds the state lock removes it.
TEST_F(ResumeTest, ATempFileOfAKilledApplyIsRemovedByTheNextPass) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  std::filesystem::path orphan = dir / "state/.journal.json.tmp.4194305";
  std::ofstream(orphan) << "{\"partial";
  EXPECT_EQ(Plan("kimi").outcome, Outcome::kNoChanges);
  EXPECT_TRUE(std::filesystem::exists(orphan)) << "a plan holds no lock and touches nothing";
  EXPECT_EQ(Apply("kimi").outcome, Outcome::kNoChanges) << out.str() << err.str();
  EXPECT_FALSE(std::filesystem::exists(orphan));
}

}  // namespace
}  // namespace berth::testing
