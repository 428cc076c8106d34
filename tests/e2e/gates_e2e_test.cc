// Preflight and smoke gates end to end: a switch of port P from svc-old to svc-new on the
// sandboxed systemd with fake vLLM servers. A smoke gate that passes ends the switch; one that
// fails (the new server answers with empty text) is rolled back with the old service healthy; a
// preflight command that fails stops the apply before anything is stopped; a smoke reply holding
// a byte that is not UTF-8 fails its gate like any other bad answer. berth killed -9 during any
// gate of the switch: the next apply runs every gate of it again, and a failing one is still
// rolled back.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/untrusted_text.h"
#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class GatesE2eTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    MakeModel(store_, "org/old", std::string(40, 'a'));
    MakeModel(store_, "org/new", std::string(40, 'b'));
    port_ = FreePort();
    // The fake vllm package, for berth's engine check of each start (as a virtualenv's vllm).
    env_file_ = (tmp_ / "engine.env").string();
    std::ofstream(env_file_) << "PYTHONPATH=" << SourceDir() << "/tests/fake_vllm/pkg\n";
  }

  // svc-old (with `old_extra`) serves port P; `switched`: svc-new (with `new_extra`) serves it
  // instead.
  std::string Manifest(bool switched, const std::string& new_extra = "",
                       const std::string& old_extra = "") {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n"
      << "  old: {source: hf://org/old, revision: " << std::string(40, 'a') << "}\n"
      << "  new: {source: hf://org/new, revision: " << std::string(40, 'b') << "}\n"
      << "services:\n"
      << "  svc-old:\n    model: old\n    engine: vllm\n    gpus: [0]\n    port: " << port_
      << "\n    bind: 127.0.0.1\n    state: " << (switched ? "stopped" : "running")
      << "\n    health: {timeout: 30s, interval: 100ms}\n    env_file: " << env_file_ << "\n"
      << old_extra;
    if (switched)
      m << "  svc-new:\n    model: new\n    engine: vllm\n    gpus: [0]\n    port: " << port_
        << "\n    bind: 127.0.0.1\n    strategy: stop-first\n"
        << "    health: {timeout: 30s, interval: 100ms}\n    env_file: " << env_file_ << "\n"
        << new_extra;
    std::string path = (tmp_ / ("berth-" + std::to_string(++manifests_) + ".yaml")).string();
    std::ofstream(path) << m.str();
    return path;
  }
  int Apply(const std::string& manifest) { return ApplyIn(manifest, out_, err_); }
  int Plan(const std::string& manifest) {
    PlanCommand cmd;
    cmd.manifest_path = manifest;
    cmd.host.bus_address = sandbox_->system_bus_address();
    cmd.state_dir = (tmp_ / "state").string();
    cmd.detailed_exitcode = true;
    out_.str("");
    err_.str("");
    return RunPlan(cmd, out_, err_);
  }
  // The step of the plan line "N > VERB ADDRESS ..." (0: none).
  int StepOf(const std::string& manifest, const std::string& verb, const std::string& address) {
    Plan(manifest);
    return berth::testing::StepOf(out_.str(), verb, address);
  }
  // `berth apply` as its own process (SandboxSuite::ApplyProcess), on this test's state.
  pid_t ApplyProcess(const std::string& manifest, const std::vector<std::string>& env,
                     const char* berth) {
    return SandboxSuite::ApplyProcess(berth, manifest, env,
                                      {"--state-dir", (tmp_ / "state").string()});
  }
  // The status of the journal's entry of `kind` (as the running apply last wrote it), "" none.
  std::string JournalStatus(const std::string& kind) {
    auto j =
        nlohmann::json::parse(ReadAll((tmp_ / "state" / "journal.json").string()), nullptr, false);
    if (j.is_discarded() || !j.contains("actions")) return "";
    for (const auto& e : j["actions"])
      if (e.value("kind", "") == kind) return e.value("status", "");
    return "";
  }
  std::string Invocation(const std::string& unit) {
    auto p = systemd_->GetUnits({unit});
    return p.ok() ? (*p)[0].invocation_id : "";
  }
  std::string Get(const std::string& path) {
    CommandResult r =
        RunCommand({"/usr/bin/python3", "-c",
                    "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:" +
                        std::to_string(port_) + path + "', timeout=5).read().decode())"});
    return r.ok() ? r.output : "ERROR: " + r.output + r.error;
  }

  std::string store_, env_file_;
  int port_ = 0;
  int manifests_ = 0;
  std::ostringstream out_, err_;
};

