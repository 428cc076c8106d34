// A service that passes its gates, then crashes, against a real systemd: the fake vLLM exits 2 s
// after it starts serving (--exit-after-healthy), the unit's Restart=on-failure restarts it
// (a drop-in makes RestartSec= short and StartLimitBurst= small, so that systemd gives up
// soon). berth status, the reconcile loop's line and its metrics say crash-looping with the
// restart count, never converged; once systemd gave up, apply does not start it again.
// And a service bound to 127.0.0.2 passes its gate: the probes dial the address it binds.
#include <gmock/gmock.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class CrashLoopE2eTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ::setenv("HF_HUB_OFFLINE", "1", 1);
    store_ = (tmp_ / "store").string();
    MakeModel(store_, "org/chat", commit_);
    port_ = FreePort();
  }
  void TearDown() override {
    ::unsetenv("HF_HUB_OFFLINE");
    std::error_code ec;
    if (sandbox_) std::filesystem::remove_all(sandbox_->units_dir() + "/chat.service.d", ec);
    SandboxSuite::TearDown();
  }

  void WriteManifest(const std::string& bind, const std::string& extra) {
    std::ostringstream m;
    m << "berth: 1\n"
      << "host:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir() << "\n"
      << "  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n  chat: {source: hf://org/chat, revision: " << commit_ << "}\n"
      << "services:\n"
      << "  chat:\n    model: chat\n    engine: vllm\n    gpus: [0]\n    port: " << port_
      << "\n    bind: " << bind << "\n    health: {timeout: 30s, interval: 100ms}\n"
      << extra;
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
    std::istringstream in;
    out_.str("");
    err_.str("");
    return RunApply(cmd, in, out_, err_);
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
  nlohmann::json Chat() {
    nlohmann::json j = nlohmann::json::parse(Status("json"));
    for (const auto& s : j["services"])
      if (s["name"] == "chat") return s;
    ADD_FAILURE() << "no service chat in " << j.dump(2);
    return {};
  }
  int Once() {
    ReconcileCommand cmd;
    cmd.manifest_path = manifest_;
    cmd.once = true;
    cmd.host = Access();
    cmd.state_dir = (tmp_ / "state").string();
    cmd.metrics_path = (tmp_ / "berth.prom").string();
    out_.str("");
    err_.str("");
    return RunReconcile(cmd, out_, err_);
  }
  UnitProperties Props() {
    auto p = systemd_->GetUnits({"chat.service"});
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok() ? (*p)[0] : UnitProperties{};
  }

  std::string store_, manifest_;
  std::string commit_ = std::string(40, 'c');
  int port_ = 0;
  std::ostringstream out_, err_;
};

TEST_F(CrashLoopE2eTest, AServiceThatCrashesAfterItsGateIsCrashLoopingNotConverged) {
  WriteManifest("127.0.0.1", "    args: [--exit-after-healthy, \"2\"]\n");
  // The operator's restart policy, in a drop-in: restart soon, give up after 3 starts.
  std::filesystem::create_directories(sandbox_->units_dir() + "/chat.service.d");
  std::ofstream(sandbox_->units_dir() + "/chat.service.d/restart.conf")
      << "[Unit]\nStartLimitIntervalSec=600\nStartLimitBurst=3\n"
      << "[Service]\nRestart=on-failure\nRestartSec=200ms\n";

  ASSERT_EQ(Apply(), kExitOk) << out_.str() << err_.str();  // its gate passed
  ASSERT_TRUE(WaitFor([&] { return Props().n_restarts >= 1; }, std::chrono::seconds(30)))
      << "systemd never restarted it: " << Props().active_state << "/" << Props().sub_state;

  // berth status: crash-looping with the restart count, whatever state this moment shows.
  nlohmann::json chat = Chat();
  EXPECT_EQ(chat["crash_looping"], true) << chat.dump(2);
  EXPECT_GE(chat["restarts"].get<int>(), 1);
  EXPECT_THAT(chat["crash_loop_detail"].get<std::string>(), StartsWith("restarted "));
  EXPECT_THAT(chat["health"].get<std::string>(), StartsWith("unhealthy: crash-looping ("));
  std::string text = Status("text");
  EXPECT_THAT(text, HasSubstr("  chat (chat.service): crash-looping (restarted ")) << text;

  // The loop's pass: its line and its metrics.
  EXPECT_EQ(Once(), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("berth reconcile: crash-looping: chat (restarted "))
      << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("0/1 services up"));
  EXPECT_THAT(err_.str(), Not(HasSubstr("converged")));
  std::string metrics = ReadAll((tmp_ / "berth.prom").string());
  EXPECT_THAT(metrics, HasSubstr("\nberth_services_up 0\n"));
  EXPECT_THAT(metrics, HasSubstr("\nberth_services_crash_looping 1\n"));
  EXPECT_THAT(
      metrics,
      HasSubstr("\nberth_service_crash_looping{service=\"chat\",unit=\"chat.service\"} 1\n"));
  EXPECT_TRUE(std::regex_search(
      metrics,
      std::regex("\nberth_service_restarts\\{service=\"chat\",unit=\"chat.service\"\\} [1-9]")))
      << metrics;

  // systemd gives up after 3 starts: the unit ends failed (its Result is the last exit's, or
  // start-limit-hit, depending on systemd's version). berth does not start it again: it says
  // why, and how to.
  ASSERT_TRUE(WaitFor([&] { return Props().active_state == "failed"; }, std::chrono::seconds(60)))
      << Props().active_state << "/" << Props().sub_state << " " << Props().result;
  uint32_t restarts = Props().n_restarts;
  std::string invocation = Props().invocation_id;
  ASSERT_EQ(Apply(), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str() + err_.str(), HasSubstr("then systemd gave up (" + Props().result +
                                                 "). berth does not start it again"));
  EXPECT_THAT(out_.str() + err_.str(), HasSubstr("systemctl reset-failed chat.service"));
  UnitProperties after = Props();
  EXPECT_EQ(after.active_state, "failed") << "not started again";
  EXPECT_EQ(after.invocation_id, invocation);
  EXPECT_EQ(after.n_restarts, restarts);
  chat = Chat();
  EXPECT_EQ(chat["crash_looping"], true);
  EXPECT_THAT(chat["crash_loop_detail"].get<std::string>(), HasSubstr("then systemd gave up ("));
  EXPECT_EQ(Once(), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("berth reconcile: crash-looping: chat (restarted "));
}

