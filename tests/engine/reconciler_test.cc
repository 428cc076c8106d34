// The Reconciler and its executor on an in-memory host (tests/support/fake_world.h): every
// scenario acts out a switch, a failure or an interruption through the same code path as
// `berth apply`, then removes the fault, reconciles again and proves the next plan is empty.
// The clock jumps, so a 10-minute health timeout takes no time. The sandbox tests (tests/e2e)
// prove the same against a real systemd.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "core/hash.h"
#include "core/unit_marker.h"
#include "engine/apply/reconciler.h"
#include "engine/loop/metrics.h"
#include "engine/loop/reconcile.h"
#include "engine/state/state.h"
#include "tests/engine/reconciler_fixture.h"
#include "tests/providers/temp_dir.h"
#include "tests/support/fake_world.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(ReconcilerTest, FreshHostConvergesAndTheNextPlanIsEmpty) {
  RunReport r = Apply("kimi");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 0);
  EXPECT_THAT(world.calls,
              ::testing::IsSupersetOf({"download moonshotai/Kimi-K2", "write vllm-kimi.service",
                                       "daemon-reload", "start vllm-kimi.service", "probe 8000"}));
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_FALSE(JournalLeft());
  EXPECT_EQ(r.services_up, 1);

  RunReport next = Plan("kimi");
  EXPECT_EQ(next.outcome, Outcome::kNoChanges) << out.str();
  EXPECT_TRUE(next.plan.empty());
}

// Every timestamp of berth's records is the Clock seam's wall time, not the machine's.
TEST_F(ReconcilerTest, TheStatesTimestampsComeFromTheClock) {
  world.clock.Advance(std::chrono::hours(1));  // the fake clock's unix time: 1'700'003'600
  RunReport r = Apply("kimi");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
  auto st = StateDir(dir / "state").Load();
  ASSERT_TRUE(st.ok()) << st.status().message();
  // An hour and some health-gate intervals after 2023-11-14T22:13:20Z.
  EXPECT_EQ(st->last_apply.substr(0, 14), "2023-11-14T23:") << st->last_apply;
}

TEST_F(ReconcilerTest, ReplacementThatNeverTurnsHealthyIsRolledBackThenConvergesOnceFixed) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  world.never_healthy.insert("vllm-minimax.service");

  RunReport r = Apply("minimax");
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_TRUE(r.exec.rolled_back);
  EXPECT_THAT(r.status.message(), HasSubstr("did not become healthy within 10m"));
  // The download came first, Kimi stopped only just before MiniMax started, then the rollback.
  EXPECT_THAT(world.calls, ::testing::IsSupersetOf({"download MiniMaxAI/MiniMax-M2"}));
  auto pos = [&](const std::string& c) {
    return std::find(world.calls.begin(), world.calls.end(), c) - world.calls.begin();
  };
  EXPECT_LT(pos("download MiniMaxAI/MiniMax-M2"), pos("stop vllm-kimi.service"));
  EXPECT_LT(pos("stop vllm-kimi.service"), pos("start vllm-minimax.service"));
  EXPECT_TRUE(Running("vllm-kimi.service")) << "the rollback starts what was replaced";
  EXPECT_FALSE(Running("vllm-minimax.service"));
  EXPECT_THAT(err.str(), HasSubstr("rolled back:"));
  EXPECT_GE(SecondsSlept(), 600) << "the gate waited its whole timeout, on the fake clock";

  // The next plan says what failed, in text and JSON alike.
  Plan("minimax");
  EXPECT_THAT(out.str(), HasSubstr("last apply failed on service/vllm-minimax"));

  world.never_healthy.clear();
  EXPECT_EQ(Apply("minimax").outcome, Outcome::kHeld) << "not retried on its own";
  retry = true;  // the operator fixed it: berth apply --retry
  RunReport fixed = Apply("minimax");
  ASSERT_EQ(fixed.outcome, Outcome::kApplied) << err.str();
  EXPECT_TRUE(Running("vllm-minimax.service"));
  EXPECT_FALSE(Running("vllm-kimi.service"));
  RunReport next = Plan("minimax");
  EXPECT_EQ(next.outcome, Outcome::kNoChanges) << out.str();
  EXPECT_THAT(out.str(), Not(HasSubstr("last apply failed")));
}

