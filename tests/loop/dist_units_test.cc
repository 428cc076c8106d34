// engine/dist's unit files pass `systemd-analyze verify` (with /bin/true standing in for the
// berth binary, which verify requires to exist) and say what README.md says they do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/systemd_sandbox.h"

namespace berth::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* kUnits[] = {"berth.service", "berth-reconcile.service", "berth-reconcile.timer"};

TEST(DistUnits, PassSystemdAnalyzeVerify) {
  fs::path src = fs::path(BERTH_SOURCE_DIR) / "engine" / "dist";
  fs::path dir = fs::temp_directory_path() / ("berth-dist-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::string> argv = {"systemd-analyze", "verify"};
  for (const char* name : kUnits) {
    std::string text = Read(src / name);
    ASSERT_FALSE(text.empty()) << name;
    for (size_t at; (at = text.find("/usr/local/bin/berth")) != std::string::npos;)
      text.replace(at, std::string("/usr/local/bin/berth").size(), "/bin/true");
    std::ofstream(dir / name) << text;
    argv.push_back((dir / name).string());
  }
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.output << r.error;
  EXPECT_EQ(r.output, "") << "systemd-analyze had something to say";
  fs::remove_all(dir);
}

TEST(DistUnits, DaemonIsANotifyServiceWithAWatchdogAndTheTimerRunsOncePerFiveMinutes) {
  fs::path src = fs::path(BERTH_SOURCE_DIR) / "engine" / "dist";
  std::string daemon = Read(src / "berth.service");
  EXPECT_THAT(daemon, HasSubstr("\nType=notify\n"));
  EXPECT_THAT(daemon,
              HasSubstr("\nExecStart=/usr/local/bin/berth reconcile -f /etc/berth --interval 5m "
                        "--metrics /var/lib/node_exporter/textfile_collector/berth.prom\n"));
  EXPECT_THAT(daemon, HasSubstr("\nWatchdogSec="));
  EXPECT_THAT(daemon, HasSubstr("\nRestart=on-failure\n"));
  EXPECT_THAT(daemon, HasSubstr("\nKillMode=mixed\n"));
  EXPECT_THAT(daemon, HasSubstr("\nExecReload=/bin/kill -HUP $MAINPID\n"));
  std::string oneshot = Read(src / "berth-reconcile.service");
  EXPECT_THAT(oneshot, HasSubstr("\nType=oneshot\n"));
  EXPECT_THAT(oneshot,
              HasSubstr("\nExecStart=/usr/local/bin/berth reconcile --once -f /etc/berth\n"));
  std::string timer = Read(src / "berth-reconcile.timer");
  EXPECT_THAT(timer, HasSubstr("\nOnBootSec="));
  EXPECT_THAT(timer, HasSubstr("\nOnUnitActiveSec=5m\n"));
  EXPECT_THAT(timer, HasSubstr("\nRandomizedDelaySec="));
}

}  // namespace
}  // namespace berth::testing
