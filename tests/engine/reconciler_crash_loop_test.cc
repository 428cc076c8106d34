// The reconciler on the in-memory host when a service crash-loops: systemd restarting it, giving
// up on it, and what the loop and its metrics say meanwhile.
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

TEST_F(ReconcilerTest, CrashLoopFailsFastWithoutWaitingForTheTimeout) {
  world.crash_loop.insert("vllm-kimi.service");
  RunReport r = Apply("kimi");
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_THAT(r.status.message(), HasSubstr("systemd is restarting it"));
  EXPECT_EQ(world.probes["vllm-kimi.service"], 0) << "no health probe of a crash-looping unit";
  EXPECT_LT(SecondsSlept(), 1);

  // systemd gives up after StartLimitBurst: the unit ends failed. berth does not start it
  // again on its own (ACrashLoopSystemdGaveUpOnIsNotStartedAgainUntilResetOrChanged).
  world.host.Stop("vllm-kimi.service");
  world.host.Unit("vllm-kimi.service").active_state = "failed";
  world.crash_loop.clear();
  RunReport gave_up = Plan("kimi");
  EXPECT_THAT(gave_up.plan.actions,
              Not(::testing::Contains(::testing::Field(&Action::kind, ActionKind::kStart))))
      << out.str();
  EXPECT_EQ(gave_up.crash_looping.count("vllm-kimi"), 1u);
  // Fixed, and its failure cleared (systemctl reset-failed): it converges.
  world.host.Unit("vllm-kimi.service").active_state = "inactive";
  world.host.Unit("vllm-kimi.service").n_restarts = 0;
  world.host.Unit("vllm-kimi.service").result = "success";
  RunReport again = Plan("kimi");
  ASSERT_EQ(again.plan.actions.size(), 3u) << out.str();  // start, gate, enable
  EXPECT_EQ(again.plan.actions[0].reason, Reason::kNotRunning);
  retry = true;
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(Plan("kimi").outcome, Outcome::kNoChanges) << out.str();
}

// The replacement passed its gates, then crashes again and again; systemd restarts it
// (Restart=). That is not converged: the plan, the loop's line and the metrics say
// crash-looping, with the restart count, and berth adds no restart of its own.
TEST_F(ReconcilerTest, AServiceThatCrashLoopsAfterItsGatesIsCrashLoopingNotConverged) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  size_t starts = Count("start vllm-kimi.service") + Count("restart vllm-kimi.service");
  ObservedUnit& u = world.host.Unit("vllm-kimi.service");
  u.active_state = "activating";  // waiting for its automatic restart
  u.sub_state = "auto-restart";
  u.n_restarts = 3;
  u.result = "exit-code";

  RunReport r = Apply("kimi");
  EXPECT_EQ(r.outcome, Outcome::kNoChanges) << out.str() << err.str();
  EXPECT_EQ(r.services_up, 0);
  EXPECT_EQ(r.services_wanted, 1);
  EXPECT_EQ(r.service_up.at("vllm-kimi"), false);
  ASSERT_EQ(r.crash_looping.size(), 1u);
  EXPECT_EQ(r.crash_looping.at("vllm-kimi"),
            "restarted 3 times by systemd, now activating/auto-restart");
  EXPECT_EQ(r.restarts.at("vllm-kimi"), 3u);
  EXPECT_EQ(Count("start vllm-kimi.service") + Count("restart vllm-kimi.service"), starts)
      << "the restarts are systemd's";
  EXPECT_THAT(out.str() + err.str(), HasSubstr("service/vllm-kimi is crash-looping: restarted 3 "
                                               "times by systemd"));

  NextPass next;
  next.kind = NextPass::Kind::kAfter;
  next.wait = std::chrono::minutes(5);
  std::string line = StatusLine(r, next, 0, false);
  EXPECT_EQ(line,
            "crash-looping: vllm-kimi (restarted 3 times by systemd, now "
            "activating/auto-restart), 0/1 services up, next pass in 5m");
  LoopMetrics m;
  m.Record(r, 1700000000, 1);
  std::string text = MetricsText(m);
  EXPECT_THAT(text, HasSubstr("\nberth_services_up 0\n"));
  EXPECT_THAT(text, HasSubstr("\nberth_services_crash_looping 1\n"));
  EXPECT_THAT(
      text, HasSubstr("\nberth_service_up{service=\"vllm-kimi\",unit=\"vllm-kimi.service\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "\nberth_service_crash_looping{service=\"vllm-kimi\",unit=\"vllm-kimi.service\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("\nberth_service_restarts{service=\"vllm-kimi\",unit=\"vllm-kimi.service\"} 3\n"));

  // Between two crashes it runs: still crash-looping until it has run 10 minutes since.
  u.active_state = "active";
  u.sub_state = "running";
  u.n_restarts = 4;
  u.active_enter_usec = static_cast<uint64_t>(world.clock.UnixNow() * 1e6) - 60'000'000;
  r = Plan("kimi");
  EXPECT_EQ(r.outcome, Outcome::kNoChanges) << out.str();
  EXPECT_EQ(r.services_up, 0);
  EXPECT_THAT(r.crash_looping.at("vllm-kimi"), HasSubstr("restarted 4 times"));
  world.clock.Advance(std::chrono::minutes(10));
  r = Plan("kimi");
  EXPECT_TRUE(r.crash_looping.empty());
  EXPECT_EQ(r.services_up, 1);
  EXPECT_EQ(r.restarts.at("vllm-kimi"), 4u);
  EXPECT_EQ(StatusLine(r, next, 0, false), "converged: 1/1 services up, next pass in 5m");
}

// Once systemd gave up (StartLimitBurst= reached: failed, start-limit-hit), berth holds the
// start: another would reload the model to crash again. The operator's reset-failed, or a
// change of the service, lets berth start it.
// Right after its first crash (kill -9: Result=signal) systemd waits RestartSec before the
// restart it counts: berth says what happened, not "restarted 0 times".
TEST_F(ReconcilerTest, AFirstCrashSaysHowTheServerExitedAndThatSystemdRestartsIt) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  ObservedUnit& u = world.host.Unit("vllm-kimi.service");
  u.active_state = "activating";
  u.sub_state = "auto-restart";
  u.n_restarts = 0;
  u.result = "signal";
  u.exec_main_status = 9;
  RunReport r = Apply("kimi");
  EXPECT_EQ(r.services_up, 0);
  ASSERT_EQ(r.crash_looping.size(), 1u);
  EXPECT_EQ(r.crash_looping.at("vllm-kimi"),
            "exited (killed by signal 9), systemd restarts it after RestartSec=, now "
            "activating/auto-restart");
  u.result = "exit-code";
  u.exec_main_status = 1;
  EXPECT_THAT(Apply("kimi").crash_looping.at("vllm-kimi"), HasSubstr("exited (exit status 1)"));
}

