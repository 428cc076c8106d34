#include "providers/host/command_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(PosixCommandRunner, ExitStatusAndTheTailOfWhatItPrinted) {
  PosixCommandRunner run;
  CommandResult ok = run.Run({"/bin/true"}, 10'000);
  EXPECT_TRUE(ok.ok());
  CommandResult r = run.Run(
      {"/bin/sh", "-c", "echo to stdout; echo 'unsupported architecture' >&2; exit 3"}, 10'000);
  EXPECT_TRUE(r.started);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.output_tail, "to stdout\nunsupported architecture\n");
}

TEST(PosixCommandRunner, NoShellNoPathAndOnlyTheTailOfALongOutput) {
  PosixCommandRunner run;
  CommandResult relative = run.Run({"true"}, 1000);
  EXPECT_FALSE(relative.started);
  EXPECT_THAT(relative.error, HasSubstr("absolute path"));
  CommandResult missing = run.Run({"/nonexistent/check"}, 1000);
  EXPECT_FALSE(missing.ok());
  // "$HOME" is an argument, not expanded: no shell.
  CommandResult echo = run.Run({"/bin/echo", "$HOME"}, 10'000);
  EXPECT_EQ(echo.output_tail, "$HOME\n");
  CommandResult big = run.Run({"/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"}, 10'000);
  EXPECT_TRUE(big.ok());
  EXPECT_EQ(big.output_tail.size(), PosixCommandRunner::kTailBytes);
}

TEST(PosixCommandRunner, ACommandPastItsTimeoutIsKilledWithItsChildren) {
  PosixCommandRunner run;
  CommandResult r = run.Run({"/bin/sh", "-c", "sleep 30 & sleep 30"}, 200);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace berth
