// The executor runs the switches the planner stated (core/plan.h Switch) and works out
// nothing: a plan built by hand here whose stop carries no health gate, whose Switch does, is
// rolled back waiting for the Switch's gate; the fleet's turn is asked before the steps the
// plan marks takes_down; the journal hears each step's StepState.
#include "engine/apply/executor.h"

#include "providers/front/haproxy_admin.h"
#include "providers/health/standby_client.h"
#include "tests/engine/reconciler_fixture.h"

namespace berth::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

class ExecutorSwitchTest : public ReconcilerTest {
 protected:
  static Action Act(ActionKind kind, const std::string& name) {
    Action a = MakeAction(kind);
    a.address = "service/" + name;
    a.unit = name + ".service";
    return a;
  }

  // Kimi stops, MiniMax starts on port 8000 and is waited for: a stop-first switch. The stop
  // carries a service payload only; Kimi's gate is on the Switch alone (port 0: none).
  static berth::Plan StopFirst(int kimi_gate_port) {
    berth::Plan plan;
    Action write = Act(ActionKind::kWriteUnit, "vllm-minimax");
    write.address = "unit/vllm-minimax.service";
    write.As<UnitFileStep>().content =
        "[Unit]\nDescription=minimax\n[Service]\nExecStart=/bin/true\n";
    Action reload = MakeAction(ActionKind::kDaemonReload);
    reload.address = "systemd";
    Action stop = Act(ActionKind::kStop, "vllm-kimi");
    stop.takes_down = true;
    Action start = Act(ActionKind::kStart, "vllm-minimax");
    Action gate = Act(ActionKind::kWaitHealthy, "vllm-minimax");
    gate.As<HealthStep>().port = 8000;
    gate.As<HealthStep>().path = "/health";
    gate.As<HealthStep>().timeout_ms = 60'000;
    gate.As<HealthStep>().interval_ms = 1'000;
    plan.actions = {write, reload, stop, start, gate};
    Switch sw;
    sw.address = "service/vllm-minimax";
    sw.unit = "vllm-minimax.service";
    sw.mode = SwitchMode::kStopFirst;
    sw.steps = {2, 3, 4};
    sw.start = 3;
    sw.gates = {4};
    sw.health_gate = 4;
    sw.needs_turn = true;
    Replaced kimi;
    kimi.address = "service/vllm-kimi";
    kimi.unit = "vllm-kimi.service";
    kimi.stop_step = 2;
    kimi.gate.port = kimi_gate_port;
    kimi.gate.path = "/health";
    kimi.gate.timeout_ms = 600'000;
    kimi.gate.interval_ms = 5'000;
    sw.replaces = {kimi};
    plan.switches = {sw};
    return plan;
  }

  ExecutorDeps Deps() {
    ExecutorDeps deps;
    deps.systemd = &world.systemd;
    deps.unit_files = &world.unit_files;
    deps.health = &world.health;
    deps.clock = &world.clock;
    return deps;
  }
};

struct Recorder : StepObserver {
  std::vector<std::pair<int, StepState>> seen;
  std::vector<std::string> notes;
  void OnStep(const StepEvent& e) override { seen.emplace_back(e.step, e.state); }
  void OnNote(const std::string& line) override { notes.push_back(line); }
};

// The fleet's turn as the executor sees it, counting what it is asked.
struct FakeTurn : TurnSeam {
  int acquired = 0, checked = 0, released = 0;
  bool held = false;
  bool lose_after_first = false;  // StillHeld says no once, after the first acquire
  Status Acquire() override {
    ++acquired;
    held = true;
    return Status::Ok();
  }
  bool StillHeld(std::string* why) override {
    ++checked;
    if (lose_after_first && checked == 1) {
      *why = "its lease expired";
      return false;
    }
    return held;
  }
  void Release() override {
    ++released;
    held = false;
  }
};