// The same crash behind a soak gate: an update of a healthy service to one that exits 2 s after
// it serves passes its health gate, then systemd restarts it during its soak. berth rolls it back
// to the unit file it replaced (exit 4, the change held), and the next passes leave the old
// server alone: one outage, where the loop without the soak went dark once per crash.
TEST_F(CrashLoopE2eTest, ASoakGateRollsBackAServiceThatCrashesAfterItsGatesWithOneOutage) {
  std::filesystem::create_directories(sandbox_->units_dir() + "/chat.service.d");
  std::ofstream(sandbox_->units_dir() + "/chat.service.d/restart.conf")
      << "[Service]\nRestart=on-failure\nRestartSec=200ms\n";
  WriteManifest("127.0.0.1", "");
  ASSERT_EQ(Apply(), kExitOk) << out_.str() << err_.str();
  const std::string healthy = Props().invocation_id;

  WriteManifest("127.0.0.1",
                "    args: [--exit-after-healthy, \"2\"]\n"
                "    gates: {soak: {duration: 8s, interval: 200ms}}\n");
  EXPECT_EQ(Apply(), kExitFailed) << out_.str() << err_.str();
  std::string said = out_.str() + err_.str();
  EXPECT_THAT(said, HasSubstr("the soak gate of chat.service failed after"));
  EXPECT_THAT(said, HasSubstr("systemd restarted it 1 time (at most 0 allowed)"));
  EXPECT_THAT(said, HasSubstr("rollback: restore the unit file of chat.service"));
  EXPECT_THAT(said, HasSubstr("chat.service is healthy again"));
  // Back on the old unit file: no --exit-after-healthy, and it stays up.
  std::string unit = ReadAll(sandbox_->units_dir() + "/chat.service");
  EXPECT_THAT(unit, Not(HasSubstr("exit-after-healthy")));
  UnitProperties back = Props();
  EXPECT_EQ(back.active_state, "active");
  EXPECT_NE(back.invocation_id, healthy) << "restarted once, by the rollback";

  // The change is held: neither apply nor the loop tries it again (exit 3: the plan does not
  // run; `berth apply --retry` would).
  EXPECT_EQ(Apply(), kExitBlocked) << out_.str() << err_.str();
  EXPECT_THAT(out_.str() + err_.str(), HasSubstr("not trying this change again"));
  EXPECT_EQ(Once(), kExitBlocked) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("berth reconcile: held:"));
  std::this_thread::sleep_for(std::chrono::seconds(3));  // longer than the crash took
  UnitProperties later = Props();
  EXPECT_EQ(later.invocation_id, back.invocation_id) << "no second outage";
  EXPECT_EQ(later.active_state, "active");
  // systemd's count may keep the crash before the rollback (a restart job that meets the
  // pending auto-restart does not reset it): none was added since.
  EXPECT_EQ(later.n_restarts, back.n_restarts) << "restarted by systemd after the rollback";
  EXPECT_LE(back.n_restarts, 1u);
}

// Bound to 127.0.0.2 (a loopback address, but not 127.0.0.1): the health gate, berth status
// and the rollback probe it there. Dialling 127.0.0.1 is refused, and the gate would fail.
TEST_F(CrashLoopE2eTest, AServiceBoundToAnotherAddressPassesItsGateThere) {
  WriteManifest("127.0.0.2", "");
  ASSERT_EQ(Apply(), kExitOk) << out_.str() << err_.str();
  nlohmann::json chat = Chat();
  EXPECT_EQ(chat["active"], "active");
  EXPECT_EQ(chat["health"], "healthy") << chat.dump(2);
  EXPECT_EQ(chat["crash_looping"], false);
}

}  // namespace
}  // namespace berth::testing