TEST_F(ReconcilerTest, HealthTimeoutFailsAfterTheTimeoutThenConvergesWhenTheServerAnswers) {
  world.never_healthy.insert("vllm-kimi.service");
  RunReport r = Apply("kimi");
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  // The gate failed; the enable after it never ran (a reboot would not bring the unit up).
  EXPECT_EQ(r.exec.failed_step, static_cast<int>(r.plan.actions.size()) - 1);
  EXPECT_EQ(r.plan.actions[static_cast<size_t>(r.exec.failed_step - 1)].kind,
            ActionKind::kWaitHealthy);
  EXPECT_EQ(r.plan.actions.back().kind, ActionKind::kEnable);
  EXPECT_THAT(world.calls, Not(::testing::Contains("enable vllm-kimi.service")));
  EXPECT_THAT(r.status.message(), HasSubstr("did not become healthy within 10m"));
  EXPECT_THAT(r.status.message(), HasSubstr("last probe: GET http://127.0.0.1:8000/health: 503"));
  EXPECT_GE(SecondsSlept(), 600);
  EXPECT_LT(SecondsSlept(), 620);
  // Backoff reaches the service's interval (5 s): about 600/5 probes, not one per 200 ms.
  EXPECT_LT(world.probes["vllm-kimi.service"], 140);
  EXPECT_GT(world.probes["vllm-kimi.service"], 100);

  world.never_healthy.clear();
  // The unit runs already; the next plan is only the gate it failed, which now passes.
  retry = true;
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str() << out.str();
  EXPECT_EQ(Plan("kimi").outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(ReconcilerTest, FailedDownloadStopsBeforeAnythingGoesDark) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  world.fail_download.insert("MiniMaxAI/MiniMax-M2");
  RunReport r = Apply("minimax");
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_THAT(r.status.message(), HasSubstr("503"));
  EXPECT_THAT(world.calls, Not(::testing::Contains("stop vllm-kimi.service")));
  EXPECT_TRUE(Running("vllm-kimi.service"));

  world.fail_download.clear();
  ASSERT_EQ(Apply("minimax").outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(Plan("minimax").outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(ReconcilerTest, InterruptedBetweenActionsResumesWithTheHealthGateItSkipped) {
  // SIGTERM arrives while systemd starts Kimi: the start finishes, nothing after it runs.
  world.on_job = [&](const std::string& verb, const std::string&) {
    if (verb == "start") stop = true;
  };
  RunReport r = Apply("kimi");
  EXPECT_EQ(r.outcome, Outcome::kInterrupted);
  EXPECT_TRUE(r.exec.interrupted);
  EXPECT_THAT(world.calls, Not(::testing::Contains("probe 8000")));
  EXPECT_TRUE(JournalLeft()) << "the journal stays for the next run";

  world.on_job = nullptr;
  stop = false;
  RunReport plan = Plan("kimi");
  // The gate it skipped, then the enable that was to follow it.
  ASSERT_EQ(plan.plan.actions.size(), 2u) << out.str();
  EXPECT_EQ(plan.plan.actions[0].kind, ActionKind::kWaitHealthy);
  EXPECT_EQ(plan.plan.actions[0].detail,
            "an interrupted apply started it but never saw it healthy");
  EXPECT_EQ(plan.plan.actions[1].kind, ActionKind::kEnable);
  EXPECT_THAT(out.str(), HasSubstr("this run looks at the host afresh"));
  EXPECT_THAT(out.str(), HasSubstr("stopped at step"));

  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(world.probes["vllm-kimi.service"], 1);
  EXPECT_FALSE(JournalLeft());
  EXPECT_EQ(Plan("kimi").outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(ReconcilerTest, KilledApplyIsResumedFromItsJournal) {
  // What `kill -9` after the start leaves: the unit written and running, the journal saying the
  // health gate never ran.
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.healthy_after["vllm-minimax.service"] = 3;
  RunReport planned = Plan("minimax");
  Journal j;
  j.started = "2026-12-01T03:00:00Z";
  j.pid = "4242";
  for (size_t i = 0; i < planned.plan.actions.size(); ++i) {
    const Action& a = planned.plan.actions[i];
    bool ran = a.kind != ActionKind::kWaitHealthy;
    j.entries.push_back(
        {static_cast<int>(i + 1), ActionKindName(a.kind), a.address, ran ? "done" : "pending", ""});
  }
  ASSERT_TRUE(StateDir(dir / "state").SaveJournal(j).ok());
  // Act the plan out but its health gate, as the killed process did: its unit files carry the
  // state's lineage (the state's list of units is only written when an apply ends).
  auto state = StateDir(dir / "state").Load();
  ASSERT_TRUE(state.ok() && !state->lineage.empty());
  berth::Plan acted = planned.plan;
  for (Action& a : acted.actions)
    if (a.kind == ActionKind::kWriteUnit)
      a.As<UnitFileStep>().content = StampLineage(a.As<UnitFileStep>().content, state->lineage);
  Desired d = world.desired;
  world.host.Apply(acted, d);

  RunReport resumed = Plan("minimax");
  EXPECT_THAT(out.str(), HasSubstr("an apply started 2026-12-01T03:00:00Z by pid 4242 stopped"));
  ASSERT_EQ(resumed.plan.actions.size(), 1u) << out.str();
  EXPECT_EQ(resumed.plan.actions[0].kind, ActionKind::kWaitHealthy);
  EXPECT_EQ(resumed.plan.actions[0].address, "service/vllm-minimax");

  ASSERT_EQ(Apply("minimax").outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(world.probes["vllm-minimax.service"], 3) << "the gate waited until it answered";
  EXPECT_FALSE(JournalLeft());
  EXPECT_EQ(Plan("minimax").outcome, Outcome::kNoChanges) << out.str();
}

// A switch whose replacement never turns healthy costs one outage: rolled back, the change is
// held for that manifest digest, and neither apply nor the loop takes the old service down again
// until the manifest changes or --retry asks for exactly one more try.
TEST_F(ReconcilerTest, AChangeThatFailedAfterTakingAServiceDownIsHeldUntilRetryOrAManifestChange) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.never_healthy.insert("vllm-minimax.service");
  RunReport failed = Apply("minimax");
  ASSERT_EQ(failed.outcome, Outcome::kFailed) << err.str();
  EXPECT_TRUE(failed.exec.rolled_back);
  EXPECT_TRUE(failed.terminal) << "the loop waits for the manifest instead of backing off";
  EXPECT_EQ(Count("stop vllm-kimi.service"), 1u);
  auto state = StateDir(dir / "state").Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->held.address, "service/vllm-minimax");
  EXPECT_EQ(state->held.digest, failed.manifest_digest);

  world.calls.clear();
  RunReport held = Apply("minimax");
  EXPECT_EQ(held.outcome, Outcome::kHeld) << out.str() << err.str();
  EXPECT_EQ(ExitCodeOf(held.outcome), 3);
  EXPECT_TRUE(held.terminal);
  for (const std::string& call : world.calls)
    EXPECT_EQ(call.rfind("stop ", 0) + call.rfind("start ", 0) + call.rfind("restart ", 0),
              3 * std::string::npos)
        << "nothing was started or stopped: " << call;
  EXPECT_THAT(err.str(), HasSubstr("not trying this change again: the last apply of this "
                                   "manifest failed on service/vllm-minimax"));
  EXPECT_THAT(err.str(), HasSubstr("--retry"));
  EXPECT_TRUE(Running("vllm-kimi.service"));
  RunReport plan = Plan("minimax");
  EXPECT_EQ(plan.outcome, Outcome::kPlanned) << "a plan still shows the change";
  EXPECT_THAT(out.str(), HasSubstr("warning: this manifest's change is held"));

  // --retry: exactly one more try (and one more outage while it still fails).
  retry = true;
  EXPECT_EQ(Apply("minimax").outcome, Outcome::kFailed);
  EXPECT_EQ(Count("stop vllm-kimi.service"), 1u);
  retry = false;
  world.never_healthy.clear();
  EXPECT_EQ(Apply("minimax").outcome, Outcome::kHeld) << "fixing the host is not enough";

  // A manifest change is a new change: tried, and it converges.
  dir.Write("minimax/berth.yaml", Manifest(true) + "# fixed: the replacement's image\n");
  ASSERT_EQ(Apply("minimax").outcome, Outcome::kApplied) << err.str();
  state = StateDir(dir / "state").Load();
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->held.empty()) << "a success releases the hold";
  EXPECT_EQ(Plan("minimax").outcome, Outcome::kNoChanges) << out.str();
}

// An in-place update (a flag changed, the unit rewritten and restarted) that fails its gate
// gets its previous unit file back, byte for byte, and berth returns only once it serves again.
TEST_F(ReconcilerTest, AnInPlaceUpdateThatFailsItsGateGetsItsOldUnitBackAndEndsHealthy) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  const std::string before = Unit("vllm-kimi.service")->content;
  // The new flag breaks the server: whatever starts from a unit with it never turns healthy.
  world.on_job = [&](const std::string& verb, const std::string& unit) {
    if (verb != "start" || unit != "vllm-kimi.service") return;
    if (world.host.Unit(unit).content.find("--max-num-seqs") != std::string::npos)
      world.never_healthy.insert(unit);
    else
      world.never_healthy.erase(unit);
  };
  world.calls.clear();
  RunReport r = Apply("kimi-longer");
  ASSERT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_TRUE(r.exec.rolled_back) << err.str();
  EXPECT_EQ(Unit("vllm-kimi.service")->content, before) << "the previous unit file is back";
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_EQ(Count("restart vllm-kimi.service"), 2u) << "into the new unit, then the old";
  EXPECT_EQ(Count("write vllm-kimi.service"), 2u);
  EXPECT_THAT(err.str(), HasSubstr("restore the unit file of vllm-kimi.service"));
  EXPECT_THAT(err.str(), HasSubstr("vllm-kimi.service is healthy again; port 8000 was dark for"));
  EXPECT_GE(r.exec.outage, std::chrono::minutes(10)) << "the failed gate's whole timeout";
  // The last probe of the pass answered: berth returned with the old service serving.
  EXPECT_EQ(world.calls.back(), "probe 8000");
}

// adopt: true takes over a hand-written unit; the file it replaces is kept, not lost.
TEST_F(ReconcilerTest, AdoptingAHandWrittenUnitKeepsACopyOfItInTheStateDirectory) {
  dir.Write("kimi-adopt/berth.yaml", Manifest(false, "    adopt: true\n"));
  const std::string hand = "[Service]\nExecStart=/opt/hand-made/serve --port 8000\n";
  ObservedUnit& u = world.host.Unit("vllm-kimi.service");
  u.load_state = "loaded";
  u.fragment_path = "/etc/systemd/system/vllm-kimi.service";
  u.content = hand;
  u.content_hash = Sha256Hex(hand);
  u.managed = false;
  RunReport plan = Plan("kimi-adopt");
  ASSERT_EQ(plan.outcome, Outcome::kPlanned) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("a copy of it is kept in the state directory (adopted/)"));
  ASSERT_EQ(Apply("kimi-adopt").outcome, Outcome::kApplied) << err.str();
  std::vector<std::filesystem::path> kept;
  for (const auto& e : std::filesystem::directory_iterator(dir / "state/adopted"))
    kept.push_back(e.path());
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].filename().string().rfind("vllm-kimi.service.", 0), 0u) << kept[0];
  std::ifstream in(kept[0]);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), hand);
  EXPECT_THAT(Unit("vllm-kimi.service")->content, HasSubstr("# Managed by berth"));
}