TEST_F(ExecutorSwitchTest, AFailedStopFirstSwitchStartsWhatItReplacedAndWaitsForTheSwitchsGate) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  Recorder journal;
  FakeTurn turn;
  ExecutorDeps deps = Deps();
  deps.observers = {&journal};
  deps.turn = &turn;
  Executor ex(deps);
  ExecResult r = ex.Run(StopFirst(8000));
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_step, 5);
  EXPECT_TRUE(r.rolled_back);
  EXPECT_EQ(turn.acquired, 1) << "taken once, before the stop the plan marks takes_down";
  EXPECT_EQ(turn.released, 1) << "given back once the undo ended";
  // The undo told through the observer, as the progress shows it.
  EXPECT_THAT(journal.notes, Contains(HasSubstr("rollback: start vllm-kimi.service again")));
  EXPECT_THAT(journal.seen, Contains(std::make_pair(5, StepState::kFailed)));
  EXPECT_THAT(r.rollback_log, Contains(HasSubstr("start vllm-kimi.service again")));
  EXPECT_THAT(r.rollback_log,
              Contains(HasSubstr("vllm-kimi.service is healthy again; port 8000 was dark for")));
  // Kimi's gate was probed after the rollback started it again.
  auto start = std::find(world.calls.begin(), world.calls.end(), "start vllm-kimi.service");
  ASSERT_NE(start, world.calls.end());
  EXPECT_NE(std::find(start, world.calls.end(), "probe 8000"), world.calls.end());
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_FALSE(Running("vllm-minimax.service"));
  // Its start-to-healthy time is recorded from the rollback's start.
  EXPECT_THAT(r.start_to_healthy_ms, Contains(Pair("vllm-kimi.service", ::testing::_)));
  // The journal heard every step begin and end, the gate as failed.
  EXPECT_THAT(journal.seen, ElementsAre(Pair(1, StepState::kRunning), Pair(1, StepState::kDone),
                                        Pair(2, StepState::kRunning), Pair(2, StepState::kDone),
                                        Pair(3, StepState::kRunning), Pair(3, StepState::kDone),
                                        Pair(4, StepState::kRunning), Pair(4, StepState::kDone),
                                        Pair(5, StepState::kRunning), Pair(5, StepState::kFailed)));
  EXPECT_STREQ(StepStateName(StepState::kFailed), "failed");
}

// A front that answers every call but a route to `refuse`, which it does not know (the running
// HAProxy has no such server: a configuration file it never loaded).
struct RefusingFront : FrontControl {
  std::vector<std::string>* calls;
  std::string refuse;
  RefusingFront(std::vector<std::string>* c, std::string r) : calls(c), refuse(std::move(r)) {}
  Status Route(const std::string& s) override {
    calls->push_back("route " + s);
    return s == refuse ? Status::NotFound("backend models has no server '" + s + "'")
                       : Status::Ok();
  }
  Status Hold() override {
    calls->push_back("hold");
    return Status::Ok();
  }
  Status Drain(const std::string&) override { return Status::Ok(); }
  Result<int64_t> Sessions(const std::string&) override { return int64_t{0}; }
  Status SetReady(bool) override { return Status::Ok(); }
  Result<FrontStats> Stats() override { return FrontStats{}; }
};