TEST_F(ReconcilerTest, ACrashLoopSystemdGaveUpOnIsNotStartedAgainUntilResetOrChanged) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.host.Stop("vllm-kimi.service");
  ObservedUnit& u = world.host.Unit("vllm-kimi.service");
  u.active_state = "failed";
  u.sub_state = "failed";
  u.result = "start-limit-hit";
  u.n_restarts = 5;
  size_t starts = Count("start vllm-kimi.service");

  RunReport r = Apply("kimi");
  EXPECT_EQ(r.outcome, Outcome::kNoChanges) << out.str() << err.str();
  EXPECT_EQ(Count("start vllm-kimi.service"), starts) << "held: not started again";
  EXPECT_EQ(r.services_up, 0);
  EXPECT_EQ(r.crash_looping.at("vllm-kimi"),
            "restarted 5 times by systemd, then systemd gave up (start-limit-hit)");
  EXPECT_THAT(out.str() + err.str(), HasSubstr("service/vllm-kimi crash-looped"));
  EXPECT_THAT(out.str() + err.str(), HasSubstr("systemctl reset-failed vllm-kimi.service"));
  NextPass stop_now;
  EXPECT_THAT(StatusLine(r, stop_now, 0, false),
              ::testing::StartsWith("crash-looping: vllm-kimi (restarted 5 times by systemd, "
                                    "then systemd gave up (start-limit-hit)), 0/1 services up"));

  // A change of the service (its unit) is a new try.
  RunReport changed = Plan("kimi-longer");
  EXPECT_THAT(changed.plan.actions,
              ::testing::Contains(::testing::Field(&Action::kind, ActionKind::kStart)))
      << out.str();

  // systemctl reset-failed: inactive, counters cleared. berth starts it, and it converges.
  u.active_state = "inactive";
  u.sub_state = "dead";
  u.result = "success";
  u.n_restarts = 0;
  r = Apply("kimi");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(Count("start vllm-kimi.service"), starts + 1);
  EXPECT_EQ(r.services_up, 1);
  EXPECT_TRUE(r.crash_looping.empty());
}

// After the pass that fails and holds the change, the loop waits for the manifest: its metrics
// say held from that pass on, as a fresh process's first pass would.
TEST_F(ReconcilerTest, UnderTheLoopTheMetricsSayHeldFromTheFailingPassOn) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.never_healthy.insert("vllm-minimax.service");
  LoopOptions lo;
  lo.schedule.interval = std::chrono::minutes(5);
  lo.schedule.jitter = 0;
  lo.metrics_path = dir / "berth.prom";
  LoopDeps ld;
  ld.clock = &world.clock;
  ld.stop = &stop;
  ld.manifest_fingerprint = [] { return "unchanged"; };
  ld.pass = [&] { return Apply("minimax"); };
  std::vector<std::string> written;
  ld.write_file = [&](const std::string&, const std::string& text) {
    written.push_back(text);
    return Status::Ok();
  };
  world.clock.on_sleep = [&](std::chrono::milliseconds elapsed) {
    if (elapsed >= std::chrono::hours(1)) stop = true;
  };
  EXPECT_EQ(ExitCodeOf(RunLoop(lo, ld)), 0);
  ASSERT_EQ(written.size(), 2u) << "after the one pass, and when the loop stops";
  for (const std::string& text : written) {
    EXPECT_THAT(text, HasSubstr("\nberth_change_held 1\n"));
    EXPECT_THAT(text, HasSubstr("\nberth_failures_total{kind=\"failed\"} 1\n"));
  }
}

}  // namespace
}  // namespace berth::testing
