// `berth apply -f` end to end: two fake-vLLM services with their models in the store, against
// the sandboxed systemd. Converges, passes health, plans nothing after, restarts only what
// changed, and removes what is absent.
#include <gmock/gmock.h>

#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ApplyTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    MakeModel(store_, "org/chat", commit_a_);
    MakeModel(store_, "org/embed", commit_b_);
    port_a_ = FreePort();
    port_b_ = FreePort();
    while (port_b_ == port_a_) port_b_ = FreePort();
  }

  std::string Manifest(const std::string& b_extra = "", const std::string& b_state = "running") {
    std::ostringstream m;
    m << "berth: 1\n"
      << "host:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir() << "\n"
      << "  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n"
      << "  chat: {source: hf://org/chat, revision: " << commit_a_ << "}\n"
      << "  embed: {source: hf://org/embed, revision: " << commit_b_ << "}\n"
      << "services:\n"
      << "  svc-a:\n    model: chat\n    engine: vllm\n    gpus: [0]\n    port: " << port_a_
      << "\n    bind: 127.0.0.1\n    health: {timeout: 30s, interval: 100ms}\n"
      << "  svc-b:\n    model: embed\n    engine: vllm\n    gpus: [1]\n    port: " << port_b_
      << "\n    bind: 127.0.0.1\n    state: " << b_state
      << "\n    health: {timeout: 30s, interval: 100ms}\n"
      << b_extra;
    std::string path = (tmp_ / "berth.yaml").string();
    std::ofstream(path) << m.str();
    return path;
  }

  int Apply(const std::string& manifest) { return ApplyIn(manifest, out_, err_); }
  int PlanDetailed(const std::string& manifest) {
    // The live plan, as `berth apply` computes it before asking.
    ApplyCommand cmd;
    cmd.manifest_path = manifest;
    cmd.yes = false;
    cmd.host.bus_address = sandbox_->system_bus_address();
    cmd.host.journal_dir = sandbox_->journal_dir();
    cmd.state_dir = (tmp_ / "state").string();
    out_.str("");
    err_.str("");
    std::istringstream no("no\n");
    return RunApply(cmd, no, out_, err_);
  }
  std::string Invocation(const std::string& unit) {
    auto p = systemd_->GetUnits({unit});
    return p.ok() ? (*p)[0].invocation_id : "";
  }
  std::string Get(int port, const std::string& path) {
    CommandResult r =
        RunCommand({"/usr/bin/python3", "-c",
                    "import urllib.request,sys; print(urllib.request.urlopen("
                    "'http://127.0.0.1:" +
                        std::to_string(port) + path + "', timeout=5).read().decode())"});
    return r.ok() ? r.output : "ERROR: " + r.output + r.error;
  }

  std::string store_;
  std::string commit_a_ = std::string(40, 'a'), commit_b_ = std::string(40, 'b');
  int port_a_ = 0, port_b_ = 0;
  std::ostringstream out_, err_;
};

TEST_F(ApplyTest, ConvergesThenRestartsOnlyWhatChangedThenRemovesWhatIsAbsent) {
  std::string m = Manifest();
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("+ write-unit    unit/svc-a.service"));
  EXPECT_THAT(out_.str(), HasSubstr("the host matches the manifests"));
  EXPECT_THAT(Get(port_a_, "/v1/models"), HasSubstr("\"svc-a\""));
  EXPECT_THAT(Get(port_b_, "/v1/models"), HasSubstr("\"svc-b\""));

  // The next plan is empty: nothing to ask, nothing to do.
  ASSERT_EQ(PlanDetailed(m), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No changes"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("Apply these")));

  // One flag changes on svc-b: only svc-b restarts.
  std::string a_before = Invocation("svc-a.service"), b_before = Invocation("svc-b.service");
  m = Manifest("    vllm: {max_model_len: 4096}\n");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("restart       service/svc-b"));
  EXPECT_THAT(out_.str(), HasSubstr("+--max-model-len 4096"));
  EXPECT_EQ(Invocation("svc-a.service"), a_before);
  EXPECT_NE(Invocation("svc-b.service"), b_before);
  ASSERT_EQ(PlanDetailed(m), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("No changes"));

  // state: absent stops svc-b and removes its file; svc-a keeps serving.
  m = Manifest("", "absent");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("- stop          service/svc-b"));
  EXPECT_THAT(out_.str(), HasSubstr("- remove-unit   unit/svc-b.service"));
  EXPECT_FALSE(std::filesystem::exists(sandbox_->units_dir() + "/svc-b.service"));
  EXPECT_THAT(Get(port_b_, "/health"), HasSubstr("ERROR"));
  EXPECT_EQ(Invocation("svc-a.service"), a_before);
  ASSERT_EQ(PlanDetailed(m), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("No changes"));
}