TEST_F(GatesE2eTest, APassingPreflightAndSmokeGateSwitchThePort) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  std::string m =
      Manifest(true,
               "    preflight: {command: [/bin/true], timeout: 10s}\n"
               "    gates: {smoke: {prompt: Say hello., max_tokens: 4, timeout: 10s}}\n");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("> preflight     service/svc-new"));
  EXPECT_THAT(out_.str(), HasSubstr("> smoke         service/svc-new"));
  EXPECT_THAT(out_.str(), HasSubstr("smoke: svc-new.service answered in"));
  EXPECT_EQ(ActiveState("svc-new.service"), "active");
  EXPECT_EQ(ActiveState("svc-old.service"), "inactive");
  EXPECT_THAT(Get("/v1/models"), HasSubstr("\"svc-new\""));
}

// trtllm-serve takes no served name and lists its model folder's name (the snapshot's commit):
// the health and smoke gates ask for that name, so the switch passes them.
TEST_F(GatesE2eTest, ATrtllmServeSwitchIsGatedOnTheFolderNameItLists) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  std::string m = Manifest(false);
  std::string text = ReadAll(m);
  text.replace(text.find("  executables: {vllm: "), std::string("  executables: {vllm: ").size(),
               "  executables: {trtllm-serve: " + FakeVllm() + ", vllm: ");
  text.replace(text.find("state: running"), std::string("state: running").size(), "state: stopped");
  text += "  trt:\n    model: new\n    engine: trtllm-serve\n    gpus: [0]\n    port: " +
          std::to_string(port_) +
          "\n    bind: 127.0.0.1\n    strategy: stop-first\n    gpu_memory: 1GiB\n"
          "    trtllm: {tp_size: 1}\n"
          "    health: {timeout: 30s, interval: 100ms}\n"
          "    gates: {smoke: {max_tokens: 4, timeout: 10s}}\n";
  std::ofstream(m) << text;
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  const std::string commit(40, 'b');
  EXPECT_THAT(out_.str(), HasSubstr("/v1/models lists '" + commit + "'"));
  EXPECT_THAT(out_.str(), HasSubstr("smoke: trt.service answered in"));
  EXPECT_EQ(ActiveState("trt.service"), "active");
  EXPECT_THAT(Get("/v1/models"), HasSubstr("\"" + commit + "\""));
  EXPECT_THAT(ReadAll(sandbox_->units_dir() + "/trt.service"),
              HasSubstr("\"serve\" \"" + store_ + "/models--org--new/snapshots/" + commit +
                        "\" \"--host\" \"127.0.0.1\""));
}

TEST_F(GatesE2eTest, AFailingSmokeGateIsRolledBackAndTheOldServiceServesAgain) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  std::string m =
      Manifest(true,
               "    env: {FAKE_VLLM_EMPTY_COMPLETIONS: \"1\"}\n"
               "    gates: {smoke: {prompt: Say hello., max_tokens: 4, timeout: 10s}}\n");
  ASSERT_EQ(Apply(m), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("the smoke gate of svc-new.service failed after"));
  EXPECT_THAT(err_.str(), HasSubstr("/v1/completions: HTTP 200 with empty text"));
  EXPECT_THAT(err_.str(), HasSubstr("rolled back:"));
  EXPECT_EQ(ActiveState("svc-new.service"), "inactive");
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
  EXPECT_THAT(Get("/v1/models"), HasSubstr("\"svc-old\"")) << "the old service serves again";
}

