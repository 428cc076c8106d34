// The loop around one pass, with scripted fake passes and a fake clock: hours of schedule run in
// microseconds and nothing sleeps for real (the watchdog-thread test waits for the pings).
#include "engine/cli/commands.h"
#include "engine/loop/reconcile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <sstream>
#include <thread>

#include "tests/loop/loop_fakes.h"

namespace berth::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

RunReport Report(Outcome o, std::string message = "", bool terminal = false) {
  RunReport r;
  r.outcome = o;
  r.terminal = terminal;
  if (!message.empty()) r.status = Status::Unavailable(message);
  r.services_up = o == Outcome::kNoChanges || o == Outcome::kApplied ? 2 : 1;
  r.services_wanted = 2;
  r.observed = o != Outcome::kError;  // an error pass (a busy lock) never saw the host
  r.service_up = {{"svc-a", r.services_up == 2}, {"svc-b", true}};
  return r;
}
RunReport Converged() { return Report(Outcome::kNoChanges); }
RunReport Errored() { return Report(Outcome::kError, "lock busy: held by berth apply"); }
RunReport Failed() { return Report(Outcome::kFailed, "svc-a.service did not become healthy"); }

// Plays `script` one report per pass, noting when each pass started; after the last one it asks
// the loop to stop (as SIGTERM would), unless the test stops it otherwise.
class LoopHarness {
 public:
  explicit LoopHarness(std::deque<RunReport> script, bool stop_after_script = true)
      : script_(std::move(script)), stop_after_script_(stop_after_script) {
    options.schedule.interval = minutes(5);
    options.schedule.jitter = 0;
    deps.clock = &clock;
    deps.notifier = &notifier;
    deps.stop = &stop;
    deps.reload = &reload;
    deps.log = &log;
    deps.uniform01 = [] { return 0.5; };
    deps.manifest_fingerprint = [this] { return fingerprint; };
    deps.pass = [this] {
      starts.push_back(clock.Elapsed());
      RunReport r = script_.empty() ? Converged() : script_.front();
      if (!script_.empty()) script_.pop_front();
      if (script_.empty() && stop_after_script_) stop = true;
      return r;
    };
  }
  int Run() { return ExitCodeOf(RunLoop(options, deps)); }
  std::vector<std::string> Statuses() {
    std::vector<std::string> out;
    for (const auto& m : notifier.messages()) {
      size_t at = m.find("STATUS=");
      if (at != std::string::npos) out.push_back(m.substr(at + 7));
    }
    return out;
  }

  FakeClock clock;
  FakeNotifier notifier;
  std::atomic<bool> stop{false}, reload{false};
  std::ostringstream log;
  std::string fingerprint = "v1";
  LoopOptions options;
  LoopDeps deps;
  std::vector<milliseconds> starts;

 private:
  std::deque<RunReport> script_;
  bool stop_after_script_;
};

TEST(ReconcileLoop, ConvergedPassesRunEveryIntervalAndReadyComesAfterTheFirst) {
  LoopHarness h({Converged(), Converged(), Converged()});
  EXPECT_EQ(h.Run(), 0);
  EXPECT_THAT(h.starts, ElementsAre(minutes(0), minutes(5), minutes(10)));
  std::vector<std::string> m = h.notifier.messages();
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0], "READY=1\nSTATUS=converged: 2/2 services up, next pass in 5m");
  EXPECT_EQ(m[1], "STATUS=converged: 2/2 services up, next pass in 5m");
  EXPECT_EQ(m[2], "STATUS=converged: 2/2 services up") << "stopping: no next pass";
  EXPECT_EQ(m[3], "STOPPING=1");
  EXPECT_THAT(h.log.str(), HasSubstr("berth reconcile: converged: 2/2 services up, next pass"));
}

TEST(ReconcileLoop, FailuresBackOffDoublingUpToTheIntervalAndASuccessResetsTheBackoff) {
  LoopHarness h(
      {Errored(), Errored(), Failed(), Errored(), Errored(), Errored(), Converged(), Errored()});
  EXPECT_EQ(h.Run(), 0);
  // +30 s, +1 min, +2 min, +4 min, +5 min (cap), +5 min, success, +5 min, error.
  EXPECT_THAT(h.starts, ElementsAre(seconds(0), seconds(30), seconds(90), seconds(210),
                                    seconds(450), seconds(750), seconds(1050), seconds(1350)));
  std::vector<std::string> s = h.Statuses();
  EXPECT_EQ(s[0], "error: lock busy: held by berth apply; retry 1 in 30s");
  EXPECT_EQ(s[2], "failed: svc-a.service did not become healthy; retry 3 in 2m");
  EXPECT_EQ(s[5], "error: lock busy: held by berth apply; retry 6 in 5m");
  EXPECT_EQ(s[6], "converged: 2/2 services up, next pass in 5m");
}

