// `berth status` against a real systemd: after an apply it reports the service active, the
// model and the commit its unit runs, since when, healthy (asked now) and enabled at boot; once
// the service is stopped by hand (systemctl stop in the sandbox) it reports it inactive and
// unhealthy. The text and the JSON say the same.
#include <gmock/gmock.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class StatusE2eTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    MakeModel(store_, "org/chat", commit_);
    port_ = FreePort();
    std::ostringstream m;
    m << "berth: 1\n"
      << "host:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir() << "\n"
      << "  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n  chat: {source: hf://org/chat, revision: " << commit_ << "}\n"
      << "services:\n"
      << "  chat:\n    model: chat\n    engine: vllm\n    gpus: [0]\n    port: " << port_
      << "\n    bind: 127.0.0.1\n    health: {timeout: 30s, interval: 100ms}\n";
    manifest_ = (tmp_ / "berth.yaml").string();
    std::ofstream(manifest_) << m.str();
  }

  HostAccess Access() {
    HostAccess a;
    a.bus_address = sandbox_->system_bus_address();
    a.journal_dir = sandbox_->journal_dir();
    return a;
  }
  int Apply() {
    ApplyCommand cmd;
    cmd.manifest_path = manifest_;
    cmd.yes = true;
    cmd.host = Access();
    cmd.state_dir = (tmp_ / "state").string();
    std::ostringstream out, err;
    std::istringstream in;
    int code = RunApply(cmd, in, out, err);
    EXPECT_EQ(code, kExitOk) << out.str() << err.str();
    return code;
  }
  std::string Status(const std::string& format) {
    StatusCommand cmd;
    cmd.manifest_path = manifest_;
    cmd.state_dir = (tmp_ / "state").string();
    cmd.format = format;
    cmd.host = Access();
    std::ostringstream out, err;
    EXPECT_EQ(RunStatus(cmd, out, err), kExitOk) << err.str();
    return out.str();
  }
  /// The service "chat" of `berth status -o json`.
  nlohmann::json Chat() {
    nlohmann::json j = nlohmann::json::parse(Status("json"));
    for (const auto& s : j["services"])
      if (s["name"] == "chat") return s;
    ADD_FAILURE() << "no service chat in " << j.dump(2);
    return {};
  }

  std::string store_, manifest_;
  std::string commit_ = std::string(40, 'a');
  int port_ = 0;
};

TEST_F(StatusE2eTest, AnAppliedServiceIsActiveAndHealthyThenInactiveOnceStoppedByHand) {
  auto before = static_cast<uint64_t>(std::time(nullptr)) - 1;
  ASSERT_EQ(Apply(), kExitOk);

  nlohmann::json chat = Chat();
  EXPECT_EQ(chat["unit"], "chat.service");
  EXPECT_EQ(chat["active"], "active");
  EXPECT_EQ(chat["sub"], "running");
  EXPECT_EQ(chat["wanted"], "running");
  EXPECT_EQ(chat["model"], "chat");
  EXPECT_EQ(chat["repo_id"], "org/chat");
  EXPECT_EQ(chat["commit"], commit_) << "the commit its unit runs";
  EXPECT_EQ(chat["port"], port_);
  EXPECT_EQ(chat["health"], "healthy");
  EXPECT_EQ(chat["boot"], "enabled");
  EXPECT_GE(chat["active_since_usec"].get<uint64_t>() / 1000000, before);
  EXPECT_TRUE(chat["last_start_ms"].is_number()) << "the apply recorded its start";
  nlohmann::json models = nlohmann::json::parse(Status("json"))["models"];
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0]["used_by"], nlohmann::json::array({"chat"}));
  EXPECT_EQ(models[0]["revisions"][0]["commit"], commit_);

  std::string text = Status("text");
  EXPECT_THAT(text, HasSubstr("  chat (chat.service): active/running, wanted running, "
                              "enabled at boot\n"));
  EXPECT_THAT(text, HasSubstr("      model chat: org/chat@aaaaaaa\n"));
  EXPECT_THAT(text, HasSubstr("      since "));
  EXPECT_THAT(text, HasSubstr("      port " + std::to_string(port_) + ": healthy\n"));

  CommandResult stop = sandbox_->Exec({"systemctl", "stop", "chat.service"});
  ASSERT_TRUE(stop.ok()) << stop.output << stop.error;

  chat = Chat();
  EXPECT_EQ(chat["active"], "inactive");
  EXPECT_EQ(chat["sub"], "dead");
  EXPECT_EQ(chat["wanted"], "running");
  EXPECT_EQ(chat["commit"], commit_) << "its unit file still names the commit";
  EXPECT_EQ(chat["boot"], "enabled");
  EXPECT_EQ(chat["active_since_usec"], 0);
  EXPECT_EQ(chat["health"], "unhealthy: not running (chat.service is inactive)");

  text = Status("text");
  EXPECT_THAT(text, HasSubstr("  chat (chat.service): inactive/dead, wanted running, "
                              "enabled at boot\n"));
  EXPECT_THAT(text, HasSubstr("      model chat: org/chat@aaaaaaa\n"));
  EXPECT_THAT(text, Not(HasSubstr("      since ")));
  EXPECT_THAT(text, HasSubstr("      port " + std::to_string(port_) +
                              ": unhealthy: not running (chat.service is inactive)\n"));
}

}  // namespace
}  // namespace berth::testing