// The same under the reconcile loop: hours of passes, one outage.
TEST_F(ReconcilerTest, UnderTheLoopAFailingReplacementCostsExactlyOneOutage) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.never_healthy.insert("vllm-minimax.service");
  LoopOptions lo;
  lo.schedule.interval = std::chrono::minutes(5);
  lo.schedule.jitter = 0;
  LoopDeps ld;
  ld.clock = &world.clock;
  ld.stop = &stop;
  std::ostringstream log;
  ld.log = &log;
  ld.manifest_fingerprint = [] { return "unchanged"; };
  int passes = 0;
  ld.pass = [&] {
    ++passes;
    return Apply("minimax");
  };
  world.clock.on_sleep = [&](std::chrono::milliseconds elapsed) {
    if (elapsed >= std::chrono::hours(3)) stop = true;
  };
  EXPECT_EQ(ExitCodeOf(RunLoop(lo, ld)), 0);
  EXPECT_EQ(Count("stop vllm-kimi.service"), 1u) << log.str();
  EXPECT_EQ(passes, 1) << "no pass while the manifest stays the same: " << log.str();
  EXPECT_THAT(log.str(), HasSubstr("failed, rolled back: "));
  EXPECT_THAT(log.str(), HasSubstr("waiting for the manifest to change"));
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