// Behind a front, the route to the new server comes after the old one stopped: when it fails
// (the running HAProxy knows no such server), the switch is undone like a failed gate: the new
// server stops, the old one starts, passes its gate, and the front routes back to it. Before,
// nothing was undone: 5 of 9 steps done, requests held, then 503 until the next pass.
TEST_F(ExecutorSwitchTest, ARouteThatFailsAfterTheOldServerStoppedIsRolledBack) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  berth::Plan plan = StopFirst(8000);
  plan.actions.pop_back();  // no gate of its own: the route is what fails
  plan.switches[0].gates.clear();
  plan.switches[0].health_gate.reset();
  Action route = MakeAction(ActionKind::kRoute);
  route.address = "front/8000";
  route.As<FrontStep>().port = 8000;
  route.As<FrontStep>().server = "vllm-minimax";
  route.As<FrontStep>().socket = "/run/f/8000.sock";
  plan.actions.push_back(route);
  plan.switches[0].steps = {2, 3, 4};
  plan.switches[0].front_port = 8000;
  plan.switches[0].front_socket = "/run/f/8000.sock";
  plan.switches[0].undo_route = "vllm-kimi";
  std::vector<std::string> front_calls;
  ExecutorDeps deps = Deps();
  deps.connect_front = [&](const std::string&, const std::string&) {
    return std::make_unique<RefusingFront>(&front_calls, "vllm-minimax");
  };
  ExecResult r = Executor(deps).Run(plan);
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_step, 5);
  EXPECT_TRUE(r.rolled_back) << ::testing::PrintToString(r.rollback_log);
  EXPECT_THAT(r.rollback_log, Contains(HasSubstr("start vllm-kimi.service again")));
  EXPECT_THAT(r.rollback_log,
              Contains(HasSubstr("route the front of port 8000 back to vllm-kimi")));
  EXPECT_THAT(front_calls, ElementsAre("route vllm-minimax", "route vllm-kimi"));
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_FALSE(Running("vllm-minimax.service"));
}

TEST_F(ExecutorSwitchTest, AReplacedServiceWithoutAGateOnItsSwitchIsNotWaitedFor) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  Executor ex(Deps());
  ExecResult r = ex.Run(StopFirst(0));
  EXPECT_TRUE(r.rolled_back);
  EXPECT_THAT(r.rollback_log,
              Contains("vllm-kimi.service runs again; berth knows no health check for it, so it "
                       "did not wait for one"));
}

TEST_F(ExecutorSwitchTest, AStepTheSwitchDoesNotMarkAsTakingDownAsksNoTurn) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  berth::Plan plan = StopFirst(8000);
  plan.actions[2].takes_down = false;
  FakeTurn turn;
  ExecutorDeps deps = Deps();
  deps.turn = &turn;
  Executor ex(deps);
  ex.Run(plan);
  EXPECT_EQ(turn.acquired, 0) << "the executor reads takes_down; it does not work it out";
  EXPECT_EQ(turn.released, 0) << "nothing taken, nothing given back";
}

TEST_F(ExecutorSwitchTest, ALaterStepThatTakesDownChecksTheTurnAndTakesItAgainWhenLost) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  berth::Plan plan = StopFirst(8000);
  // Two steps that take a service down: the first acquires, the second checks it still holds.
  size_t second = 0;
  for (size_t i = 0; i < plan.actions.size(); ++i)
    if (plan.actions[i].kind == ActionKind::kStart) second = i;
  ASSERT_GT(second, 0u);
  plan.actions[second].takes_down = true;
  FakeTurn turn;
  turn.lose_after_first = true;
  Recorder seen;
  ExecutorDeps deps = Deps();
  deps.turn = &turn;
  deps.observers = {&seen};
  Executor ex(deps);
  ex.Run(plan);
  EXPECT_EQ(turn.checked, 1) << "the later step asks whether the turn is still held";
  EXPECT_EQ(turn.acquired, 2) << "lost: taken again before the step goes on";
  EXPECT_EQ(turn.released, 1);
  EXPECT_THAT(seen.notes, Contains(HasSubstr("turn was lost (its lease expired)")));
}