TEST(ReconcileLoop, TerminalErrorIsNotRetriedUntilTheManifestChangesThenRunsAtOnce) {
  LoopHarness h(
      {Report(Outcome::kInvalid, "berth.yaml:3:1: unknown key 'modles'", true), Converged()});
  h.clock.on_sleep = [&](milliseconds elapsed) {
    if (elapsed >= hours(3)) h.fingerprint = "v2";  // someone fixed the typo and saved
  };
  EXPECT_EQ(h.Run(), 0);
  ASSERT_EQ(h.starts.size(), 2u) << "no pass while the manifest stayed the same";
  EXPECT_GE(h.starts[1], hours(3));
  EXPECT_LE(h.starts[1], hours(3) + seconds(2)) << "found within one manifest poll";
  EXPECT_EQ(h.Statuses()[0],
            "invalid manifest: berth.yaml:3:1: unknown key 'modles'; waiting for the manifest to "
            "change");
  EXPECT_THAT(h.log.str(), HasSubstr("manifest changed: running a pass now"));
  for (milliseconds s : h.clock.sleeps) EXPECT_LE(s, seconds(2)) << "polls the manifest cheaply";
}

TEST(ReconcileLoop, BlockedPlanWaitsButSighupRunsAPassAtOnce) {
  RunReport blocked = Report(Outcome::kBlocked, "", true);
  blocked.status = Status::FailedPrecondition("gpu 0: 70 GiB needed, 12 GiB free");
  LoopHarness h({blocked, Converged()});
  h.clock.on_sleep = [&](milliseconds elapsed) {
    if (elapsed >= minutes(10) && h.starts.size() == 1) h.reload = true;  // systemctl reload
  };
  EXPECT_EQ(h.Run(), 0);
  ASSERT_EQ(h.starts.size(), 2u);
  EXPECT_EQ(h.starts[1], minutes(10)) << "at once, not at the next poll";
  EXPECT_FALSE(h.reload.load()) << "cleared when the pass started";
  EXPECT_EQ(h.Statuses()[0],
            "blocked: gpu 0: 70 GiB needed, 12 GiB free; waiting for the manifest to change");
  EXPECT_THAT(h.log.str(), HasSubstr("SIGHUP: running a pass now"));
}

TEST(ReconcileLoop, ManifestChangeDuringTheIntervalRunsAPassWithoutWaitingItOut) {
  LoopHarness h({Converged(), Converged()});
  h.clock.on_sleep = [&](milliseconds elapsed) {
    if (elapsed >= minutes(1)) h.fingerprint = "v2";
  };
  EXPECT_EQ(h.Run(), 0);
  ASSERT_EQ(h.starts.size(), 2u);
  EXPECT_LE(h.starts[1], minutes(1) + seconds(2));
}

TEST(ReconcileLoop, SigtermWhileWaitingEndsTheLoopWithExitZeroAndNoMorePasses) {
  LoopHarness h({Converged(), Converged()}, /*stop_after_script=*/false);
  h.clock.on_sleep = [&](milliseconds elapsed) {
    if (elapsed >= minutes(1)) h.stop = true;
  };
  EXPECT_EQ(h.Run(), 0);
  EXPECT_EQ(h.starts.size(), 1u);
  EXPECT_EQ(h.clock.Elapsed(), minutes(1));
  EXPECT_EQ(h.notifier.messages().back(), "STOPPING=1");
}

TEST(ReconcileLoop, StopDuringAPassFinishesThatPassThenExitsZero) {
  RunReport interrupted = Report(Outcome::kInterrupted, "stopped before step 3 of 5");
  LoopHarness h({interrupted});
  EXPECT_EQ(h.Run(), 0);
  EXPECT_EQ(h.starts.size(), 1u);
  EXPECT_TRUE(h.clock.sleeps.empty());
  EXPECT_EQ(h.Statuses()[0], "interrupted: stopped before step 3 of 5");
}

TEST(ReconcileLoop, OnceRunsOnePassAndReturnsItsExitCode) {
  for (auto [report, code] :
       std::vector<std::pair<RunReport, int>>{{Converged(), 0},
                                              {Failed(), 4},
                                              {Report(Outcome::kBlocked, "short", true), 3},
                                              {Errored(), 1}}) {
    LoopHarness h({report}, /*stop_after_script=*/false);
    h.options.once = true;
    EXPECT_EQ(h.Run(), code);
    EXPECT_EQ(h.starts.size(), 1u);
    EXPECT_TRUE(h.clock.sleeps.empty());
  }
}

TEST(ReconcileLoop, JitterSpreadsTheWaitWithTheInjectedRandomSource) {
  LoopHarness h({Converged(), Converged()});
  h.options.schedule.jitter = 0.1;
  h.deps.uniform01 = [] { return 0.0; };
  EXPECT_EQ(h.Run(), 0);
  EXPECT_THAT(h.starts, ElementsAre(seconds(0), seconds(270)));
  EXPECT_EQ(h.Statuses()[0], "converged: 2/2 services up, next pass in 4m30s");
}

TEST(ReconcileLoop, WatchdogIsPingedAtHalfItsTimeoutWhileWaiting) {
  LoopHarness h({Report(Outcome::kBlocked, "short", true)}, false);
  h.clock.on_sleep = [&](milliseconds elapsed) {
    if (elapsed >= minutes(10)) h.stop = true;
  };
  FakeNotifier watched(std::chrono::seconds(60));
  h.deps.notifier = &watched;
  EXPECT_EQ(h.Run(), 0);
  // One ping right after the pass, then one every 30 s until the stop at 10 minutes.
  EXPECT_EQ(watched.Count("WATCHDOG=1"), 20);
  for (milliseconds s : h.clock.sleeps) EXPECT_LE(s, seconds(30));
}

