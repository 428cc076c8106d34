#include "providers/host/command_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

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

// A scratch directory for a test's pid files.
class RunnerDir {
 public:
  RunnerDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("berth-runner-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path_);
  }
  ~RunnerDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The pid a script wrote to `file`, 0 when there is none.
pid_t PidIn(const std::string& file) {
  std::ifstream in(file);
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// A grandchild that left the command's session and process group (setsid) still ends with it:
// the pid it wrote names no process once Run returns.
TEST(PosixCommandRunner, AGrandchildThatCalledSetsidIsKilledAtTheTimeout) {
  RunnerDir dir;
  const std::string pid_file = dir.File("grandchild.pid");
  const std::string script = "setsid /bin/sh -c 'echo $$ > " + pid_file + ".tmp && mv " + pid_file +
                             ".tmp " + pid_file + " && exec sleep 1000' & while [ ! -s " +
                             pid_file + " ]; do sleep 0.01; done; " +
                             "echo waiting; exec sleep 1000";
  PosixCommandRunner run;
  CommandResult r = run.Run({"/bin/sh", "-c", script}, 3000);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.output_tail, "waiting\n");
  pid_t grandchild = PidIn(pid_file);
  ASSERT_GT(grandchild, 0) << "the script did not start its grandchild";
  EXPECT_FALSE(Alive(grandchild)) << "pid " << grandchild << " survived the timeout";
  if (Alive(grandchild)) ::kill(grandchild, SIGKILL);
}

// The command's own exit decides: one that exits 0 while a child it left holds its stdout is a
// success, not a timeout, and the child ends with it.
TEST(PosixCommandRunner, ACommandThatExitsZeroLeavingAChildOnItsStdoutSucceeds) {
  RunnerDir dir;
  const std::string pid_file = dir.File("child.pid");
  PosixCommandRunner run;
  CommandResult r = run.Run(
      {"/bin/sh", "-c", "sleep 1000 & echo $! > " + pid_file + "; echo checked; exit 0"}, 600'000);
  EXPECT_TRUE(r.ok()) << r.error << " timed out: " << r.timed_out;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.output_tail, "checked\n");
  pid_t child = PidIn(pid_file);
  ASSERT_GT(child, 0);
  EXPECT_FALSE(Alive(child)) << "pid " << child << " outlived the command";
  if (Alive(child)) ::kill(child, SIGKILL);

  CommandResult failed = run.Run({"/bin/sh", "-c", "sleep 1000 & echo no; exit 4"}, 600'000);
  EXPECT_FALSE(failed.timed_out);
  EXPECT_EQ(failed.exit_status, 4);
  EXPECT_EQ(failed.output_tail, "no\n");
}

TEST(PosixCommandRunner, ACommandThatCannotBeExecutedSaysWhy) {
  PosixCommandRunner run;
  CommandResult missing = run.Run({"/nonexistent/check", "x"}, 10'000);
  EXPECT_FALSE(missing.started);
  EXPECT_THAT(missing.error, HasSubstr("cannot run /nonexistent/check: No such file"));
  CommandResult dir = run.Run({"/tmp"}, 10'000);
  EXPECT_FALSE(dir.started);
  EXPECT_THAT(dir.error, HasSubstr("cannot run /tmp: Permission denied"));
}

}  // namespace
}  // namespace berth
