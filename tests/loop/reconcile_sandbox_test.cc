// `berth reconcile --once` against a real systemd in a sandbox. Applying connects to systemd
// before it plans, so even a manifest whose host.match excludes this host needs a bus; with one
// it changes nothing and exits 0. Then one pass converges a fake-vLLM service and the metrics
// say so.
#include <gmock/gmock.h>

#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;

class ReconcileOnceTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    // Observing asks the Hub about models missing from the store, even on a host the manifest
    // excludes; there is no network here.
    ::setenv("HF_HUB_OFFLINE", "1", 1);
  }
  void TearDown() override {
    ::unsetenv("HF_HUB_OFFLINE");
    SandboxSuite::TearDown();
  }

  std::string Manifest(const std::string& match, int port) {
    std::ostringstream m;
    m << "berth: 1\n"
      << "host:\n"
      << match << "  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n  chat: {source: hf://org/chat, revision: " << commit_ << "}\n"
      << "services:\n  svc-a:\n    model: chat\n    engine: vllm\n    gpus: [0]\n    port: " << port
      << "\n    bind: 127.0.0.1\n    health: {timeout: 30s, interval: 100ms}\n";
    std::string path = (tmp_ / "berth.yaml").string();
    std::ofstream(path) << m.str();
    return path;
  }

  int Once(const std::string& manifest, bool with_bus = true) {
    ReconcileCommand cmd;
    cmd.manifest_path = manifest;
    cmd.once = true;
    if (with_bus)
      cmd.host.bus_address = sandbox_->system_bus_address();
    else
      cmd.host.bus_address = "unix:path=" + (tmp_ / "no-bus").string();
    cmd.host.journal_dir = sandbox_->journal_dir();
    cmd.state_dir = (tmp_ / "state").string();
    cmd.metrics_path = (tmp_ / "berth.prom").string();
    out_.str("");
    err_.str("");
    return RunReconcile(cmd, out_, err_);
  }

  std::string store_;
  std::string commit_ = std::string(40, 'a');
  std::ostringstream out_, err_;
};

TEST_F(ReconcileOnceTest, HostExcludedByMatchChangesNothingAndExitsZero) {
  std::string m = Manifest("  match: {hostname: \"no-such-host-*\"}\n", FreePort());
  ASSERT_EQ(Once(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("does not match host"));
  EXPECT_THAT(err_.str(), HasSubstr("berth reconcile: nothing to do: host.match.hostname"));
  EXPECT_FALSE(std::filesystem::exists(sandbox_->units_dir() + "/svc-a.service"));
  // Nothing applies here, so nothing is asked of systemd: no bus is no problem.
  EXPECT_EQ(Once(m, /*with_bus=*/false), kExitOk);
  // A manifest for this host does need systemd: without a bus it is an error.
  EXPECT_EQ(Once(Manifest("", FreePort()), /*with_bus=*/false), kExitError);
  EXPECT_THAT(ReadAll((tmp_ / "berth.prom").string()),
              HasSubstr("berth_failures_total{kind=\"error\"} 1\n"));
}

TEST_F(ReconcileOnceTest, OnePassConvergesAndTheMetricsSaySo) {
  MakeModel(store_, "org/chat", commit_);
  std::string m = Manifest("", FreePort());
  ASSERT_EQ(Once(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("berth reconcile: applied "));
  EXPECT_THAT(err_.str(), HasSubstr("converged: 1/1 services up"));
  std::string metrics = ReadAll((tmp_ / "berth.prom").string());
  EXPECT_THAT(metrics, HasSubstr("\nberth_services_up 1\n"));
  EXPECT_THAT(metrics, HasSubstr("\nberth_services_wanted 1\n"));
  EXPECT_THAT(metrics, HasSubstr("\nberth_pending_changes 0\n"));
  // The next pass has nothing to do.
  ASSERT_EQ(Once(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("berth reconcile: converged: 1/1 services up"));
}

}  // namespace
}  // namespace berth::testing
