// The berth binary against hostile files where it reads its own: state.json or journal.json
// linked to /dev/zero, a FIFO state.json, history.json linked to /dev/urandom, a FIFO store
// record, a file of gigabytes, a link at the state lock. Each command is run with a
// deadline (RunCommand kills it past 60 s) and must return at once with an error that names the
// file and what it is, never read until the kernel kills it nor wait on a FIFO forever.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/state/state.h"
#include "tests/support/systemd_sandbox.h"

namespace berth::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kCommit = std::string(40, 'a');

class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("berth-hostile-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "state");
    manifest_ = (dir_ / "berth.yaml").string();
    std::ofstream(manifest_) << "berth: 1\nhost:\n  store: " << Store()
                             << "\n  unit_dir: " << (dir_ / "units").string()
                             << "\nmodels:\n  tiny: {source: hf://org/tiny, revision: " << kCommit
                             << ", size: 1MB}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string State(const std::string& name) const { return (dir_ / "state" / name).string(); }
  std::string Store() const { return (dir_ / "store").string(); }
  /// berth with this test's state dir, no system bus and no network.
  CommandResult Berth(std::vector<std::string> args) {
    args.insert(args.begin(), BERTH_BIN);
    return RunCommand(args,
                      {"PATH=/usr/bin:/bin", "BERTH_STATE_DIR=" + (dir_ / "state").string(),
                       "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + (dir_ / "no-bus").string(),
                       "HF_HUB_OFFLINE=1", "HOME=" + dir_.string()},
                      std::chrono::seconds(60));
  }
  /// It returned by itself (not killed at the deadline), with exit 1 and `message`.
  static void ExpectRefused(const CommandResult& r, const std::string& message) {
    EXPECT_EQ(r.error, "") << "berth did not return: " << r.output;
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(message));
  }

  fs::path dir_;
  std::string manifest_;
};

TEST_F(HostileFiles, AStateJsonLinkedToDevZeroIsRefusedNotReadForever) {
  fs::create_symlink("/dev/zero", State("state.json"));
  ExpectRefused(Berth({"plan", "-f", manifest_}),
                State("state.json") + " is a symbolic link to '/dev/zero'");
}

TEST_F(HostileFiles, AFifoStateJsonIsRefusedWithoutWaitingForAWriter) {
  ASSERT_EQ(::mkfifo(State("state.json").c_str(), 0600), 0);
  ExpectRefused(Berth({"plan", "-f", manifest_}),
                State("state.json") + " is not a regular file (it is a FIFO)");
}

TEST_F(HostileFiles, AStateJsonOfGigabytesIsRefusedBeforeItIsRead) {
  int fd = ::open(State("state.json").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{22} << 30), 0);  // sparse: costs no disk
  ::close(fd);
  ExpectRefused(Berth({"plan", "-f", manifest_}), State("state.json") + " is 23.6 GB, more than");
}

TEST_F(HostileFiles, AJournalLinkedToDevZeroIsNotReadAndThePlanSaysSo) {
  fs::create_symlink("/dev/zero", State("journal.json"));
  CommandResult r = Berth({"plan", "-f", manifest_});
  EXPECT_EQ(r.error, "") << "berth did not return: " << r.output;
  EXPECT_NE(r.exit_code, -1);
  EXPECT_THAT(r.output, HasSubstr(State("journal.json") + " is a symbolic link to '/dev/zero'"));
  EXPECT_THAT(r.output, HasSubstr("whether an apply stopped half-way is not known"));
}

TEST_F(HostileFiles, AHistoryLinkedToDevUrandomIsRefused) {
  fs::create_symlink("/dev/urandom", State("history.json"));
  ExpectRefused(Berth({"history", "--state-dir", (dir_ / "state").string()}),
                State("history.json") + " is a symbolic link to '/dev/urandom'");
}

// A store record that is a FIFO (berth verify of a record linked to /dev/zero:
// tests/hub/hub_test.cc, where the fake Hub answers): the plan's store scan takes it for an
// incomplete download, at once.
TEST_F(HostileFiles, AFifoStoreRecordIsTakenForAnIncompleteDownloadByThePlan) {
  std::string repo = Store() + "/models--org--tiny";
  fs::create_directories(repo + "/.berth");
  fs::create_directories(repo + "/snapshots/" + kCommit);
  ASSERT_EQ(::mkfifo((repo + "/.berth/" + kCommit + ".json").c_str(), 0600), 0);
  CommandResult plan = Berth({"plan", "-f", manifest_});
  EXPECT_EQ(plan.error, "") << "berth did not return: " << plan.output;
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_THAT(plan.output, HasSubstr("download"));
}

// The lock file's holder line is written into it: through a link it would truncate the target.
TEST_F(HostileFiles, TheStateLockIsNeverTakenThroughALinkAndTheTargetIsUntouched) {
  std::string victim = (dir_ / "victim").string();
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, State("lock"));
  auto lock = StateLock::Acquire((dir_ / "state").string(), std::chrono::milliseconds(0), "test",
                                 RealClock());
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(),
              HasSubstr(State("lock") + " is a symbolic link to '" + victim + "'"));
  EXPECT_THAT(lock.status().message(), HasSubstr("remove the link"));
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious\n");
  // Once the link is gone, the lock is a regular file of berth's own.
  fs::remove(State("lock"));
  auto taken = StateLock::Acquire((dir_ / "state").string(), std::chrono::milliseconds(0), "test",
                                  RealClock());
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  EXPECT_EQ(fs::symlink_status(State("lock")).type(), fs::file_type::regular);
}

// Not a hostile file, but the same harness: the units of an on-demand service run the berth that
// plans (its /proc/self/exe), so a checkout's build/berth writes units that run build/berth, not
// a /usr/bin/berth that may not exist; host.executables.berth still wins.
TEST_F(HostileFiles, OnDemandUnitsRunTheBerthThatPlans) {
  const std::string service =
      "services:\n  chat:\n    model: tiny\n    engine: llama-server\n    port: 18999\n"
      "    executable: /usr/bin/true\n    on_demand: true\n"
      "    llama_server: {model_file: m.gguf, n_gpu_layers: 0}\n";
  std::ofstream(manifest_, std::ios::app) << service;
  CommandResult r = Berth({"plan", "-f", manifest_, "--diff"});
  const std::string self = fs::canonical(BERTH_BIN).string();
  EXPECT_THAT(r.output, HasSubstr("ExecStartPost=\"" + self + "\" __wait-healthy ")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ExecStart=\"" + self + "\" __wake-proxy ")) << r.output;

  std::ifstream in(manifest_);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("  unit_dir:"), 0, "  executables: {berth: /opt/berth/bin/berth}\n");
  std::ofstream(manifest_) << text;
  r = Berth({"plan", "-f", manifest_, "--diff"});
  EXPECT_THAT(r.output, HasSubstr("ExecStartPost=\"/opt/berth/bin/berth\" __wait-healthy "))
      << r.output;
}

}  // namespace
}  // namespace berth::testing
