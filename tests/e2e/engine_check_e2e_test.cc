// The engine check end to end: berth (the binary, which finds build/engine-check/ beside it) on
// the sandboxed systemd, a fake-vLLM service svc-a whose unit puts the fake vllm package
// (tests/fake_vllm/pkg) on its PYTHONPATH through its env_file. A switch of svc-a to a model
// vLLM cannot serve (its config.json names an architecture vLLM's registry lacks: only the
// engine knows) is stopped by the engine check before anything goes dark: svc-a keeps its
// InvocationID and serves, and the error quotes vLLM's message. With `preflight: {engine: off}`
// the same change is what berth did before the check: svc-a is restarted, the new server dies
// at its start with the same message, and the switch is rolled back. What berth can tell from
// the store itself (speculative mtp on a model type without MTP layers) is refused by the plan,
// before any step. And the check runs with the environment systemd gives the unit.
#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class EngineCheckE2eTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    MakeModel(store_, "org/a", std::string(40, 'a'));  // model_type llama: no MTP
    // org/b: a well-formed checkpoint of an architecture vLLM has no model for.
    std::string b = MakeModel(store_, "org/b", std::string(40, 'b'));
    CommandResult made =
        RunCommand({"/usr/bin/python3", SourceDir() + "/tests/fake_vllm/make_model.py", b,
                    "--architecture", "NoSuchModelForCausalLM"});
    EXPECT_TRUE(made.ok()) << made.output << made.error;
    port_ = FreePort();
    dump_ = (tmp_ / "env-dump").string();
    std::filesystem::create_directories(dump_);
    // The unit's EnvironmentFile=, in systemd's syntax: quotes, a comment, an escape.
    env_file_ = (tmp_ / "svc-a.env").string();
    std::ofstream(env_file_) << "# the fake vllm package, as a virtualenv would provide vllm\n"
                             << "PYTHONPATH=" << SourceDir() << "/tests/fake_vllm/pkg\n"
                             << "FROM_ENV_FILE=\"quoted \\\"value\\\" \"   \n"
                             << "  SPACED = kept\\ too  \n";
  }

  // svc-a on port P serving `model` (a or b); `extra` more of its keys (indented).
  std::string Manifest(const std::string& model, const std::string& extra = "") {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n  a: {source: hf://org/a, revision: " << std::string(40, 'a') << "}\n"
      << "  b: {source: hf://org/b, revision: " << std::string(40, 'b') << "}\n"
      << "services:\n  svc-a:\n    model: " << model
      << "\n    engine: vllm\n    gpus: [0]\n    port: " << port_
      << "\n    bind: 127.0.0.1\n    health: {timeout: 30s, interval: 100ms}\n"
      << "    env: {FAKE_VLLM_ENV_DUMP: " << dump_ << "}\n"
      << "    env_file: " << env_file_ << "\n"
      << extra;
    std::string path = (tmp_ / ("berth-" + std::to_string(++manifests_) + ".yaml")).string();
    std::ofstream(path) << m.str();
    return path;
  }
  CommandResult Berth(const std::string& verb, const std::string& manifest) {
    std::vector<std::string> argv = {BERTH_BIN,     verb,
                                     "-f",          manifest,
                                     "--bus",       sandbox_->system_bus_address(),
                                     "--state-dir", (tmp_ / "state").string()};
    if (verb == "apply")
      argv.insert(argv.end(), {"--yes", "--journal-dir", sandbox_->journal_dir()});
    return RunCommand(argv, {}, std::chrono::seconds(120));
  }
  std::string Invocation() {
    auto p = systemd_->GetUnits({"svc-a.service"});
    return p.ok() ? (*p)[0].invocation_id : "";
  }
  std::string ActiveState() {
    auto p = systemd_->GetUnits({"svc-a.service"});
    return p.ok() ? (*p)[0].active_state : "?";
  }
  bool Healthy() {
    CommandResult r =
        RunCommand({"/usr/bin/python3", "-c",
                    "import urllib.request; urllib.request.urlopen('http://127.0.0.1:" +
                        std::to_string(port_) + "/health', timeout=5)"});
    return r.ok();
  }
  nlohmann::json Dump(const std::string& name) {
    return nlohmann::json::parse(ReadAll(dump_ + "/" + name), nullptr, false);
  }

  std::string store_, dump_, env_file_;
  int port_ = 0;
  int manifests_ = 0;
};