// A unit carries the lineage of the state directory whose apply wrote it: a second state
// directory (a fresh --state-dir, another checkout's) neither rewrites nor prunes it.
TEST_F(ReconcilerTest, UnitsOfAnotherStateLineageAreForeign) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  auto state = StateDir(dir / "state").Load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->lineage.size(), 32u);
  const ObservedUnit* kimi = Unit("vllm-kimi.service");
  ASSERT_NE(kimi, nullptr);
  EXPECT_EQ(UnitLineage(kimi->content), state->lineage);
  EXPECT_THAT(kimi->content, HasSubstr(std::string(kLineageKey) + state->lineage + "\n"));

  // A fresh state directory: the unit is not its own to change...
  RunReport other = Pass("kimi-longer", false, PlanFormat::kText, "other-state");
  EXPECT_EQ(other.outcome, Outcome::kBlocked) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("another berth state directory wrote it (lineage " +
                                   state->lineage + "; this state directory has none yet)"));
  EXPECT_THAT(out.str(), HasSubstr("Set adopt: true"));
  // ...nor to prune when its manifests do not name it.
  RunReport none = Pass("none", true, PlanFormat::kText, "other-state");
  EXPECT_EQ(none.outcome, Outcome::kNoChanges) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("vllm-kimi.service carries berth's marker but is not this "
                                   "state's"));
  EXPECT_TRUE(Running("vllm-kimi.service"));
  ASSERT_NE(Unit("vllm-kimi.service"), nullptr);
  EXPECT_TRUE(Unit("vllm-kimi.service")->HasFile());

  // The state that wrote it still owns it: its plan for an empty manifest prunes it.
  RunReport own = Plan("none");
  ASSERT_EQ(own.outcome, Outcome::kPlanned) << out.str();
  bool removes = false;
  for (const Action& a : own.plan.actions)
    removes = removes || (a.kind == ActionKind::kRemoveUnit && a.unit == "vllm-kimi.service");
  EXPECT_TRUE(removes) << out.str();
}

