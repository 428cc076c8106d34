// Pinned revisions end to end: the sandboxed systemd, the fake Hub and fake vLLM, passes of the
// reconcile loop run in-process. An upstream push changes nothing (same invocation, no
// download); `berth lock --update` moves the pin, the next pass upgrades, and the revision the
// service left stays in the store for a rollback.
#include <gmock/gmock.h>

#include "core/hf_cache.h"
#include "engine/cli/commands.h"
#include "providers/hub/hub_api.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/hub/fake_hub_server.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class PinsE2eTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    hub_ = std::make_unique<FakeHubServer>();
    std::string error;
    ASSERT_TRUE(hub_->Start((tmp_ / "hub").string(), 1 << 20, {}, &error)) << error;
    Push("r1", "2048");
    ::setenv("HF_ENDPOINT", hub_->api().c_str(), 1);
    ::unsetenv("HF_HUB_OFFLINE");
  }
  void TearDown() override {
    ::unsetenv("HF_ENDPOINT");
    hub_.reset();
    SandboxSuite::TearDown();
  }

  /// A new commit of org/chat on the Hub (a revision folder, a model fake vLLM loads) that main
  /// now points at.
  void Push(const std::string& dir, const std::string& max_len) {
    std::filesystem::path repo = tmp_ / "hub" / "repos" / "org" / "chat";
    CommandResult r =
        RunCommand({"/usr/bin/python3", SourceDir() + "/tests/fake_vllm/make_model.py",
                    (repo / dir).string(), "--max-position-embeddings", max_len});
    ASSERT_TRUE(r.ok()) << r.output << r.error;
    std::ofstream(repo / "refs.json") << R"({"branches": {"main": ")" << dir << R"("}})";
    hub_->Control("POST", "/_fake/reload");
  }
  std::string Upstream() {
    HubHttp http(HubOptionsFromEnvironment());
    auto snap = ResolveSnapshot(http, "org/chat", "main");
    EXPECT_TRUE(snap.ok()) << snap.status().message();
    return snap.ok() ? snap->commit : "";
  }
  std::string Manifest() {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n  chat: {source: hf://org/chat}\n"
      << "services:\n  svc-a:\n    model: chat\n    engine: vllm\n    gpus: [0]\n    port: "
      << port_ << "\n    bind: 127.0.0.1\n    health: {timeout: 30s, interval: 100ms}\n";
    std::string path = (tmp_ / "manifests" / "berth.yaml").string();
    std::filesystem::create_directories(tmp_ / "manifests");
    std::ofstream(path) << m.str();
    return (tmp_ / "manifests").string();
  }
  int Pass(const std::string& manifest) {
    ReconcileCommand cmd;
    cmd.manifest_path = manifest;
    cmd.once = true;
    cmd.host.bus_address = sandbox_->system_bus_address();
    cmd.host.journal_dir = sandbox_->journal_dir();
    cmd.state_dir = (tmp_ / "state").string();
    out_.str("");
    err_.str("");
    return RunReconcile(cmd, out_, err_);
  }
  int Lock(const std::string& manifest, bool update, std::vector<std::string> models = {}) {
    LockCommand cmd;
    cmd.manifest_path = manifest;
    cmd.update = update;
    cmd.models = std::move(models);
    out_.str("");
    err_.str("");
    return RunLock(cmd, out_, err_);
  }
  std::string Invocation() {
    auto units = systemd_->GetUnits({"svc-a.service"});
    return units.ok() && (*units)[0].active_state == "active" ? (*units)[0].invocation_id : "";
  }
  bool InStore(const std::string& commit) {
    return std::filesystem::exists(HfCachePaths(store_, "org/chat").SnapshotDir(commit) +
                                   "/config.json");
  }

  std::unique_ptr<FakeHubServer> hub_;
  std::string store_;
  int port_ = FreePort();
  std::ostringstream out_, err_;
};

TEST_F(PinsE2eTest, AnUpstreamPushWaitsForLockUpdateThenThePreviousRevisionStays) {
  std::string manifest = Manifest();
  const std::string c1 = Upstream();
  ASSERT_EQ(Lock(manifest, false), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(),
              HasSubstr("model/chat: org/chat main pinned at " + c1.substr(0, 7) + " (new)"));
  ASSERT_EQ(Pass(manifest), kExitOk) << out_.str() << err_.str();
  const std::string first = Invocation();
  ASSERT_FALSE(first.empty());
  ASSERT_TRUE(InStore(c1));

  // Upstream pushes: the next pass changes nothing, and the plan says where main went.
  Push("r2", "4096");
  const std::string c2 = Upstream();
  ASSERT_NE(c1, c2);
  ASSERT_EQ(Pass(manifest), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("converged: 1/1 services up"));
  EXPECT_EQ(Invocation(), first);
  EXPECT_FALSE(std::filesystem::exists(HfCachePaths(store_, "org/chat").SnapshotDir(c2)));
  PlanCommand plan;
  plan.manifest_path = manifest;
  plan.host.bus_address = sandbox_->system_bus_address();
  plan.state_dir = (tmp_ / "state").string();
  plan.detailed_exitcode = true;
  std::ostringstream plan_out, plan_err;
  EXPECT_EQ(RunPlan(plan, plan_out, plan_err), kExitOk) << plan_out.str() << plan_err.str();
  EXPECT_THAT(plan_out.str(),
              HasSubstr("upstream main moved to " + c2.substr(0, 7) + " (pinned at " +
                        c1.substr(0, 7) + "); berth lock --update chat to move"));

  // Without --update the lock keeps its pins; with it, the pin moves and the next pass upgrades.
  ASSERT_EQ(Lock(manifest, false), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("is up to date"));
  ASSERT_EQ(Lock(manifest, true, {"chat"}), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("model/chat: org/chat main moved " + c1.substr(0, 7) + " → " +
                                    c2.substr(0, 7)));
  ASSERT_EQ(Pass(manifest), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("berth.lock pins main at " + c2.substr(0, 7)));
  EXPECT_THAT(out_.str(), Not(HasSubstr("remove-model")));
  std::string second = Invocation();
  EXPECT_FALSE(second.empty());
  EXPECT_NE(second, first);
  EXPECT_TRUE(InStore(c2));
  EXPECT_TRUE(InStore(c1)) << "the revision the service left is kept for a rollback";
  std::string unit = ReadAll(sandbox_->units_dir() + "/svc-a.service");
  EXPECT_THAT(unit, HasSubstr("snapshots/" + c2));
  EXPECT_EQ(ReadAll(HfCachePaths(store_, "org/chat").RefPath("main")), c2);
}

}  // namespace
}  // namespace berth::testing