// A setting only systemd reads (RestartSec=), edited by hand and loaded: berth restores it with
// a daemon-reload, the process keeps running (same InvocationID), and systemd reports the
// restored value.
TEST_F(ApplyTest, ARestartSecEditIsRestoredByADaemonReloadWithoutARestart) {
  std::string m = Manifest();
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  auto restart_usec = [&] {
    CommandResult r = sandbox_->Exec({"systemctl", "show", "-P", "RestartUSec", "svc-a.service"});
    return r.ok() ? r.output : "ERROR: " + r.output + r.error;
  };
  ASSERT_EQ(restart_usec(), "10s\n");
  std::string path = sandbox_->units_dir() + "/svc-a.service";
  std::string text = ReadAll(path);
  text.replace(text.find("RestartSec=10"), 13, "RestartSec=30");
  std::ofstream(path) << text;
  ASSERT_TRUE(sandbox_->Exec({"systemctl", "daemon-reload"}).ok());
  ASSERT_EQ(restart_usec(), "30s\n");
  const std::string before = Invocation("svc-a.service");
  ASSERT_FALSE(before.empty());

  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("RestartSec changed: 30 → 10"));
  EXPECT_THAT(out_.str(), HasSubstr("daemon-reload only, no restart"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("restart       service/svc-a")));
  EXPECT_EQ(Invocation("svc-a.service"), before) << "the process was restarted";
  EXPECT_EQ(restart_usec(), "10s\n");
  ASSERT_EQ(PlanDetailed(m), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No changes"));
}

TEST_F(ApplyTest, AHandEditedUnitIsReportedAsDriftAndRepaired) {
  std::string m = Manifest();
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  std::string path = sandbox_->units_dir() + "/svc-a.service";
  std::string text = ReadAll(path);
  text.replace(text.find("\"--port\""), 8, "\"--hacked\" \"1\" \"--port\"");
  std::ofstream(path) << text;
  ASSERT_EQ(PlanDetailed(m), kExitError);  // not confirmed: nothing changed
  EXPECT_THAT(out_.str(), HasSubstr("unit/svc-a.service"));
  EXPECT_THAT(out_.str(), HasSubstr("edited by hand"));
  EXPECT_THAT(out_.str(), HasSubstr("--hacked 1"));
  std::string before = Invocation("svc-a.service");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(ReadAll(path), Not(HasSubstr("hacked")));
  EXPECT_NE(Invocation("svc-a.service"), before) << "the repaired unit runs again";
  ASSERT_EQ(PlanDetailed(m), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("No changes"));
}

TEST_F(ApplyTest, AServerThatCannotLoadItsModelFailsWithItsJournal) {
  // A damaged weights file berth does not read: the server finds out, and its journal says so.
  std::string weights =
      store_ + "/models--org--embed/snapshots/" + commit_b_ + "/model.safetensors";
  std::string blob = std::filesystem::canonical(weights).string();
  std::ofstream(blob, std::ios::trunc) << "xx";
  std::string m = Manifest();
  EXPECT_EQ(Apply(m), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("svc-b.service"));
  EXPECT_THAT(err_.str(), HasSubstr("too short for a safetensors header"));
}

// A model without config.json is found out by the preflight: the plan is blocked before
// anything starts (it used to fail at the start, after the unit went up).
TEST_F(ApplyTest, AModelWithoutConfigJsonBlocksThePlanBeforeAnythingStarts) {
  std::filesystem::remove_all(store_ + "/models--org--embed/snapshots/" + commit_b_ +
                              "/config.json");
  std::string m = Manifest();
  EXPECT_EQ(Apply(m), kExitBlocked) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("service/svc-b cannot start on model/embed: config.json of "
                                    "org/embed@bbbbbbb is missing from the snapshot"));
  EXPECT_EQ(Invocation("svc-a.service"), "") << "nothing was started";
}

}  // namespace
}  // namespace berth::testing