// A plan holds no lock: a journal whose berth still runs is an apply in progress, not an
// interrupted one; once that process is gone, the same journal is.
TEST_F(ReconcilerTest, APlanDuringAnApplyDoesNotCallItInterrupted) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  // A process named berth (a copy of sleep), standing for the apply that writes the journal.
  std::filesystem::copy_file("/bin/sleep", dir / "berth");
  std::filesystem::permissions(dir / "berth", std::filesystem::perms::owner_all);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string path = dir / "berth";
    ::execl(path.c_str(), "berth", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 200; ++i) {  // until exec has renamed the child
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "berth") break;
    ::usleep(5000);
  }
  Journal j;
  j.started = "2026-12-01T03:00:00Z";
  j.pid = std::to_string(pid);
  j.entries.push_back({1, "wait-healthy", "service/vllm-kimi", "running", ""});
  ASSERT_TRUE(StateDir(dir / "state").SaveJournal(j).ok());

  RunReport during = Plan("kimi");
  EXPECT_THAT(out.str(), HasSubstr("an apply is running now (pid " + j.pid));
  EXPECT_THAT(out.str(), Not(HasSubstr("stopped at step")));
  EXPECT_TRUE(during.plan.empty()) << out.str();

  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  RunReport after = Plan("kimi");
  EXPECT_THAT(out.str(), HasSubstr("by pid " + j.pid + " stopped at step 1"));
  ASSERT_EQ(after.plan.actions.size(), 1u) << out.str();
  EXPECT_EQ(after.plan.actions[0].kind, ActionKind::kWaitHealthy);
}

// A saved plan is a file anyone with write access to the CI artifacts could edit: what runs is the
// plan berth makes now, and only when the file says exactly that.
class SavedPlanTamperTest
    : public ReconcilerTest,
      public ::testing::WithParamInterface<std::pair<const char*, const char*>> {
 protected:
  RunReport ApplySaved(const std::string& file) {
    out.str("");
    err.str("");
    Reporter say(out, err);
    ReconcileOptions o;
    o.saved_plan_path = file;
    o.state_dir = dir / "state";
    o.yes = true;
    return Reconciler(world.Deps(&say)).Run(o);
  }
  std::string SavePlan(const std::string& manifest) {
    Reporter say(out, err);
    ReconcileOptions o;
    o.manifest_path = dir / (manifest + "/berth.yaml");
    o.state_dir = dir / "state";
    o.apply = false;
    o.out_path = dir / "plan.json";
    EXPECT_EQ(Reconciler(world.Deps(&say)).Run(o).outcome, Outcome::kPlanned) << err.str();
    return o.out_path;
  }
};

TEST_P(SavedPlanTamperTest, AnEditedSavedPlanNeverRuns) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  std::string file = SavePlan("minimax");
  std::ifstream in(file);
  nlohmann::json plan = nlohmann::json::parse(in);
  in.close();
  auto [what, edit] = GetParam();
  nlohmann::json patch = nlohmann::json::parse(edit);
  if (patch.contains("append")) {
    plan["actions"].push_back(patch["append"]);
  } else {
    for (auto& a : plan["actions"])
      if (a["kind"] == patch["kind"]) {
        if (patch.contains("set")) a.update(patch["set"]);
        if (patch.contains("step")) a["step"].update(patch["step"]);
      }
  }
  std::ofstream(file, std::ios::trunc) << plan.dump(2);
  world.calls.clear();

  RunReport r = ApplySaved(file);
  EXPECT_EQ(r.outcome, Outcome::kStale) << what << "\n" << out.str() << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 5);
  EXPECT_THAT(err.str(), HasSubstr("it is not the plan berth makes now")) << what;
  EXPECT_THAT(err.str(), HasSubstr("Nothing was changed"));
  for (const auto& c : world.calls) EXPECT_EQ(c, "observe") << what << ": " << c << " ran";
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