// One byte that is not UTF-8 in a server's answer used to abort berth in the middle of the switch
// (nlohmann's type_error.316 when the failure went into journal.json, exit 134) with the failing
// new service up and nothing held. Now: the smoke gate fails with the byte shown as \xff, the
// switch is rolled back, the change is held, every record berth wrote is JSON, and berth exits 4.
TEST_F(GatesE2eTest, ASmokeReplyWithAByteThatIsNotUtf8FailsTheGateAndIsRolledBack) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  const std::string state = (tmp_ / "state").string();
  auto berth = [&](const std::string& manifest) {
    return RunCommand(
        {BERTH_BIN, "apply", "-f", manifest, "--yes", "--bus", sandbox_->system_bus_address(),
         "--journal-dir", sandbox_->journal_dir(), "--state-dir", state},
        {}, std::chrono::seconds(120));
  };
  const std::string smoke =
      "    gates: {smoke: {prompt: Say hello., max_tokens: 4, timeout: 10s}}\n";
  std::string m = Manifest(true, "    env: {FAKE_VLLM_BAD_BYTES: \"1\"}\n" + smoke);
  CommandResult r = berth(m);
  ASSERT_EQ(r.exit_code, kExitFailed) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("the smoke gate of svc-new.service failed after"));
  EXPECT_THAT(r.output, HasSubstr("a malformed answer (not JSON): '"));
  EXPECT_THAT(r.output, HasSubstr("fake completion\\xff from svc-new"));
  EXPECT_THAT(r.output, HasSubstr("rolled back:"));
  EXPECT_EQ(r.output.find('\xff'), std::string::npos) << "the raw byte reached the terminal";
  EXPECT_EQ(ActiveState("svc-new.service"), "inactive");
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
  EXPECT_THAT(Get("/v1/models"), HasSubstr("\"svc-old\"")) << "the old service serves again";

  // What berth recorded is JSON, and holds the failure with the byte visible.
  for (const char* name : {"state.json", "history.json", "journal.json"}) {
    const std::string path = state + "/" + name;
    if (!std::filesystem::exists(path)) continue;
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(nlohmann::json::parse(text, nullptr, false).is_discarded()) << path << text;
  }
  std::ifstream in(state + "/state.json");
  nlohmann::json saved = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(saved.contains("held")) << saved.dump(2);
  EXPECT_THAT(saved["held"].value("message", ""), HasSubstr("completion\\xff from"));

  // Held: the same manifest is not tried again on its own.
  r = berth(m);
  EXPECT_EQ(r.exit_code, kExitBlocked) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("not trying this change again"));
  EXPECT_EQ(r.output.find('\xff'), std::string::npos);
  EXPECT_EQ(ActiveState("svc-old.service"), "active");

  // The same byte in a 500 answer's message.
  m = Manifest(
      true, "    env: {FAKE_VLLM_BAD_BYTES: \"1\", FAKE_VLLM_FAIL_COMPLETIONS: \"1\"}\n" + smoke);
  r = berth(m);
  ASSERT_EQ(r.exit_code, kExitFailed) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("HTTP 500 (expected 200): '"));
  EXPECT_THAT(r.output, HasSubstr("completion failed\\xff (fake_vllm told to fail)"));
  EXPECT_EQ(ActiveState("svc-new.service"), "inactive");
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
}