// vLLM's sleep routes as a server that answers them (StandbyClient), counting what it is asked.
struct FakeStandby : StandbyClient {
  std::vector<std::string> calls;
  bool asleep = false;
  bool refuse_sleep = false, refuse_wake = false;
  Status Sleep(const std::string&, int port, int level, uint64_t) override {
    calls.push_back("sleep " + std::to_string(port) + " level " + std::to_string(level));
    if (refuse_sleep) return Status::Unavailable("HTTP 404 (no sleep routes)");
    asleep = true;
    return Status::Ok();
  }
  Status WakeUp(const std::string&, int port, uint64_t) override {
    calls.push_back("wake " + std::to_string(port));
    if (refuse_wake) return Status::Unavailable("HTTP 500 (the engine died)");
    asleep = false;
    return Status::Ok();
  }
  Result<bool> IsSleeping(const std::string&, int, uint64_t) override { return asleep; }
};

class ExecutorStandbyTest : public ExecutorSwitchTest {
 protected:
  // StopFirst, but Kimi (port 8000's server) is put to sleep instead of stopped; MiniMax's
  // gate fails as in StopFirst, and the undo wakes Kimi.
  static berth::Plan SleepFirst() {
    berth::Plan plan = StopFirst(8000);
    Action sleep = Act(ActionKind::kSleep, "vllm-kimi");
    sleep.takes_down = true;
    sleep.reason = Reason::kStandby;
    StandbyStep& st = sleep.As<StandbyStep>();
    st.host = "127.0.0.1";
    st.port = 8000;
    st.timeout_ms = 60'000;
    st.gpus = {0};
    st.residual_bytes = GiB(2);
    plan.actions[2] = sleep;
    // MiniMax on a port of its own (a sleeping Kimi keeps 8000), where nothing answers.
    plan.actions[4].As<HealthStep>().port = 8001;
    plan.switches[0].replaces[0].asleep = true;
    plan.switches[0].replaces[0].wake = st;  // the undo wakes it where it slept
    return plan;
  }
  ExecutorDeps StandbyDeps(Recorder* seen) {
    ExecutorDeps deps = Deps();
    deps.standby = &standby;
    deps.observers = {seen};
    return deps;
  }
  FakeStandby standby;
};

TEST_F(ExecutorStandbyTest, ARollbackWakesTheServiceItPutToSleepInsteadOfStartingItCold) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  Recorder seen;
  ExecutorDeps deps = StandbyDeps(&seen);
  deps.gpu_held = [](const std::string&) -> Result<std::map<int, uint64_t>> {
    return std::map<int, uint64_t>{{0, GiB(1)}};  // under the 2 GiB residue: freed
  };
  Executor ex(deps);
  ExecResult r = ex.Run(SleepFirst());
  EXPECT_EQ(r.failed_step, 5);
  EXPECT_TRUE(r.rolled_back);
  EXPECT_THAT(standby.calls, ElementsAre("sleep 8000 level 1", "wake 8000"));
  EXPECT_THAT(seen.notes, Contains(HasSubstr("service/vllm-kimi is asleep; NVML: its processes "
                                             "hold GPU 0 1.07 GB")));
  EXPECT_THAT(r.rollback_log, Contains("wake vllm-kimi.service (asleep since the switch)"));
  EXPECT_THAT(r.rollback_log, Contains(HasSubstr("vllm-kimi.service is healthy again")));
  // Neither stopped nor started: the process that slept is the one that serves again.
  for (const std::string& c : world.calls) {
    EXPECT_NE(c, "stop vllm-kimi.service");
    EXPECT_NE(c, "start vllm-kimi.service");
  }
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_FALSE(standby.asleep);
}