INSTANTIATE_TEST_SUITE_P(
    Edits, SavedPlanTamperTest,
    ::testing::Values(
        std::make_pair("an ExecStartPre= added to the unit",
                       R"({"kind": "write-unit", "step": {"content":
                           "[Service]\nExecStartPre=/bin/touch /tmp/pwned\nExecStart=/bin/true\n"}})"),
        std::make_pair("another unit written and started",
                       R"({"append": {"kind": "write-unit", "address": "unit/evil.service",
                           "reason": "unit_missing", "requires": {"gpu_bytes": {}},
                           "frees": {"gpu_bytes": {}}, "unit": "evil.service", "takes_down": false,
                           "step": {"content": "[Service]\nExecStart=/bin/sh -c id\n",
                                    "replaces": false, "adopts": false,
                                    "loses_edits": false}}})"),
        std::make_pair("a unit path that climbs out of the unit directory",
                       R"({"kind": "write-unit", "set": {"unit": "../../../etc/cron.d/x"}})"),
        std::make_pair("the model's commit changed",
                       R"({"kind": "download", "step": {"commit": "../../../../etc"}})"),
        std::make_pair("a removal of the model in use",
                       R"({"append": {"kind": "remove-model", "address": "model/minimax",
                           "reason": "not_used", "requires": {"gpu_bytes": {}},
                           "frees": {"gpu_bytes": {}}, "unit": "", "takes_down": false,
                           "step": {"repo_id": "MiniMaxAI/MiniMax-M2",
                                    "commit": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}}})"),
        std::make_pair("a health gate with another port",
                       R"({"kind": "wait-healthy", "step": {"port": 22}})"),
        std::make_pair("the disable turned onto another unit",
                       R"({"kind": "disable", "set": {"unit": "ssh.service"}})"),
        std::make_pair("an enable of another unit",
                       R"({"append": {"kind": "enable", "address": "unit/evil.service",
                           "reason": "not_enabled", "requires": {"gpu_bytes": {}},
                           "frees": {"gpu_bytes": {}}, "unit": "evil.service", "takes_down": false,
                           "step": {"gpus": [], "for_service": ""}}})")));

// Fingerprints cut out of the file: apply could no longer tell whether what a step touches
// changed since. All of them: the file is refused as unreadable; one: refused as stale.
TEST_F(SavedPlanTamperTest, ASavedPlanWithoutItsFingerprintsNeverRuns) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  std::string file = SavePlan("minimax");
  std::ifstream in(file);
  nlohmann::ordered_json plan = nlohmann::ordered_json::parse(in);
  in.close();
  nlohmann::ordered_json none = plan;
  none["fingerprints"] = nlohmann::ordered_json::object();
  std::ofstream(file, std::ios::trunc) << none.dump(2);
  world.calls.clear();
  RunReport empty = ApplySaved(file);
  EXPECT_EQ(empty.outcome, Outcome::kError) << out.str() << err.str();
  EXPECT_THAT(err.str(), HasSubstr("its fingerprints are empty"));
  EXPECT_TRUE(world.calls.empty()) << world.calls[0] << " ran";

  nlohmann::ordered_json cut = plan;
  cut["fingerprints"].erase("unit/vllm-kimi.service");
  std::ofstream(file, std::ios::trunc) << cut.dump(2);
  world.calls.clear();
  RunReport partial = ApplySaved(file);
  EXPECT_EQ(partial.outcome, Outcome::kStale) << out.str() << err.str();
  EXPECT_EQ(ExitCodeOf(partial.outcome), 5);
  EXPECT_THAT(err.str(), HasSubstr("it carries no fingerprint of unit/vllm-kimi.service"));
  for (const auto& c : world.calls) EXPECT_EQ(c, "observe") << c << " ran";
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

TEST_F(SavedPlanTamperTest, ASavedPlanIsStaleWhenAUnitWasDisabledByHandSince) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  std::string file = SavePlan("minimax");
  world.host.SetUnitFileState("vllm-kimi.service", "disabled");  // systemctl disable, by hand
  world.calls.clear();
  RunReport r = ApplySaved(file);
  EXPECT_EQ(r.outcome, Outcome::kStale) << out.str() << err.str();
  EXPECT_THAT(err.str(), HasSubstr("unit/vllm-kimi.service changed since"));
  for (const auto& c : world.calls) EXPECT_EQ(c, "observe") << c << " ran";
}

TEST_F(SavedPlanTamperTest, TheSavedPlanAsWrittenRunsOnceAndOnlyOnce) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  std::string file = SavePlan("minimax");
  RunReport r = ApplySaved(file);
  ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
  EXPECT_TRUE(Running("vllm-minimax.service"));
  RunReport again = ApplySaved(file);
  EXPECT_EQ(again.outcome, Outcome::kStale) << "state serial moved on";
  EXPECT_EQ(ExitCodeOf(again.outcome), 5);
}