// The throughput floor with berth's own load generator against the fake vLLM, which streams
// 50 tokens a second per stream and 100 in all: 4 streams for 2 s measure about 100 tok/s.
TEST_F(GatesE2eTest, AServiceBelowItsThroughputFloorIsRolledBackWithTheFigures) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  const std::string paced =
      "    env: {FAKE_VLLM_TOKENS_PER_SECOND: \"50\", "
      "FAKE_VLLM_MAX_AGGREGATE_TOKENS_PER_SECOND: \"100\"}\n";
  std::string slow = Manifest(true, paced +
                                        "    gates: {floor: {concurrency: 4, duration: 2s, "
                                        "output_tps: 1000, max_tokens: 32}}\n");
  ASSERT_EQ(Apply(slow), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("the floor gate of svc-new.service failed: output "));
  EXPECT_THAT(err_.str(), HasSubstr("tok/s is below the floor of 1000"));
  EXPECT_THAT(err_.str(), HasSubstr("at concurrency 4 over "));
  EXPECT_THAT(err_.str(), HasSubstr("rolled back:"));
  EXPECT_EQ(ActiveState("svc-new.service"), "inactive");
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
  EXPECT_THAT(Get("/v1/models"), HasSubstr("\"svc-old\"")) << "the old service serves again";

  // A floor the server meets (about 100 tok/s against 50) ends the switch.
  std::string met = Manifest(true, paced +
                                       "    gates: {floor: {concurrency: 4, duration: 2s, "
                                       "output_tps: 50, max_tokens: 32}}\n");
  ASSERT_EQ(Apply(met), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("floor: svc-new.service passed: "));
  EXPECT_EQ(ActiveState("svc-new.service"), "active");
}

// Two fake vLLMs paced differently (all streams together at most 100 tok/s for the old one):
// a replacement 20% slower than the service it replaces (80 tok/s) is rolled back, its message
// giving both sides' figures; one faster (120 tok/s) is promoted. The reference is measured on
// the old server just before it stops, with the floor's load.
TEST_F(GatesE2eTest, ARelativeFloorRollsBackASlowerReplacementAndPromotesAFasterOne) {
  auto paced = [](int aggregate) {
    return "    env: {FAKE_VLLM_TOKENS_PER_SECOND: \"50\", "
           "FAKE_VLLM_MAX_AGGREGATE_TOKENS_PER_SECOND: \"" +
           std::to_string(aggregate) + "\"}\n";
  };
  const std::string floor =
      "    gates: {floor: {concurrency: 4, duration: 2s, max_tokens: 32, "
      "relative: {output_tps: 0.9}}}\n";
  const std::string old_pace = paced(100);
  ASSERT_EQ(Apply(Manifest(false, "", old_pace)), kExitOk) << out_.str() << err_.str();

  std::string slower = Manifest(true, paced(80) + floor, old_pace);
  ASSERT_EQ(Apply(slower), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("reference: svc-old.service measured: "));
  EXPECT_THAT(err_.str(), HasSubstr("the floor gate of svc-new.service failed: output "));
  EXPECT_THAT(err_.str(), HasSubstr("tok/s is below 0.9x of svc-old.service's "));
  EXPECT_THAT(err_.str(), HasSubstr("; reference svc-old.service: "));
  EXPECT_THAT(err_.str(), HasSubstr("rolled back:"));
  EXPECT_EQ(ActiveState("svc-new.service"), "inactive");
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
  EXPECT_THAT(Get("/v1/models"), HasSubstr("\"svc-old\"")) << "the old service serves again";

  std::string faster = Manifest(true, paced(120) + floor, old_pace);
  ASSERT_EQ(Apply(faster), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("floor: svc-new.service passed: "));
  EXPECT_THAT(out_.str(), HasSubstr("; reference svc-old.service: "));
  EXPECT_EQ(ActiveState("svc-new.service"), "active");
  EXPECT_EQ(ActiveState("svc-old.service"), "inactive");
  EXPECT_THAT(Get("/v1/models"), HasSubstr("\"svc-new\""));
}

TEST_F(GatesE2eTest, AFailingPreflightStopsTheApplyBeforeAnythingIsStopped) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  const std::string before = Invocation("svc-old.service");
  ASSERT_FALSE(before.empty());
  std::string m = Manifest(
      true,
      "    preflight:\n"
      "      command: [/bin/sh, -c, \"echo 'ValueError: architecture NewForCausalLM is not "
      "supported' >&2; exit 3\"]\n"
      "      timeout: 10s\n");
  ASSERT_EQ(Apply(m), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("the preflight of service/svc-new failed"));
  EXPECT_THAT(err_.str(), HasSubstr("exited with status 3"));
  EXPECT_THAT(err_.str(), HasSubstr("ValueError: architecture NewForCausalLM is not supported"));
  EXPECT_THAT(err_.str(), HasSubstr("nothing was stopped or started"));
  EXPECT_EQ(Invocation("svc-old.service"), before) << "svc-old was never stopped";
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
  EXPECT_FALSE(std::filesystem::exists(sandbox_->units_dir() + "/svc-new.service"))
      << "no unit is written before the preflight passes";
}

