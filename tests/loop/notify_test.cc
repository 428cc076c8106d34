// libsystemd's sd_notify as the loop uses it, read back from a socket the test binds as
// $NOTIFY_SOCKET: READY=1 with the first STATUS=, WATCHDOG=1 when $WATCHDOG_USEC is set,
// STOPPING=1 at the end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/cli/commands.h"
#include "engine/loop/notifier.h"
#include "engine/loop/reconcile.h"
#include "tests/loop/loop_fakes.h"
#include "tests/loop/notify_socket.h"

namespace berth::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using ::testing::Contains;
using ::testing::Not;

class SdNotifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(socket_.ok());
    ::setenv("NOTIFY_SOCKET", socket_.path().c_str(), 1);
    ::unsetenv("WATCHDOG_USEC");
    ::unsetenv("WATCHDOG_PID");
  }
  void TearDown() override {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
  }

  // One converged pass, a wait of 2 minutes of fake time, then SIGTERM.
  int RunOnePassThenStop() {
    FakeClock clock;
    SdNotifier notifier;
    std::atomic<bool> stop{false};
    clock.on_sleep = [&](milliseconds elapsed) {
      if (elapsed >= minutes(2)) stop = true;
    };
    LoopOptions o;
    o.schedule.jitter = 0;
    LoopDeps d;
    d.clock = &clock;
    d.notifier = &notifier;
    d.stop = &stop;
    d.pass = [] {
      RunReport r;
      r.outcome = Outcome::kNoChanges;
      r.services_up = r.services_wanted = 3;
      return r;
    };
    return ExitCodeOf(RunLoop(o, d));
  }

  NotifySocket socket_;
};

TEST_F(SdNotifyTest, ReadyAndStatusAfterTheFirstPassThenStoppingWithoutAWatchdog) {
  EXPECT_EQ(RunOnePassThenStop(), 0);
  std::vector<std::string> got = socket_.Drain();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "READY=1\nSTATUS=converged: 3/3 services up, next pass in 5m");
  EXPECT_EQ(got[1], "STOPPING=1");
}

TEST_F(SdNotifyTest, WatchdogPingsAtHalfOfWatchdogUsec) {
  ::setenv("WATCHDOG_USEC", "60000000", 1);  // 60 s: a ping every 30 s
  EXPECT_EQ(RunOnePassThenStop(), 0);
  std::vector<std::string> got = socket_.Drain();
  // READY+STATUS, a ping after the pass, pings at 30, 60, 90 s, then STOPPING at 2 min.
  ASSERT_EQ(got.size(), 6u) << ::testing::PrintToString(got);
  EXPECT_EQ(got[0], "READY=1\nSTATUS=converged: 3/3 services up, next pass in 5m");
  for (size_t i = 1; i <= 4; ++i) EXPECT_EQ(got[i], "WATCHDOG=1");
  EXPECT_EQ(got[5], "STOPPING=1");
}

TEST_F(SdNotifyTest, WatchdogOfAnotherProcessIsNotOurs) {
  ::setenv("WATCHDOG_USEC", "60000000", 1);
  ::setenv("WATCHDOG_PID", "1", 1);
  EXPECT_EQ(RunOnePassThenStop(), 0);
  EXPECT_THAT(socket_.Drain(), Not(Contains("WATCHDOG=1")));
  ::unsetenv("WATCHDOG_PID");
}

}  // namespace
}  // namespace berth::testing