TEST_F(ExecutorStandbyTest, ASleepThatFailsOrFreesTooLittleIsAStopAndTheUndoStartsIt) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  for (bool refuse : {true, false}) {
    SCOPED_TRACE(refuse ? "the sleep refused" : "NVML says it still holds its memory");
    ASSERT_TRUE(Running("vllm-kimi.service"));
    world.calls.clear();
    standby = FakeStandby();
    standby.refuse_sleep = refuse;
    Recorder seen;
    ExecutorDeps deps = StandbyDeps(&seen);
    deps.gpu_held = [](const std::string&) -> Result<std::map<int, uint64_t>> {
      return std::map<int, uint64_t>{{0, GiB(50)}};
    };
    Executor ex(deps);
    ExecResult r = ex.Run(SleepFirst());
    EXPECT_TRUE(r.rolled_back);
    EXPECT_THAT(world.calls, Contains("stop vllm-kimi.service"));
    EXPECT_THAT(seen.notes,
                Contains(HasSubstr(refuse ? "the sleep failed: HTTP 404 (no sleep routes); "
                                            "stopping vllm-kimi.service instead (standby lost)"
                                          : "asleep, but NVML says its processes still hold GPU "
                                            "0 53.7 GB (more than the 2.15 GB a sleeping server "
                                            "keeps)")));
    // The undo starts what the sleep stopped: no wake of a stopped server.
    EXPECT_THAT(r.rollback_log, Contains("start vllm-kimi.service again"));
    EXPECT_EQ(std::count(standby.calls.begin(), standby.calls.end(), "wake 8000"), 0);
    EXPECT_TRUE(Running("vllm-kimi.service"));
  }
}

TEST_F(ExecutorStandbyTest, AnUndoThatCannotWakeStopsAndStartsTheSleeperCold) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  standby.refuse_wake = true;
  Recorder seen;
  Executor ex(StandbyDeps(&seen));
  ExecResult r = ex.Run(SleepFirst());
  EXPECT_TRUE(r.rolled_back);
  EXPECT_THAT(r.rollback_log, Contains(HasSubstr("wake vllm-kimi.service (asleep since the "
                                                 "switch) failed: HTTP 500 (the engine died); "
                                                 "starting it cold")));
  // Stopped first: a start job alone would find it active and leave it asleep.
  auto stopped = std::find(world.calls.begin(), world.calls.end(), "stop vllm-kimi.service");
  ASSERT_NE(stopped, world.calls.end());
  EXPECT_NE(std::find(stopped, world.calls.end(), "start vllm-kimi.service"), world.calls.end());
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

TEST_F(ExecutorStandbyTest, AWakeThatFailsRestartsTheServiceCold) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  standby.asleep = true;
  standby.refuse_wake = true;
  Recorder seen;
  Executor ex(StandbyDeps(&seen));
  Action wake = Act(ActionKind::kWake, "vllm-kimi");
  wake.reason = Reason::kAsleep;
  wake.As<StandbyStep>().port = 8000;
  wake.As<StandbyStep>().timeout_ms = 60'000;
  Status s = ex.RunAction(wake);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(standby.calls, ElementsAre("wake 8000"));
  EXPECT_THAT(world.calls, Contains("restart vllm-kimi.service"));
  EXPECT_THAT(world.calls, Not(Contains("stop vllm-kimi.service")));
  EXPECT_THAT(seen.notes, Contains(HasSubstr("the wake failed: HTTP 500 (the engine died); "
                                             "restarting vllm-kimi.service cold instead")));
}

TEST(SwitchesOfPlan, TheJournalsUndoListComesFromThePlansSwitches) {
  Plan plan;
  Action restart = MakeAction(ActionKind::kRestart);
  restart.address = "service/x";
  restart.unit = "x.service";
  Action gate = MakeAction(ActionKind::kWaitHealthy, "service/x", Reason::kHealthGate);
  gate.unit = "x.service";
  gate.As<HealthStep>().port = 8000;
  plan.actions = {restart, gate};
  Switch sw;
  sw.address = "service/x";
  sw.unit = "x.service";
  sw.mode = SwitchMode::kInPlace;
  sw.steps = {0, 1};
  sw.start = 0;
  sw.gates = {1};
  sw.health_gate = 1;
  sw.restores_unit = true;
  plan.switches = {sw};
  std::vector<SwitchUndo> undo =
      SwitchesOf(plan, [](const std::string& unit) { return std::optional<std::string>(unit); });
  ASSERT_EQ(undo.size(), 1u);
  EXPECT_EQ(undo[0].address, "service/x");
  EXPECT_EQ(undo[0].unit_before, "x.service");
  EXPECT_EQ(undo[0].gate.port, 8000);
  // Without the planner's word that it restores its unit, nothing is read.
  plan.switches[0].restores_unit = false;
  undo = SwitchesOf(plan, [](const std::string& unit) { return std::optional<std::string>(unit); });
  ASSERT_EQ(undo.size(), 1u);
  EXPECT_FALSE(undo[0].unit_before);
}