// A preflight's output is text berth did not write: its tail (the last 4 KiB) may begin inside a
// character, and its terminal controls must not reach the operator's terminal or break the
// journal berth writes.
TEST_F(GatesE2eTest, APreflightsOutputCutMidCharacterAndItsEscapesAreShownSafely) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  const std::string script = (tmp_ / "noisy.py").string();
  // 2000 three-byte characters and 11 more bytes: the 4096-byte tail begins inside one.
  std::ofstream(script) << "import sys\n"
                           "sys.stdout.buffer.write('\\u65e5'.encode() * 2000 + "
                           "b'\\x1b[2J\\r\\x9b31m!\\n')\n"
                           "sys.exit(3)\n";
  std::string m = Manifest(
      true, "    preflight: {command: [/usr/bin/python3, " + script + "], timeout: 10s}\n");
  ASSERT_EQ(Apply(m), kExitFailed) << out_.str() << err_.str();
  const std::string err = err_.str();
  EXPECT_THAT(err, HasSubstr("exited with status 3"));
  EXPECT_THAT(err, HasSubstr("\xe6\x97\xa5\\x1b[2J\\x0d\\x9b31m!"));
  EXPECT_TRUE(IsUtf8(err)) << "a character cut in two reached the terminal";
  EXPECT_EQ(err.find_first_of("\x1b\r"), std::string::npos);
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
  for (const char* name : {"state.json", "history.json", "journal.json"}) {
    const std::string path = (tmp_ / "state" / name).string();
    if (!std::filesystem::exists(path)) continue;
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(nlohmann::json::parse(text, nullptr, false).is_discarded()) << path;
  }
}

