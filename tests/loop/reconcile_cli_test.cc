// `berth reconcile` as the binary runs it, without systemd: --plan-only against a manifest whose
// host.match excludes this host (planning tolerates a missing system bus; applying does not,
// see reconcile_sandbox_test.cc). The daemon is driven with real signals and a real
// $NOTIFY_SOCKET: READY after the first pass, SIGHUP and a manifest edit each start a pass at
// once, SIGTERM stops it with exit 0.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/loop/notify_socket.h"
#include "tests/support/systemd_sandbox.h"

extern char** environ;

namespace berth::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ReconcileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("berth-reconcile-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "state");
    manifest_ = (dir_ / "berth.yaml").string();
    WriteManifest("");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteManifest(const std::string& extra) {
    std::ofstream(manifest_) << "berth: 1\n"
                             << "host:\n  match: {hostname: \"no-such-host-*\"}\n"
                             << "  store: " << (dir_ / "store").string() << "\n"
                             << "  unit_dir: " << (dir_ / "units").string() << "\n"
                             << "models:\n  chat: {source: hf://org/chat, revision: "
                             << std::string(40, 'a') << "}\n"
                             << "services:\n  svc-a:\n    model: chat\n    engine: vllm\n"
                             << "    gpus: [0]\n    port: 18001\n"
                             << extra;
  }
  std::vector<std::string> Env() {
    return {"PATH=/usr/bin:/bin", "BERTH_STATE_DIR=" + (dir_ / "state").string(),
            // No system bus here: planning goes on with the units unknown.
            "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + (dir_ / "no-bus").string(),
            // Observing asks the Hub about models missing from the store, even on a host
            // the manifest excludes; there is no network here.
            "HF_HUB_OFFLINE=1"};
  }

  fs::path dir_;
  std::string manifest_;
};

TEST_F(ReconcileCli, OncePlanOnlyOnAHostTheManifestExcludesExitsZeroAndSaysWhy) {
  CommandResult r = RunCommand({BERTH_BINARY, "reconcile", "--once", "--plan-only", "-f", manifest_,
                                "--metrics", (dir_ / "berth.prom").string()},
                               Env());
  EXPECT_EQ(r.exit_code, 0) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("does not match host"));
  EXPECT_THAT(r.output, HasSubstr("berth reconcile: nothing to do: host.match.hostname"));
  EXPECT_THAT(ReadFile((dir_ / "berth.prom").string()), HasSubstr("\nberth_services_wanted 0\n"))
      << "a host the manifest excludes is asked for nothing";
}

TEST_F(ReconcileCli, OnceWithAnInvalidManifestExitsOne) {
  std::ofstream(manifest_) << "berth: 1\nmodles: {}\n";
  CommandResult r = RunCommand({BERTH_BINARY, "reconcile", "--once", "-f", manifest_}, Env());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("invalid manifest:"));
}

// Each bad flag is refused by name before any pass runs (the manifest is valid, so a pass would
// say "nothing to do").
TEST_F(ReconcileCli, BadIntervalJitterOrBothApplyAndPlanOnlyAreRefused) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"--interval", "soon"}, "--interval 'soon' is not a duration"},
           {{"--interval", "0s"}, "--interval '0s' is not a duration"},
           {{"--jitter", "150%"}, "--jitter '150%' is not a percentage from 0% to 100%"},
           {{"--jitter", "lots"}, "--jitter 'lots' is neither N% nor a duration"},
           {{"--apply", "--plan-only"}, "--apply excludes --plan-only"}}) {
    std::vector<std::string> argv = {BERTH_BINARY, "reconcile", "--once", "-f", manifest_};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult r = RunCommand(argv, Env());
    EXPECT_EQ(r.exit_code, 1) << c.args[0] << ": " << r.output << r.error;
    EXPECT_THAT(r.output + r.error, HasSubstr(c.says)) << c.args[0];
    EXPECT_THAT(r.output + r.error, Not(HasSubstr("nothing to do"))) << c.args[0];
  }
}

TEST_F(ReconcileCli, DaemonIsReadyAfterAPassRunsAgainOnSighupAndOnAnEditAndStopsOnSigterm) {
  NotifySocket notify;
  ASSERT_TRUE(notify.ok());
  std::string metrics = (dir_ / "berth.prom").string();
  std::vector<std::string> argv = {BERTH_BINARY, "reconcile", "--plan-only", "-f",   manifest_,
                                   "--interval", "1h",        "--metrics",   metrics};
  std::vector<std::string> env = Env();
  env.push_back("NOTIFY_SOCKET=" + notify.path());
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::string log = (dir_ / "log").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, BERTH_BINARY, &fa, nullptr, cargv.data(), cenv.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  auto status_count = [](const std::vector<std::string>& m) {
    int n = 0;
    for (const auto& s : m) n += s.find("STATUS=nothing to do") != std::string::npos;
    return n;
  };

  std::vector<std::string> got = notify.Until("READY=1", seconds(30));
  ASSERT_FALSE(got.empty()) << ReadFile(log);
  EXPECT_THAT(got.back(), HasSubstr("READY=1\nSTATUS=nothing to do: host.match.hostname"));
  EXPECT_THAT(got.back(), HasSubstr(", next pass in "));
  EXPECT_THAT(ReadFile(metrics), HasSubstr("\nberth_up 1\n"));

  ::kill(pid, SIGHUP);
  got = notify.Until("STATUS=", seconds(20));
  EXPECT_EQ(status_count(got), 1) << "SIGHUP runs a pass now, not in an hour\n" << ReadFile(log);

  std::this_thread::sleep_for(milliseconds(20));
  WriteManifest("# edited\n");
  got = notify.Until("STATUS=", seconds(20));
  EXPECT_EQ(status_count(got), 1) << "an edit runs a pass within the manifest poll\n"
                                  << ReadFile(log);

  ::kill(pid, SIGTERM);
  got = notify.Until("STOPPING=1", seconds(20));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), "STOPPING=1");
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus)) << ReadFile(log);
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << ReadFile(log);
  std::string text = ReadFile(log);
  EXPECT_THAT(text, HasSubstr("SIGHUP: running a pass now"));
  EXPECT_THAT(text, HasSubstr("manifest changed: running a pass now"));
  // The textfile outlives the daemon: once it stopped, it says so.
  EXPECT_THAT(ReadFile(metrics), HasSubstr("\nberth_up 0\n"));
}

}  // namespace
}  // namespace berth::testing
