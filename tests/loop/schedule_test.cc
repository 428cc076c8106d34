// The schedule's rules, as a pure function: when the loop runs next after each kind of pass.
#include "engine/loop/schedule.h"

#include <gtest/gtest.h>

#include <random>

namespace berth::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

ScheduleOptions Options(double jitter = 0.1) {
  ScheduleOptions o;
  o.interval = minutes(5);
  o.jitter = jitter;
  o.backoff_base = seconds(30);
  return o;
}

std::function<double()> Fixed(double u) {
  return [u] { return u; };
}

TEST(Schedule, SuccessWaitsTheIntervalSpreadByTheJitter) {
  NextPass low = ScheduleNext(PassKind::kDone, 0, Options(), Fixed(0.0));
  EXPECT_EQ(low.kind, NextPass::Kind::kAfter);
  EXPECT_FALSE(low.backoff);
  EXPECT_EQ(low.wait, seconds(270));  // 5 min - 10 %
  EXPECT_EQ(ScheduleNext(PassKind::kDone, 0, Options(), Fixed(0.5)).wait, minutes(5));
  EXPECT_EQ(ScheduleNext(PassKind::kDone, 0, Options(), Fixed(0.75)).wait, seconds(315));
  EXPECT_EQ(ScheduleNext(PassKind::kDone, 0, Options(0), Fixed(0.0)).wait, minutes(5));

  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  milliseconds lo = minutes(10), hi{0};
  for (int i = 0; i < 1000; ++i) {
    milliseconds w = ScheduleNext(PassKind::kDone, 0, Options(), [&] { return u(rng); }).wait;
    lo = std::min(lo, w);
    hi = std::max(hi, w);
  }
  EXPECT_GE(lo, seconds(270));
  EXPECT_LE(hi, seconds(330));
  EXPECT_LT(lo, seconds(275)) << "uniform over the whole band";
  EXPECT_GT(hi, seconds(325));
}

TEST(Schedule, RetryableFailuresBackOffDoublingFromThirtySecondsCappedAtTheInterval) {
  std::vector<milliseconds> waits;
  for (int failures = 1; failures <= 7; ++failures) {
    NextPass n = ScheduleNext(PassKind::kRetryable, failures, Options(0), Fixed(0.5));
    EXPECT_EQ(n.kind, NextPass::Kind::kAfter);
    EXPECT_TRUE(n.backoff);
    waits.push_back(n.wait);
  }
  EXPECT_EQ(waits, (std::vector<milliseconds>{seconds(30), seconds(60), seconds(120), seconds(240),
                                              seconds(300), seconds(300), seconds(300)}));
  // Jitter spreads retries too, so a fleet that failed together does not retry together.
  EXPECT_EQ(ScheduleNext(PassKind::kRetryable, 1, Options(), Fixed(0.0)).wait, seconds(27));
  // A huge failure count neither overflows nor passes the cap.
  EXPECT_EQ(BackoffDelay(1000, Options()), minutes(5));
  // An interval shorter than the base caps the very first retry.
  ScheduleOptions fast = Options(0);
  fast.interval = seconds(10);
  EXPECT_EQ(BackoffDelay(1, fast), seconds(10));
}

TEST(Schedule, TerminalErrorsWaitForTheManifestToChange) {
  NextPass n = ScheduleNext(PassKind::kTerminal, 0, Options(), Fixed(0.5));
  EXPECT_EQ(n.kind, NextPass::Kind::kWhenManifestChanges);
  WaitEvents ev;
  ev.waited = std::chrono::hours(24 * 10);
  EXPECT_EQ(DecideWake(n, ev), Wake::kKeepWaiting) << "no deadline, however long";
  ev.manifest_changed = true;
  EXPECT_EQ(DecideWake(n, ev), Wake::kManifestChanged);
}

TEST(Schedule, InterruptedPassEndsTheLoop) {
  EXPECT_EQ(ScheduleNext(PassKind::kInterrupted, 0, Options(), Fixed(0.5)).kind,
            NextPass::Kind::kStop);
}

TEST(Schedule, OutcomesClassifyAsDoneRetryableTerminalOrInterrupted) {
  EXPECT_EQ(ClassifyPass(Outcome::kNoChanges, false), PassKind::kDone);
  EXPECT_EQ(ClassifyPass(Outcome::kApplied, false), PassKind::kDone);
  EXPECT_EQ(ClassifyPass(Outcome::kPlanned, false), PassKind::kDone);
  EXPECT_EQ(ClassifyPass(Outcome::kFailed, false), PassKind::kRetryable);
  EXPECT_EQ(ClassifyPass(Outcome::kError, false), PassKind::kRetryable);
  EXPECT_EQ(ClassifyPass(Outcome::kFailed, true), PassKind::kTerminal);  // auth refused
  EXPECT_EQ(ClassifyPass(Outcome::kError, true), PassKind::kTerminal);
  EXPECT_EQ(ClassifyPass(Outcome::kBlocked, true), PassKind::kTerminal);
  EXPECT_EQ(ClassifyPass(Outcome::kBlocked, false), PassKind::kTerminal);
  EXPECT_EQ(ClassifyPass(Outcome::kInvalid, true), PassKind::kTerminal);
  EXPECT_EQ(ClassifyPass(Outcome::kStale, false), PassKind::kTerminal);
  EXPECT_EQ(ClassifyPass(Outcome::kNotConfirmed, false), PassKind::kTerminal);
  EXPECT_EQ(ClassifyPass(Outcome::kInterrupted, false), PassKind::kInterrupted);
}

TEST(Schedule, ManifestChangeOrSighupCutsATimedWaitShortAndStopWinsOverAll) {
  NextPass n = ScheduleNext(PassKind::kDone, 0, Options(0), Fixed(0.5));
  WaitEvents ev;
  ev.waited = minutes(1);
  EXPECT_EQ(DecideWake(n, ev), Wake::kKeepWaiting);
  ev.waited = minutes(5);
  EXPECT_EQ(DecideWake(n, ev), Wake::kInterval);
  ev.waited = minutes(1);
  ev.manifest_changed = true;
  EXPECT_EQ(DecideWake(n, ev), Wake::kManifestChanged);
  ev.reload = true;
  EXPECT_EQ(DecideWake(n, ev), Wake::kReload);
  ev.stop = true;
  EXPECT_EQ(DecideWake(n, ev), Wake::kStop);

  NextPass blocked = ScheduleNext(PassKind::kTerminal, 0, Options(), Fixed(0.5));
  WaitEvents hup;
  hup.reload = true;
  EXPECT_EQ(DecideWake(blocked, hup), Wake::kReload);
}

}  // namespace
}  // namespace berth::testing