// kill -9 right after a download is published must not leave weights berth never prunes: the
// revision is berth's in the state file before the next action starts.
TEST_F(ReconcilerTest, ADownloadIsRecordedAsBerthsTheMomentItIsPublished) {
  bool recorded_before_start = false;
  world.on_job = [&](const std::string& verb, const std::string&) {
    if (verb != "start") return;
    auto st = StateDir(dir / "state").Load();
    recorded_before_start = st.ok() && st->models.count("moonshotai/Kimi-K2") &&
                            st->models.at("moonshotai/Kimi-K2") == std::vector<std::string>{kKimi};
  };
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  EXPECT_TRUE(recorded_before_start);
}

// A unit written by hand, named state-only by the manifest: berth learns its port and GPU memory
// while it runs, so the switch back to it stops what took them first and waits for its health.
TEST_F(ReconcilerTest, AStateOnlyServiceIsLearnedWhileItRunsThenStartedStopFirstAndGated) {
  ObservedUnit hand;
  hand.name = "hand.service";
  hand.load_state = "loaded";
  hand.active_state = "active";
  hand.sub_state = "running";
  hand.fragment_path = "/etc/systemd/system/hand.service";
  hand.content_hash = "written-by-hand";
  hand.main_pid = 4000;
  Observed& o = world.host.mutable_observed();
  o.units.push_back(hand);
  o.ports.push_back({8000, "0.0.0.0", 4000, "python3", "hand.service"});
  o.gpus[0].processes.push_back({4000, GiB(60), "hand.service", "python3"});
  o.gpus[0].memory_used += GiB(60);
  auto manifest = [&](const std::string& hand_state, const std::string& kimi_state) {
    std::string m = Manifest(false);
    m.replace(m.find("    state: running\n"), 19, "    state: " + kimi_state + "\n");
    return m + "  hand: {state: " + hand_state + "}\n";
  };
  dir.Write("to-kimi/berth.yaml", manifest("stopped", "running"));
  dir.Write("to-hand/berth.yaml", manifest("running", "stopped"));

  ASSERT_EQ(Plan("to-kimi").outcome, Outcome::kPlanned) << out.str() << err.str();
  EXPECT_FALSE(std::filesystem::exists(dir / "state/state.json")) << "a plan writes nothing";
  ASSERT_EQ(Apply("to-kimi").outcome, Outcome::kApplied) << out.str() << err.str();
  EXPECT_FALSE(Running("hand.service"));
  auto st = StateDir(dir / "state").Load();
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(st->learned.count("hand.service")) << StateToJson(*st);
  EXPECT_EQ(st->learned.at("hand.service"), (LearnedService{{8000}, {{0, GiB(60)}}}));

  world.calls.clear();
  RunReport back = Apply("to-hand");
  ASSERT_EQ(back.outcome, Outcome::kApplied) << out.str() << err.str();
  EXPECT_THAT(Steps(back.plan),
              ElementsAre("stop service/vllm-kimi frees_resources",
                          "start service/hand not_running", "wait-healthy service/hand health_gate",
                          "disable unit/vllm-kimi.service wanted_stopped"));
  EXPECT_THAT(world.calls, ::testing::IsSupersetOf(
                               {"stop vllm-kimi.service", "start hand.service", "probe 8000"}));
  auto at = [&](const std::string& call) {
    return std::find(world.calls.begin(), world.calls.end(), call) - world.calls.begin();
  };
  EXPECT_LT(at("stop vllm-kimi.service"), at("start hand.service"));
  EXPECT_LT(at("start hand.service"), at("probe 8000"));
  EXPECT_TRUE(Running("hand.service"));
  EXPECT_EQ(Plan("to-hand").outcome, Outcome::kNoChanges) << out.str();
}

// kill -9 between writing a changed unit and restarting its service: the next run sees the unit
// file up to date, no reload pending and the service up, and must still restart it, because the
// process is the one berth started from the older unit.
TEST_F(ReconcilerTest, KilledBetweenWriteUnitAndRestartStillRestarts) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.on_job = [&](const std::string& verb, const std::string&) {
    if (verb == "daemon-reload") stop = true;  // the last thing the killed process did
  };
  RunReport r = Apply("kimi-longer");
  ASSERT_EQ(r.outcome, Outcome::kInterrupted) << err.str();
  std::filesystem::remove(dir / "state/journal.json");  // kill -9: no journal to go by
  world.on_job = nullptr;
  stop = false;
  const std::string old_invocation = Unit("vllm-kimi.service")->invocation_id;

  RunReport plan = Plan("kimi-longer");
  ASSERT_EQ(plan.plan.actions.size(), 2u) << out.str();
  EXPECT_EQ(plan.plan.actions[0].kind, ActionKind::kRestart);
  EXPECT_THAT(plan.plan.actions[0].detail, HasSubstr("started from an older unit file"));
  ASSERT_EQ(Apply("kimi-longer").outcome, Outcome::kApplied) << err.str();
  EXPECT_NE(Unit("vllm-kimi.service")->invocation_id, old_invocation);
  EXPECT_EQ(Plan("kimi-longer").outcome, Outcome::kNoChanges) << out.str();
}