TEST(ReconcileLoop, WatchdogIsPingedFromAThreadWhileALongPassRuns) {
  FakeNotifier watched(std::chrono::seconds(60));  // ping every 30 s
  LoopHarness h({}, false);
  h.deps.notifier = &watched;
  int pinged_during_pass = 0;
  h.deps.pass = [&] {
    int before = watched.Count("WATCHDOG=1");
    // A two-minute download, in steps of 10 s of the loop's clock; after each, the watchdog
    // thread waits again before time moves on.
    for (int step = 0; step < 12; ++step) {
      EXPECT_TRUE(h.clock.AwaitWaiters(1)) << "no watchdog thread waits on the loop's clock";
      h.clock.Advance(seconds(10));
    }
    EXPECT_TRUE(h.clock.AwaitWaiters(1));
    pinged_during_pass = watched.Count("WATCHDOG=1") - before;
    h.stop = true;
    return Converged();
  };
  EXPECT_EQ(h.Run(), 0);
  EXPECT_EQ(pinged_during_pass, 4) << "one ping every 30 s of the pass's 2 minutes";
}

TEST(ReconcileLoop, MetricsAreWrittenAfterEveryPass) {
  RunReport applied = Report(Outcome::kApplied);
  applied.exec.bytes_downloaded = 1000;
  applied.plan.actions.resize(3);
  RunReport failed = Failed();
  failed.exec.bytes_downloaded = 500;
  failed.plan.actions.resize(2);
  LoopHarness h({applied, failed});
  h.options.metrics_path = "/nowhere/berth.prom";
  std::vector<std::string> written;
  h.deps.write_file = [&](const std::string& path, const std::string& text) {
    EXPECT_EQ(path, "/nowhere/berth.prom");
    written.push_back(text);
    return Status::Ok();
  };
  EXPECT_EQ(h.Run(), 0);
  ASSERT_EQ(written.size(), 3u) << "one file per pass, and a last one as the loop stops";
  EXPECT_THAT(written[0], HasSubstr("\nberth_up 1\n"));
  EXPECT_THAT(written[0],
              HasSubstr("\nberth_service_up{service=\"svc-a\",unit=\"svc-a.service\"} 1\n"));
  EXPECT_THAT(written[0], HasSubstr("\nberth_pending_changes 0\n"));
  EXPECT_THAT(written[0], HasSubstr("\nberth_last_success_timestamp_seconds 1700000000.000\n"));
  EXPECT_THAT(written[1], HasSubstr("\nberth_last_run_timestamp_seconds 1700000300.000\n"));
  EXPECT_THAT(written[1], HasSubstr("\nberth_last_success_timestamp_seconds 1700000000.000\n"));
  EXPECT_THAT(written[1], HasSubstr("\nberth_pending_changes 2\n"));
  EXPECT_THAT(written[1], HasSubstr("\nberth_failures_total{kind=\"failed\"} 1\n"));
  EXPECT_THAT(written[1], HasSubstr("\nberth_bytes_downloaded_total 1500\n"));
  EXPECT_THAT(written[1], HasSubstr("\nberth_services_up 1\n"));
  EXPECT_THAT(written[1],
              HasSubstr("\nberth_service_up{service=\"svc-a\",unit=\"svc-a.service\"} 0\n"));
  // Stopped (SIGTERM): the file that stays behind says berth is down, the rest as last seen.
  EXPECT_THAT(written[2], HasSubstr("\nberth_up 0\n"));
  EXPECT_THAT(written[2], HasSubstr("\nberth_services_up 1\n"));
}

TEST(ReconcileLoop, APassThatNeverSawTheHostLeavesTheServiceFiguresAsLastSeen) {
  LoopHarness h({Converged(), Errored()});
  h.options.metrics_path = "/nowhere/berth.prom";
  std::vector<std::string> written;
  h.deps.write_file = [&](const std::string&, const std::string& text) {
    written.push_back(text);
    return Status::Ok();
  };
  h.Run();
  ASSERT_GE(written.size(), 2u);
  // The lock was busy: nothing was observed, so the services still count as up (not 0).
  EXPECT_THAT(written[1], HasSubstr("\nberth_services_up 2\n"));
  EXPECT_THAT(written[1], HasSubstr("\nberth_failures_total{kind=\"error\"} 1\n"));
}

TEST(ReconcileLoop, AMetricsWriteFailureIsLoggedAndTheLoopGoesOn) {
  LoopHarness h({Converged(), Converged()});
  h.options.metrics_path = "/nonexistent-dir/berth.prom";
  EXPECT_EQ(h.Run(), 0);
  EXPECT_EQ(h.starts.size(), 2u);
  EXPECT_THAT(h.log.str(), HasSubstr("berth reconcile: metrics: cannot write"));
}

}  // namespace
}  // namespace berth::testing