TEST_F(EngineCheckE2eTest, AConfigurationVllmRefusesIsStoppedBeforeTheOldServiceIsStopped) {
  CommandResult r = Berth("apply", Manifest("a"));
  ASSERT_TRUE(r.ok()) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("preflight     service/svc-a"));
  EXPECT_THAT(r.output, HasSubstr("engine check: vLLM's own argument parser and engine config"));
  ASSERT_EQ(ActiveState(), "active");
  const std::string before = Invocation();
  const std::string unit_before = ReadAll(sandbox_->units_dir() + "/svc-a.service");

  // The change: svc-a switches to model b. The plan shows the check before the write and the
  // restart.
  std::string bad = Manifest("b");
  r = Berth("plan", bad);
  EXPECT_THAT(r.output, HasSubstr("engine check:"));
  size_t check = r.output.find("preflight     service/svc-a");
  size_t restart = r.output.find("restart       service/svc-a");
  EXPECT_NE(check, std::string::npos) << r.output;
  EXPECT_NE(restart, std::string::npos) << r.output;
  if (check != std::string::npos) {
    EXPECT_LT(check, restart) << r.output;
  }

  r = Berth("apply", bad);
  EXPECT_EQ(r.exit_code, 4) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("the engine check of service/svc-a failed: vLLM refused this "
                                  "configuration: ValueError: Model architectures "
                                  "['NoSuchModelForCausalLM'] are not supported for now"));
  EXPECT_THAT(r.output, HasSubstr("nothing was stopped or started"));
  EXPECT_THAT(r.output, HasSubstr("preflight: {engine: off}"));
  EXPECT_EQ(Invocation(), before) << "svc-a was never stopped";
  EXPECT_EQ(ActiveState(), "active");
  EXPECT_TRUE(Healthy()) << "svc-a still answers /health";
  EXPECT_EQ(ReadAll(sandbox_->units_dir() + "/svc-a.service"), unit_before)
      << "nothing was written either";
}

// What berth did before it had the engine check, and what `engine: off` still does: the old
// server is stopped (restarted) and the new one dies at its start with vLLM's message.
TEST_F(EngineCheckE2eTest, WithTheEngineCheckOffTheSameChangeTakesTheServiceDown) {
  ASSERT_TRUE(Berth("apply", Manifest("a")).ok());
  const std::string before = Invocation();
  CommandResult r = Berth("apply", Manifest("b", "    preflight: {engine: off}\n"));
  EXPECT_EQ(r.exit_code, 4) << r.output << r.error;
  EXPECT_THAT(r.output, Not(HasSubstr("engine check")));
  EXPECT_THAT(r.output, HasSubstr("Model architectures ['NoSuchModelForCausalLM'] are not "
                                  "supported for now"))
      << "the new server's own last words, from its journal";
  EXPECT_NE(Invocation(), before) << "svc-a was restarted: its port went dark";
}

// Speculative mtp on a model whose config.json model_type has no MTP layers: berth reads the
// model type in the store and vLLM's table in its catalogue, so the plan itself refuses it.
TEST_F(EngineCheckE2eTest, SpeculativeMtpOnAModelWithoutMtpLayersIsRefusedByThePlan) {
  ASSERT_TRUE(Berth("apply", Manifest("a")).ok());
  const std::string before = Invocation();
  CommandResult r =
      Berth("apply",
            Manifest("a", "    vllm: {speculative: {method: mtp, num_speculative_tokens: 3}}\n"));
  EXPECT_NE(r.exit_code, 0) << r.output << r.error;
  EXPECT_THAT(r.output + r.error, HasSubstr("Unsupported speculative method: 'mtp'"));
  EXPECT_THAT(r.output + r.error, HasSubstr("llama"));
  EXPECT_EQ(Invocation(), before) << "svc-a was never stopped";
  EXPECT_TRUE(Healthy());
}

TEST_F(EngineCheckE2eTest, TheCheckSeesTheEnvironmentSystemdGivesTheUnit) {
  CommandResult r = Berth("apply", Manifest("a"));
  ASSERT_TRUE(r.ok()) << r.output << r.error;
  nlohmann::json check = Dump("check.json"), serve = Dump("serve.json");
  ASSERT_TRUE(check.is_object()) << ReadAll(dump_ + "/check.json");
  ASSERT_TRUE(serve.is_object()) << ReadAll(dump_ + "/serve.json");
  // What systemd sets for each start on its own (systemd.exec(5), "Environment variables in
  // spawned processes"): not the unit's configuration, so not the check's.
  const std::set<std::string> per_start = {
      "INVOCATION_ID",         "JOURNAL_STREAM",       "SYSTEMD_EXEC_PID", "MANAGERPID",
      "NOTIFY_SOCKET",         "LISTEN_FDS",           "LISTEN_PID",       "MAINPID",
      "MEMORY_PRESSURE_WATCH", "MEMORY_PRESSURE_WRITE"};
  for (const auto& [key, value] : serve.items()) {
    if (per_start.count(key)) continue;
    EXPECT_EQ(check.value(key, "<unset>"), value.get<std::string>()) << key;
  }
  for (const auto& [key, value] : check.items())
    EXPECT_TRUE(serve.contains(key)) << key << " is set for the check, not for the unit";
  EXPECT_EQ(serve.value("CUDA_VISIBLE_DEVICES", ""), "0");
  EXPECT_EQ(serve.value("HF_HUB_OFFLINE", ""), "1");
  EXPECT_EQ(serve.value("HF_HUB_CACHE", ""), store_);
  EXPECT_EQ(serve.value("FROM_ENV_FILE", ""), "quoted \"value\" ");
  EXPECT_EQ(serve.value("SPACED", ""), "kept too");
}

}  // namespace
}  // namespace berth::testing