// A longer health timeout changes only TimeoutStartSec=, which systemd alone reads: the unit is
// rewritten and systemd reloaded, the process keeps running, and the next plan is empty, also
// when the record of its start was written by an older berth (a spec hash, not the settings).
TEST_F(ReconcilerTest, AReloadOnlyChangeKeepsTheProcessAndTheNextPlanIsEmpty) {
  std::string slow = Manifest(false);
  slow.replace(slow.find("timeout: 10m"), 12, "timeout: 20m");
  dir.Write("kimi-slow/berth.yaml", slow);
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  const std::string unit = "vllm-kimi.service";
  const std::string invocation = Unit(unit)->invocation_id;
  auto state = StateDir(dir / "state").Load();
  ASSERT_TRUE(state.ok());
  ASSERT_TRUE(state->started.count(unit));
  EXPECT_TRUE(state->started[unit].second.starts_with("restart-keys:"));
  state->started[unit].second = Unit(unit)->spec_hash;  // as an older berth recorded it
  ASSERT_TRUE(StateDir(dir / "state").Save(*state).ok());

  world.calls.clear();
  RunReport r = Apply("kimi-slow");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("TimeoutStartSec changed: 11m → 21m (daemon-reload only, no "
                                   "restart)"));
  EXPECT_EQ(Count("restart " + unit), 0u);
  EXPECT_EQ(Unit(unit)->invocation_id, invocation);
  EXPECT_EQ(Plan("kimi-slow").outcome, Outcome::kNoChanges) << out.str();
  state = StateDir(dir / "state").Load();
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->started[unit].second.starts_with("restart-keys:"));
}

TEST_F(ReconcilerTest, NotConfirmedChangesNothing) {
  std::istringstream no("no\n");
  Reporter say(out, err);
  ReconcileOptions o;
  o.manifest_path = dir / "kimi/berth.yaml";
  o.state_dir = dir / "state";
  o.confirm = &no;
  RunReport r = Reconciler(world.Deps(&say)).Run(o);
  EXPECT_EQ(r.outcome, Outcome::kNotConfirmed);
  EXPECT_THAT(world.calls, ElementsAre("observe"));
}

// The text and JSON plans of the same inputs list the same actions, the resume gate and the
// last failure's warning included: one path makes both.
TEST_F(ReconcilerTest, TextAndJsonPlansOfTheSameInputsListTheSameActions) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.never_healthy.insert("vllm-minimax.service");
  ASSERT_EQ(Apply("minimax").outcome, Outcome::kFailed);
  world.never_healthy.clear();
  Journal j;
  j.started = "2026-12-01T03:00:00Z";
  j.pid = "4242";
  j.entries.push_back({1, "stop", "service/vllm-kimi", "running", ""});
  ASSERT_TRUE(StateDir(dir / "state").SaveJournal(j).ok());

  RunReport text = Pass("minimax", false, PlanFormat::kText);
  std::string text_out = out.str();
  RunReport json = Pass("minimax", false, PlanFormat::kJson);
  nlohmann::json doc = nlohmann::json::parse(out.str());
  EXPECT_EQ(err.str(), "") << "JSON mode writes only the document to stdout";

  // Actions from the text: "  3  - stop          service/vllm-kimi   ...".
  std::vector<std::string> from_text, from_json;
  std::regex line(R"(^\s+\d+\s+\S\s+(\S+)\s+(\S+))");
  std::istringstream lines(text_out);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) from_text.push_back(m[1].str() + " " + m[2].str());
  }
  for (const auto& c : doc["resource_changes"])
    from_json.push_back(c["action"].get<std::string>() + " " + c["address"].get<std::string>());
  EXPECT_EQ(from_text, from_json);
  ASSERT_FALSE(from_json.empty());
  EXPECT_EQ(text.plan.actions.size(), json.plan.actions.size());
  // The failure warning and the interrupted apply are in both.
  std::string warnings = doc["warnings"].dump();
  EXPECT_THAT(warnings, HasSubstr("last apply failed on service/vllm-minimax"));
  EXPECT_THAT(warnings, HasSubstr("stopped at step 1"));
  EXPECT_THAT(text_out, HasSubstr("last apply failed on service/vllm-minimax"));
  EXPECT_THAT(text_out, HasSubstr("stopped at step 1"));
}

// Boot state: after a switch a reboot brings up the new service, not the old one.
}  // namespace
}  // namespace berth::testing