// kill -9 as each gate of a switch runs (its health gate, its smoke gate, its floor; through
// berth_faulty's fault seam): the next apply runs every gate of the switch again, with the reason
// that it resumes an interrupted switch, and only then calls it done.
TEST_F(GatesE2eTest, AKillDuringAnyGateOfASwitchMakesTheNextApplyRunEveryGate) {
  const std::string gated =
      Manifest(true,
               "    env: {FAKE_VLLM_TOKENS_PER_SECOND: \"50\", "
               "FAKE_VLLM_MAX_AGGREGATE_TOKENS_PER_SECOND: \"100\"}\n"
               "    gates:\n      smoke: {prompt: Say hello., max_tokens: 4, timeout: 10s}\n"
               "      floor: {concurrency: 4, duration: 2s, output_tps: 50, max_tokens: 32}\n");
  for (const char* gate : {"wait-healthy", "smoke", "floor"}) {
    SCOPED_TRACE(std::string("killed during ") + gate);
    ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
    int k = StepOf(gated, gate, "service/svc-new");
    ASSERT_GT(k, 0) << out_.str();
    pid_t pid =
        ApplyProcess(gated, {"BERTH_FAULT_KILL_AT_STEP=" + std::to_string(k)}, BERTH_FAULTY_BIN);
    int status = Wait(pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    EXPECT_EQ(JournalStatus(gate), "running") << "killed during the gate";
    ASSERT_EQ(ActiveState("svc-new.service"), "active");

    ASSERT_EQ(Plan(gated), kExitChanges) << out_.str() << err_.str();
    EXPECT_THAT(out_.str(), HasSubstr("wait-healthy  service/svc-new"));
    EXPECT_THAT(out_.str(), HasSubstr("smoke         service/svc-new"));
    EXPECT_THAT(out_.str(), HasSubstr("floor         service/svc-new"));
    EXPECT_THAT(out_.str(), HasSubstr("an interrupted apply started it but never saw"));
    ASSERT_EQ(Apply(gated), kExitOk) << out_.str() << err_.str();
    EXPECT_THAT(out_.str(), HasSubstr("smoke: svc-new.service answered in"));
    EXPECT_THAT(out_.str(), HasSubstr("floor: svc-new.service passed: "));
    EXPECT_EQ(ActiveState("svc-new.service"), "active");
    EXPECT_FALSE(std::filesystem::exists(tmp_ / "state" / "journal.json"));
    EXPECT_EQ(Plan(gated), kExitOk) << out_.str();
    EXPECT_THAT(out_.str(), Not(HasSubstr("stopped at step"))) << "the warning is not repeated";
  }
}

// The new version fails its smoke gate, and berth is killed -9 during that gate: the next apply
// still runs the gate, sees it fail and rolls the switch back (svc-old, which the killed apply
// stopped, serves again, from what its journal kept), then holds the change.
TEST_F(GatesE2eTest, ASmokeGateKilledMidwayStillCatchesAFailingVersionAndRollsItBack) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  std::string m =
      Manifest(true,
               "    env: {FAKE_VLLM_EMPTY_COMPLETIONS: \"1\"}\n"
               "    gates: {smoke: {prompt: Say hello., max_tokens: 4, timeout: 10s}}\n");
  int k = StepOf(m, "smoke", "service/svc-new");
  ASSERT_GT(k, 0) << out_.str();
  int status =
      Wait(ApplyProcess(m, {"BERTH_FAULT_KILL_AT_STEP=" + std::to_string(k)}, BERTH_FAULTY_BIN));
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  ASSERT_EQ(ActiveState("svc-old.service"), "inactive");

  ASSERT_EQ(Apply(m), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("the smoke gate of svc-new.service failed after"));
  EXPECT_THAT(err_.str(), HasSubstr("rolled back:"));
  EXPECT_THAT(err_.str(), HasSubstr("start svc-old.service again"));
  EXPECT_EQ(ActiveState("svc-new.service"), "inactive");
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
  EXPECT_THAT(Get("/v1/models"), HasSubstr("\"svc-old\"")) << "the old service serves again";
  const std::string old = Invocation("svc-old.service");
  EXPECT_EQ(Apply(m), kExitBlocked) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("not trying this change again"));
  EXPECT_EQ(Invocation("svc-old.service"), old) << "svc-old was not taken down again";
}

// A real kill -9 of berth itself (no fault seam) while its health gate waits for a slow start;
// berth ignores $BERTH_FAULT_KILL_AT_STEP: the variable kills only berth_faulty.
TEST_F(GatesE2eTest, BerthKilledWhileItsHealthGateWaitsIsFollowedByEveryGate) {
  ASSERT_EQ(Apply(Manifest(false)), kExitOk) << out_.str() << err_.str();
  std::string m =
      Manifest(true,
               "    env: {FAKE_VLLM_STARTUP_DELAY: \"5\"}\n"
               "    gates: {smoke: {prompt: Say hello., max_tokens: 4, timeout: 10s}}\n");
  pid_t pid = ApplyProcess(m, {"BERTH_FAULT_KILL_AT_STEP=1"}, BERTH_BIN);
  ASSERT_TRUE(WaitFor([&] { return JournalStatus("wait-healthy") == "running"; }))
      << ReadAll((tmp_ / "apply-processes.log").string());
  ::kill(pid, SIGKILL);
  int status = Wait(pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_EQ(JournalStatus("smoke"), "pending");

  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("smoke: svc-new.service answered in"));
  EXPECT_EQ(ActiveState("svc-new.service"), "active");

  // berth itself, with the variable set, carries a whole switch out.
  ASSERT_EQ(Wait(ApplyProcess(Manifest(false), {"BERTH_FAULT_KILL_AT_STEP=1"}, BERTH_BIN)), 0)
      << ReadAll((tmp_ / "apply-processes.log").string());
  EXPECT_EQ(ActiveState("svc-old.service"), "active");
}

}  // namespace
}  // namespace berth::testing