// A prewarm step reads its snapshot's weights through the prewarm seam before the switch goes
// dark, its progress as notes; one that fails, or a berth without the seam, says so and the
// switch goes on (the start reads from disk): the step is done in every case.
TEST_F(ExecutorSwitchTest, APrewarmReadsBeforeTheStopAndAFailedOneFailsNothing) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  berth::Plan plan = StopFirst(8000);
  Action prewarm = MakeAction(ActionKind::kPrewarm, "model/minimax", Reason::kPrewarm);
  prewarm.unit = "vllm-minimax.service";
  prewarm.As<PrewarmStep>().snapshot = "/models/models--org--minimax/snapshots/abc";
  prewarm.As<PrewarmStep>().bytes = 3000;
  plan.actions.insert(plan.actions.begin() + 2, prewarm);
  Switch& sw = plan.switches[0];
  sw.steps = {3, 4, 5};
  sw.start = 4;
  sw.gates = {5};
  sw.health_gate = 5;
  sw.replaces[0].stop_step = 3;

  for (int variant = 0; variant < 3; ++variant) {  // reads; fails; no seam
    world.calls.clear();
    Recorder journal;
    ExecutorDeps deps = Deps();
    deps.observers = {&journal};
    std::vector<std::string> asked;
    if (variant < 2)
      deps.prewarm = [&](const PrewarmStep& step,
                         const std::function<void(uint64_t, uint64_t)>& progress,
                         const std::atomic<bool>*) -> Result<uint64_t> {
        asked.push_back(step.snapshot);
        world.calls.push_back("prewarm");
        if (variant == 1) return Status::NotFound("no snapshot folder " + step.snapshot);
        progress(1000, 3000);
        progress(3000, 3000);
        return uint64_t{3000};
      };
    Executor ex(deps);
    ExecResult r = ex.Run(plan);
    // (The hand-written minimax listens nowhere: its gate fails and kimi is started again.)
    EXPECT_EQ(r.failed_step, 6) << variant << ": " << r.status.message();
    EXPECT_THAT(journal.seen, Contains(std::make_pair(3, StepState::kDone))) << variant;
    EXPECT_TRUE(Running("vllm-kimi.service")) << variant;
    if (variant == 0) {
      EXPECT_THAT(asked, ElementsAre("/models/models--org--minimax/snapshots/abc"));
      auto pos = [&](const std::string& c) {
        return std::find(world.calls.begin(), world.calls.end(), c) - world.calls.begin();
      };
      EXPECT_LT(pos("prewarm"), pos("stop vllm-kimi.service"));
      EXPECT_THAT(journal.notes, Contains("prewarm of model/minimax: 3 kB of 3 kB read"));
      EXPECT_THAT(journal.notes,
                  Contains("prewarm of model/minimax: 3 kB read into the page cache"));
    } else if (variant == 1) {
      EXPECT_THAT(journal.notes,
                  Contains(HasSubstr("prewarm of model/minimax failed: no snapshot folder "
                                     "/models/models--org--minimax/snapshots/abc; the start of "
                                     "vllm-minimax.service reads what is not cached from disk")));
    } else {
      EXPECT_THAT(journal.notes, Contains(HasSubstr("cannot read files ahead")));
    }
  }
}

}  // namespace
}  // namespace berth::testing
