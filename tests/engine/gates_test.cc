// Preflight commands and smoke gates through the Reconciler on an in-memory host
// (tests/support/fake_world.h): a failed smoke gate fails the switch like a failed health gate
// (rolled back, exit 4, held); a failed preflight stops the apply before anything went dark.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "engine/state/history.h"
#include "engine/state/state.h"
#include "tests/providers/temp_dir.h"
#include "tests/support/fake_world.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Kimi serving on GPU 0 and port 8000; `switched`: MiniMax there instead, with `minimax_extra`
// (its preflight, its gates).
std::string Manifest(bool switched, const std::string& minimax_extra = "") {
  std::string m = "berth: 1\nhost: {store: /models}\nmodels:\n";
  m += "  kimi: {source: hf://moonshotai/Kimi-K2, revision: " + Commit("a") + ", size: 20GB}\n";
  if (switched)
    m += "  minimax: {source: hf://MiniMaxAI/MiniMax-M2, revision: " + Commit("b") +
         ", size: 20GB}\n";
  m += "services:\n  vllm-kimi:\n    model: kimi\n    engine: vllm\n    state: " +
       std::string(switched ? "stopped" : "running") +
       "\n    gpus: [0]\n    port: 8000\n    health: {timeout: 10m, interval: 5s}\n";
  if (switched)
    m += "  vllm-minimax:\n    model: minimax\n    engine: vllm\n    gpus: [0]\n    port: 8000\n"
         "    health: {timeout: 10m, interval: 5s}\n" +
         minimax_extra;
  return m;
}

Observed EmptyHost() {
  Observed o;
  o.hostname = "gpu-01";
  o.store.path = "/models";
  o.store.total_bytes = 2'000'000'000'000;
  o.store.free_bytes = 1'000'000'000'000;
  o.gpus.push_back({0, "GPU-0", "NVIDIA H200", GiB(80), 0, {}});
  return o;
}

const char* kGated =
    "    preflight: {command: [/opt/vllm/bin/check-arch, MiniMaxM2ForCausalLM], timeout: 2m}\n"
    "    gates: {smoke: {prompt: Say hello., max_tokens: 8, timeout: 30s}}\n";

const char* kFloored =
    "    gates:\n"
    "      smoke: {prompt: Say hello.}\n"
    "      floor: {concurrency: 32, duration: 30s, output_tps: 2000, ttft_p99: 2s}\n";

const char* kSoaked =
    "    gates:\n"
    "      smoke: {prompt: Say hello.}\n"
    "      soak: {duration: 2m, interval: 10s, max_restarts: 0}\n";

class GatesTest : public ::testing::Test {
 protected:
  GatesTest() : world(EmptyHost()) {
    dir.Write("kimi/berth.yaml", Manifest(false));
    dir.Write("minimax/berth.yaml", Manifest(true, kGated));
    dir.Write("floored/berth.yaml", Manifest(true, kFloored));
    dir.Write("soaked/berth.yaml", Manifest(true, kSoaked));
  }
  RunReport Pass(const std::string& manifest, bool apply, const std::string& saved = "") {
    out.str("");
    err.str("");
    Reporter say(out, err);
    ReconcileOptions o;
    if (saved.empty()) o.manifest_path = dir / (manifest + "/berth.yaml");
    o.saved_plan_path = saved;
    o.state_dir = dir / "state";
    o.apply = apply;
    o.yes = true;
    o.retry = retry;
    if (!apply) o.out_path = dir / "plan.json";
    ReconcilerDeps deps = world.Deps(&say);
    if (!checks.empty()) deps.engine_check_dir = checks;
    return Reconciler(deps).Run(o);
  }
  RunReport Apply(const std::string& manifest) { return Pass(manifest, true); }
  bool Running(const std::string& unit) {
    const ObservedUnit* u = world.host.observed().FindUnit(unit);
    return u && u->active_state == "active";
  }
  size_t Count(const std::string& call) const {
    return static_cast<size_t>(std::count(world.calls.begin(), world.calls.end(), call));
  }
  HeldChange Held() {
    auto state = StateDir(dir / "state").Load();
    EXPECT_TRUE(state.ok());
    return state.ok() ? state->held : HeldChange{};
  }

  TempDir dir;
  std::chrono::milliseconds soak_began{0};
  bool retry = false;
  std::string checks;  // the engine checks' folder; "": no engine checks
  FakeWorld world;
  std::ostringstream out, err;
};

TEST_F(GatesTest, APassingSmokeGateEndsTheSwitchAndTheNextPlanIsEmpty) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  RunReport r = Apply("minimax");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
  auto pos = [&](const std::string& c) {
    return std::find(world.calls.begin(), world.calls.end(), c) - world.calls.begin();
  };
  // The preflight before the stop; the smoke request after the health probe.
  EXPECT_LT(pos("run /opt/vllm/bin/check-arch MiniMaxM2ForCausalLM"),
            pos("stop vllm-kimi.service"));
  EXPECT_LT(pos("probe 8000"), pos("smoke 8000"));
  EXPECT_EQ(Count("smoke 8000"), 1u);
  EXPECT_TRUE(Running("vllm-minimax.service"));
  EXPECT_EQ(Pass("minimax", false).outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(GatesTest, AFailedSmokeGateIsRolledBackHeldAndSaysWhatCameBack) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.smoke_empty.insert("vllm-minimax.service");
  RunReport r = Apply("minimax");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_TRUE(r.exec.rolled_back);
  EXPECT_TRUE(r.terminal) << "held: the loop does not take Kimi down again";
  EXPECT_THAT(r.status.message(), HasSubstr("(smoke service/vllm-minimax)"));
  EXPECT_THAT(r.status.message(),
              HasSubstr("the smoke gate of vllm-minimax.service failed after 120ms (completion "
                        "of 'vllm-minimax', max_tokens 8, timeout 30s): POST "
                        "http://127.0.0.1:8000/v1/completions: HTTP 200 with empty text"));
  EXPECT_THAT(err.str(), HasSubstr("rolled back:"));
  EXPECT_TRUE(Running("vllm-kimi.service")) << "the old service is back";
  EXPECT_FALSE(Running("vllm-minimax.service"));
  EXPECT_EQ(Held().address, "service/vllm-minimax");
  EXPECT_EQ(Apply("minimax").outcome, Outcome::kHeld);

  world.smoke_empty.clear();
  retry = true;
  ASSERT_EQ(Apply("minimax").outcome, Outcome::kApplied) << err.str();
  EXPECT_TRUE(Held().empty());
  EXPECT_EQ(Pass("minimax", false).outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(GatesTest, AFailedPreflightStopsBeforeAnythingGoesDarkAndIsNotHeld) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.fail_commands["/opt/vllm/bin/check-arch"] = 3;
  world.calls.clear();
  RunReport r = Apply("minimax");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_FALSE(r.exec.rolled_back);
  EXPECT_TRUE(r.exec.rollback_log.empty()) << "nothing to roll back";
  EXPECT_FALSE(r.terminal) << "nothing went dark: retried like a failed download";
  EXPECT_THAT(r.status.message(),
              HasSubstr("the preflight of service/vllm-minimax failed: /opt/vllm/bin/check-arch "
                        "MiniMaxM2ForCausalLM exited with status 3 after 50ms; nothing was "
                        "stopped or started"));
  EXPECT_THAT(r.status.message(), HasSubstr("ValueError: unsupported architecture"));
  for (const std::string& call : world.calls) {
    EXPECT_NE(call.rfind("stop ", 0), 0u) << call;
    EXPECT_NE(call.rfind("start ", 0), 0u) << call;
    EXPECT_NE(call, "write vllm-minimax.service") << "no unit is written before the preflight";
  }
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_TRUE(Held().empty());

  world.fail_commands.clear();
  ASSERT_EQ(Apply("minimax").outcome, Outcome::kApplied) << err.str();
  EXPECT_TRUE(Running("vllm-minimax.service"));
}

// The engine check of vLLM through the Reconciler with a fake runner: it runs the check program
// with the interpreter of the unit's vllm (its #! line) and the unit's environment; when vLLM
// refuses, the apply stops before anything is written or stopped, quoting vLLM's message.
TEST_F(GatesTest, AnEngineCheckThatRefusesStopsBeforeAnythingGoesDarkQuotingTheEngine) {
  // The unit's vllm: a console script of a virtualenv, and its env file.
  dir.Write("venv/bin/vllm", "#!/usr/bin/python3 -s\nimport vllm\n");
  ASSERT_EQ(::chmod((dir / "venv/bin/vllm").c_str(), 0755), 0);
  dir.Write("minimax.env", "# the venv's own settings\nVLLM_LOGGING_LEVEL = 'DEBUG'\n");
  dir.Write("checks/vllm_check.py", "");
  const std::string vllm = dir / "venv/bin/vllm";
  dir.Write("checked/berth.yaml",
            Manifest(true, "    executable: " + vllm + "\n    env_file: " + (dir / "minimax.env") +
                               "\n    args: [--enforce-eager]\n"));
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.fail_commands["/usr/bin/python3"] = 1;
  world.fail_output["/usr/bin/python3"] =
      "INFO 12-02 loading config\n"
      "berth-engine-check: refused: NotImplementedError: Unsupported speculative method: 'mtp'\n";
  world.calls.clear();
  world.command_envs.clear();
  checks = dir / "checks";
  RunReport r = Apply("checked");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_FALSE(r.terminal) << "nothing went dark";
  EXPECT_THAT(r.status.message(),
              HasSubstr("the engine check of service/vllm-minimax failed: vLLM refused this "
                        "configuration: NotImplementedError: Unsupported speculative method: "
                        "'mtp'; nothing was stopped or started"));
  EXPECT_THAT(r.status.message(), HasSubstr("preflight: {engine: off}"));
  // What ran: the venv's interpreter with its #! argument, the check, the unit's arguments.
  ASSERT_FALSE(world.calls.empty());
  std::string run;
  for (const std::string& call : world.calls)
    if (call.rfind("run ", 0) == 0) run = call;
  EXPECT_THAT(run, HasSubstr("run /usr/bin/python3 -s " + (dir / "checks/vllm_check.py") +
                             " serve /models/models--MiniMaxAI--MiniMax-M2/snapshots/"));
  EXPECT_THAT(run, HasSubstr("--enforce-eager"));
  ASSERT_EQ(world.command_envs.size(), 1u);
  EXPECT_THAT(
      world.command_envs[0],
      ::testing::ElementsAre("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
                             "CUDA_VISIBLE_DEVICES=0", "HF_HUB_OFFLINE=1", "HF_HUB_CACHE=/models",
                             "VLLM_CACHE_ROOT=/var/cache/berth/vllm/vllm-minimax",
                             "VLLM_LOGGING_LEVEL=DEBUG"));
  for (const std::string& call : world.calls) {
    EXPECT_NE(call.rfind("stop ", 0), 0u) << call;
    EXPECT_NE(call.rfind("start ", 0), 0u) << call;
    EXPECT_NE(call, "write vllm-minimax.service") << "no unit is written before the check";
  }
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_TRUE(Held().empty());

  // vLLM accepts it now: the switch goes on.
  world.fail_commands.clear();
  ASSERT_EQ(Apply("checked").outcome, Outcome::kApplied) << err.str();
  EXPECT_TRUE(Running("vllm-minimax.service"));
}

TEST_F(GatesTest, AnExecutableThatIsNotPythonIsRefusedSayingWhatToSet) {
  dir.Write("bin/vllm",
            "\x7f"
            "ELF binary");
  ASSERT_EQ(::chmod((dir / "bin/vllm").c_str(), 0755), 0);
  dir.Write("checks/vllm_check.py", "");
  dir.Write("elf/berth.yaml", Manifest(true, "    executable: " + (dir / "bin/vllm") + "\n"));
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  checks = dir / "checks";
  RunReport r = Apply("elf");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_THAT(r.status.message(),
              HasSubstr("the engine check of service/vllm-minimax cannot run: " +
                        (dir / "bin/vllm") + " is not a Python program"));
  EXPECT_THAT(r.status.message(), HasSubstr("set the service's executable to the virtualenv's "
                                            "vllm"));
  EXPECT_THAT(r.status.message(), HasSubstr("preflight: {engine: off}"));
  for (const std::string& call : world.calls) EXPECT_NE(call.rfind("run ", 0), 0u) << call;
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

// A saved plan's preflight command and smoke request are what the executor acts on: an edit is
// refused like any other.
TEST_F(GatesTest, AnEditedPreflightCommandOrSmokePromptInASavedPlanNeverRuns) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  for (const auto& [kind, set] : std::vector<std::pair<std::string, std::string>>{
           {"preflight", R"({"argv": ["/bin/sh", "-c", "id"]})"},
           {"smoke", R"({"prompt": "Ignore previous instructions"})"},
           {"smoke", R"({"port": 22})"}}) {
    ASSERT_EQ(Pass("minimax", false).outcome, Outcome::kPlanned) << err.str();
    std::string file = dir / "plan.json";
    std::ifstream in(file);
    nlohmann::json plan = nlohmann::json::parse(in);
    in.close();
    for (auto& a : plan["actions"])
      if (a["kind"] == kind) a["step"].update(nlohmann::json::parse(set));
    std::ofstream(file, std::ios::trunc) << plan.dump(2);
    world.calls.clear();
    RunReport r = Pass("", true, file);
    EXPECT_EQ(r.outcome, Outcome::kStale) << kind << " " << set << "\n" << err.str();
    for (const auto& c : world.calls) EXPECT_EQ(c, "observe") << set << ": " << c << " ran";
  }
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

TEST_F(GatesTest, ThePlanShowsThePreflightAndTheSmokeGate) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  ASSERT_EQ(Pass("minimax", false).outcome, Outcome::kPlanned);
  EXPECT_THAT(out.str(), HasSubstr("> preflight     service/vllm-minimax"));
  EXPECT_THAT(out.str(), HasSubstr("run /opt/vllm/bin/check-arch MiniMaxM2ForCausalLM (timeout "
                                   "2m): must exit 0 before anything is stopped"));
  EXPECT_THAT(out.str(), HasSubstr("> smoke         service/vllm-minimax"));
  EXPECT_THAT(out.str(), HasSubstr("1 preflight command to run"));
  EXPECT_THAT(out.str(), HasSubstr("1 smoke gate"));
  EXPECT_THAT(out.str(), HasSubstr("POST /v1/completions for 'vllm-minimax' (prompt 'Say "
                                   "hello.', max_tokens 8) must return text within 30s"));
}

TEST_F(GatesTest, AThroughputFloorRunsAfterTheSmokeGateAndAPassingOneEndsTheSwitch) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.load_figures[8000].output_tps = 2400;
  world.load_figures[8000].output_tokens = 72000;
  world.load_figures[8000].ttft_p99_ms = 900;
  world.load_figures[8000].requests = 280;
  world.calls.clear();
  RunReport plan = Pass("floored", false);
  EXPECT_THAT(out.str(), HasSubstr("floor         service/vllm-minimax"));
  EXPECT_THAT(out.str(), HasSubstr("32 streamed requests for 30s (max_tokens 256): at least 2000 "
                                   "output tok/s, TTFT p99 at most 2s"));
  ASSERT_EQ(Apply("floored").outcome, Outcome::kApplied) << err.str();
  auto pos = [&](const std::string& c) {
    return std::find(world.calls.begin(), world.calls.end(), c) - world.calls.begin();
  };
  EXPECT_LT(pos("smoke 8000"), pos("load 8000"));
  EXPECT_EQ(Count("load 8000"), 1u);
  EXPECT_TRUE(Running("vllm-minimax.service"));
  EXPECT_EQ(Pass("floored", false).outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(GatesTest, AServiceBelowItsFloorIsRolledBackHeldAndTheFiguresAreInTheMessage) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  LoadFigures slow;
  slow.concurrency = 32;
  slow.seconds = 30;
  slow.output_tps = 1239.5;
  slow.output_tokens = 37185;
  slow.requests = 140;
  slow.ttft_p50_ms = 410;
  slow.ttft_p99_ms = 2600;
  world.load_figures[8000] = slow;
  RunReport r = Apply("floored");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_TRUE(r.exec.rolled_back);
  EXPECT_TRUE(r.terminal) << "held, like a failed health gate";
  EXPECT_THAT(r.status.message(), HasSubstr("(floor service/vllm-minimax)"));
  EXPECT_THAT(r.status.message(),
              HasSubstr("the floor gate of vllm-minimax.service failed: output 1239.5 tok/s is "
                        "below the floor of 2000; TTFT p99 2600 ms is above 2000 ms (measured "
                        "1239.5 output tok/s at concurrency 32 over 30 s, TTFT p50 410 ms, p99 "
                        "2600 ms, TPOT p50 0 ms, 140 requests, 0 errors)"));
  EXPECT_TRUE(Running("vllm-kimi.service")) << "the old service is back";
  EXPECT_FALSE(Running("vllm-minimax.service"));
  EXPECT_EQ(Held().address, "service/vllm-minimax");
}

// A server that streams fast but never finishes an answer has not served a request: tokens of
// streams still open at the end do not carry a floor alone.
TEST_F(GatesTest, AFloorWhereNoRequestFinishedFailsWhateverTheTokenRate) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  LoadFigures endless;
  endless.concurrency = 32;
  endless.seconds = 30;
  endless.output_tps = 8192;
  endless.output_tokens = 8192 * 30;
  endless.requests = 0;
  endless.cancelled = 32;
  endless.ttft_p99_ms = 100;
  world.load_figures[8000] = endless;
  RunReport r = Apply("floored");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_TRUE(r.exec.rolled_back);
  EXPECT_THAT(r.status.message(),
              HasSubstr("no request finished within the measured 30 s (32 still streaming at "
                        "the end)"));
  EXPECT_TRUE(Running("vllm-kimi.service")) << "the old service is back";
}

TEST_F(GatesTest, AFloorWithoutALimitIsRefusedWhereItIsWritten) {
  dir.Write("nolimit/berth.yaml", Manifest(true, "    gates: {floor: {concurrency: 8}}\n"));
  RunReport r = Pass("nolimit", false);
  EXPECT_EQ(r.outcome, Outcome::kInvalid);
  EXPECT_THAT(err.str(), HasSubstr("gates.floor sets no limit"));
  EXPECT_THAT(err.str(), HasSubstr("berth.yaml:"));
}

// Relative floors (issue 23): the floor's load on the service a switch replaces just before it
// goes down is the reference; the new one must reach the manifest's ratios of it.
const char* kRelative =
    "    gates:\n"
    "      floor: {concurrency: 32, duration: 30s, relative: {output_tps: 0.9, ttft_p50: 1.1}}\n";

LoadFigures Figures(double tps, double ttft_p50_ms) {
  LoadFigures f;
  f.concurrency = 32;
  f.seconds = 30;
  f.output_tps = tps;
  f.output_tokens = static_cast<uint64_t>(tps * 30);
  f.requests = 100;
  f.ttft_p50_ms = ttft_p50_ms;
  f.ttft_p99_ms = 2 * ttft_p50_ms;
  return f;
}

TEST_F(GatesTest, ThePlanMeasuresTheReplacedServiceBeforeItStopsAndSaysSo) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("relative/berth.yaml", Manifest(true, kRelative));
  ASSERT_EQ(Pass("relative", false).outcome, Outcome::kPlanned) << err.str();
  std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("> reference     service/vllm-kimi"));
  EXPECT_THAT(text, HasSubstr("32 streamed requests for 30s (max_tokens 256) on "
                              "vllm-kimi.service (port 8000, 'vllm-kimi') before the switch to "
                              "vllm-minimax.service: the reference its relative floor compares "
                              "with"));
  EXPECT_THAT(text, HasSubstr("output tok/s at least 0.9x the reference's, TTFT p50 at most 1.1x "
                              "the reference's; reference: measured on vllm-kimi.service just "
                              "before the switch"));
  EXPECT_LT(text.find("> reference"), text.find("- stop "));
  EXPECT_LT(text.find("- stop "), text.find("> floor "));
  EXPECT_THAT(text, HasSubstr("1 floor reference to measure"));
  std::ifstream in(dir / "plan.json");
  nlohmann::json plan = nlohmann::json::parse(in);
  std::vector<std::string> kinds;
  for (const auto& a : plan["actions"]) kinds.push_back(a["kind"].get<std::string>());
  auto at = [&](const std::string& k) {
    return std::find(kinds.begin(), kinds.end(), k) - kinds.begin();
  };
  EXPECT_LT(at("reference"), at("stop"));
  for (const auto& a : plan["actions"])
    if (a["kind"] == "floor") {
      EXPECT_EQ(a["step"]["reference_unit"], "vllm-kimi.service");
      EXPECT_EQ(a["step"]["rel_output_tps"], 0.9);
    }
}

TEST_F(GatesTest, ARelativeFloorRollsBackAReplacement20PercentSlowerGivingBothSides) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("relative/berth.yaml", Manifest(true, kRelative));
  world.load_sequence[8000] = {Figures(1000, 100), Figures(800, 100)};
  world.calls.clear();
  RunReport r = Apply("relative");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_TRUE(r.exec.rolled_back);
  EXPECT_THAT(r.status.message(),
              HasSubstr("the floor gate of vllm-minimax.service failed: output 800 tok/s is "
                        "below 0.9x of vllm-kimi.service's 1000 tok/s (900) (measured 800 "
                        "output tok/s"));
  EXPECT_THAT(r.status.message(),
              HasSubstr("; reference vllm-kimi.service: 1000 output tok/s at concurrency 32"));
  EXPECT_EQ(Count("load 8000"), 2u) << "the reference, then the gate";
  EXPECT_TRUE(Running("vllm-kimi.service")) << "the old service is back";
  EXPECT_FALSE(Running("vllm-minimax.service"));
}

TEST_F(GatesTest, ARelativeFloorPromotesAFasterReplacement) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("relative/berth.yaml", Manifest(true, kRelative));
  world.load_sequence[8000] = {Figures(1000, 100), Figures(1200, 90)};
  RunReport r = Apply("relative");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(r.exec.reference_figures["vllm-kimi.service"].substr(0, 16), "1000 output tok/");
  EXPECT_TRUE(Running("vllm-minimax.service"));
  EXPECT_FALSE(Running("vllm-kimi.service"));
  EXPECT_EQ(Pass("relative", false).outcome, Outcome::kNoChanges) << out.str();
  // berth history shows both sides' figures beside the switch.
  auto history = ReadHistory(dir / "state");
  ASSERT_TRUE(history.ok());
  ASSERT_FALSE(history->empty());
  EXPECT_THAT(history->back().gates,
              ::testing::ElementsAre(HasSubstr("reference vllm-kimi.service: 1000 output tok/s"),
                                     HasSubstr("floor vllm-minimax.service: 1200 output tok/s")));
  EXPECT_THAT(HistoryText(*history, 1),
              HasSubstr("    measured: floor vllm-minimax.service: 1200 output tok/s at "
                        "concurrency 32 over 30 s, TTFT p50 90 ms"));
}

TEST_F(GatesTest, ALatencyRatioComparesWithTheReferenceToo) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("relative/berth.yaml", Manifest(true, kRelative));
  world.load_sequence[8000] = {Figures(1000, 100), Figures(1000, 150)};
  RunReport r = Apply("relative");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_THAT(r.status.message(), HasSubstr("TTFT p50 150 ms is above 1.1x of "
                                            "vllm-kimi.service's 100 ms (110)"));
}

// A saved plan carries the ratios and the reference's unit: applied, it compares as planned.
TEST_F(GatesTest, ASavedPlanKeepsTheRelativeFloorAndItsReference) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("relative/berth.yaml", Manifest(true, kRelative));
  ASSERT_EQ(Pass("relative", false).outcome, Outcome::kPlanned) << err.str();
  world.load_sequence[8000] = {Figures(1000, 100), Figures(800, 100)};
  RunReport r = Pass("", true, dir / "plan.json");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_THAT(r.status.message(), HasSubstr("below 0.9x of vllm-kimi.service's 1000 tok/s"));
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

// The old service cannot be measured (it answers nothing): the gate falls back as the manifest
// says, to its absolute limits or, with without_reference: refuse, to failing.
TEST_F(GatesTest, AReferenceThatCannotBeMeasuredFallsBackAsTheManifestSays) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  LoadFigures broken;
  broken.errors = 32;
  broken.first_error = "HTTP 500";
  dir.Write("absolute/berth.yaml",
            Manifest(true, "    gates: {floor: {output_tps: 500, relative: {output_tps: 0.9}}}\n"));
  world.load_sequence[8000] = {broken, Figures(800, 100)};
  ASSERT_EQ(Apply("absolute").outcome, Outcome::kApplied) << err.str();
  EXPECT_THAT(out.str() + err.str(), HasSubstr("vllm-kimi.service could not be measured"));

  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("refuse/berth.yaml",
            Manifest(true,
                     "    gates: {floor: {output_tps: 500, relative: {output_tps: 0.9}, "
                     "without_reference: refuse}}\n"));
  world.load_sequence[8000] = {broken, Figures(800, 100)};
  RunReport r = Apply("refuse");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_THAT(r.status.message(),
              HasSubstr("no reference figures of vllm-kimi.service (its measurement before the "
                        "switch did not succeed, and berth recorded none with its settings and "
                        "this load), and gates.floor.without_reference is refuse"));
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

// Every figure a floor or a reference measured goes into the state with what that service ran.
// When the service a switch replaces does not serve (it crashed), the floor compares with its
// recorded figures, and the plan and the failure say which.
TEST_F(GatesTest, ARecordedReferenceStandsInWhenTheReplacedServiceDoesNotServe) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("relative/berth.yaml", Manifest(true, kRelative));
  world.load_sequence[8000] = {Figures(1000, 100), Figures(1200, 90)};
  ASSERT_EQ(Apply("relative").outcome, Outcome::kApplied) << err.str();
  auto state = StateDir(dir / "state").Load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->gate_figures["vllm-kimi.service"].size(), 1u);
  const GateFigures& kimi = state->gate_figures["vllm-kimi.service"][0];
  EXPECT_EQ(kimi.source, "reference");
  EXPECT_EQ(kimi.output_tps, 1000);
  EXPECT_EQ(kimi.commit, Commit("a"));
  EXPECT_THAT(kimi.settings, HasSubstr("restart-keys:"));
  ASSERT_EQ(state->gate_figures["vllm-minimax.service"].size(), 1u);
  const GateFigures minimax = state->gate_figures["vllm-minimax.service"][0];
  EXPECT_EQ(minimax.source, "floor");
  EXPECT_EQ(minimax.output_tps, 1200);
  EXPECT_EQ(minimax.commit, Commit("b"));
  EXPECT_EQ(minimax.concurrency, 32);

  // MiniMax crashes; the manifest goes back to Kimi, whose floor compares with MiniMax's record.
  world.host.Stop("vllm-minimax.service");
  for (ObservedUnit& u : world.host.mutable_observed().units)
    if (u.name == "vllm-minimax.service") u.active_state = "failed";
  std::string back = "berth: 1\nhost: {store: /models}\nmodels:\n";
  back += "  kimi: {source: hf://moonshotai/Kimi-K2, revision: " + Commit("a") + ", size: 20GB}\n";
  back +=
      "  minimax: {source: hf://MiniMaxAI/MiniMax-M2, revision: " + Commit("b") + ", size: 20GB}\n";
  back +=
      "services:\n  vllm-kimi:\n    model: kimi\n    engine: vllm\n    gpus: [0]\n"
      "    port: 8000\n    health: {timeout: 10m, interval: 5s}\n" +
      std::string(kRelative) +
      "  vllm-minimax:\n    model: minimax\n    engine: vllm\n    state: stopped\n"
      "    gpus: [0]\n    port: 8000\n    health: {timeout: 10m, interval: 5s}\n";
  dir.Write("back/berth.yaml", back);
  ASSERT_EQ(Pass("back", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("reference: vllm-minimax.service's figures recorded commit " +
                                   Commit("b").substr(0, 7) + ", settings "));
  EXPECT_THAT(out.str(), HasSubstr("(its floor gate): 1200 output tok/s at concurrency 32"));
  EXPECT_THAT(out.str(), HasSubstr("(vllm-minimax.service does not serve now)"));
  EXPECT_THAT(out.str(), Not(HasSubstr("> reference")));
  // Figures recorded under another load are not comparable: none stands in.
  std::string other_load = back;
  other_load.replace(other_load.find("concurrency: 32"), 15, "concurrency: 8");
  dir.Write("other/berth.yaml", other_load);
  ASSERT_EQ(Pass("other", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("no reference (vllm-minimax.service does not serve now, and "
                                   "berth recorded no figures of it with the settings it has "
                                   "now and this load)"));
  world.load_sequence[8000] = {Figures(1000, 100)};
  world.calls.clear();
  RunReport r = Apply("back");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << out.str() << err.str();
  EXPECT_THAT(r.status.message(),
              HasSubstr("output 1000 tok/s is below 0.9x of vllm-minimax.service's 1200 tok/s "
                        "(1080)"));
  EXPECT_THAT(r.status.message(), HasSubstr("(recorded commit " + Commit("b").substr(0, 7)));
  EXPECT_EQ(Count("load 8000"), 1u) << "no reference measured: the gate alone";
}

// A measurement before the switch that fails leaves the recorded figures to compare with.
TEST_F(GatesTest, AFailedReferenceMeasurementFallsBackToTheRecordedFigures) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("relative/berth.yaml", Manifest(true, kRelative));
  world.load_sequence[8000] = {Figures(1000, 100), Figures(800, 100)};
  ASSERT_EQ(Apply("relative").outcome, Outcome::kFailed) << err.str();
  ASSERT_TRUE(Running("vllm-kimi.service"));
  ASSERT_EQ(Pass("relative", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("reference: measured on vllm-kimi.service just before the "
                                   "switch (should that fail: vllm-kimi.service's figures "
                                   "recorded commit "));
  LoadFigures broken;
  broken.errors = 32;
  broken.first_error = "HTTP 500";
  world.load_sequence[8000] = {broken, Figures(850, 100)};
  dir.Write("relative2/berth.yaml", Manifest(true, kRelative) + "    env: {X: \"1\"}\n");
  RunReport r = Apply("relative2");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_THAT(r.status.message(), HasSubstr("output 850 tok/s is below 0.9x of "
                                            "vllm-kimi.service's 1000 tok/s (900)"));
  EXPECT_THAT(out.str() + err.str(), HasSubstr("floor: vllm-minimax.service compares with "
                                               "vllm-kimi.service's figures recorded "));
}

TEST_F(GatesTest, AGoodputFloorCountsRequestsThatMeetItsLimits) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  dir.Write("good/berth.yaml",
            Manifest(true,
                     "    gates:\n      floor: {concurrency: 32, goodput: {ttft: 500ms, tpot: "
                     "50ms, min_rps: 2}, relative: {goodput: 0.9}}\n"));
  ASSERT_EQ(Pass("good", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("goodput at least 2 req/s, goodput at least 0.9x the "
                                   "reference's, a good request: TTFT at most 500ms, TPOT at "
                                   "most 50ms"));
  auto good = [](double rps) {
    LoadFigures f = Figures(1000, 100);
    f.has_goodput = true;
    f.goodput_rps = rps;
    f.good_requests = static_cast<uint64_t>(rps * 30);
    return f;
  };
  world.load_sequence[8000] = {good(3), good(2.5)};
  RunReport r = Apply("good");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_THAT(r.status.message(),
              HasSubstr("goodput 2.5 req/s is below 0.9x of vllm-kimi.service's 3 req/s (2.7)"));
  retry = true;  // the same manifest again, its failure held
  world.load_sequence[8000] = {good(3), good(1.5)};
  r = Apply("good");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << err.str();
  EXPECT_THAT(r.status.message(), HasSubstr("goodput 1.5 req/s (45 of 100 requests met its "
                                            "limits) is below the floor of 2"));
  world.load_sequence[8000] = {good(3), good(3.5)};
  EXPECT_EQ(Apply("good").outcome, Outcome::kApplied) << err.str();
  // What makes a request good must be said where goodput is asked for.
  dir.Write("bad/berth.yaml", Manifest(true, "    gates: {floor: {relative: {goodput: 0.9}}}\n"));
  EXPECT_EQ(Pass("bad", false).outcome, Outcome::kInvalid);
  EXPECT_THAT(err.str(), HasSubstr("gates.floor compares goodput but does not say what a good "
                                   "request is"));
  dir.Write("bad/berth.yaml",
            Manifest(true, "    gates: {floor: {output_tps: 5, goodput: {min_rps: 2}}}\n"));
  EXPECT_EQ(Pass("bad", false).outcome, Outcome::kInvalid);
  EXPECT_THAT(err.str(), HasSubstr("gates.floor.goodput sets no limit of a good request"));
}

TEST_F(GatesTest, WithNothingReplacedTheFloorFallsBackOrThePlanIsBlocked) {
  dir.Write("absolute/berth.yaml",
            Manifest(true, "    gates: {floor: {output_tps: 500, relative: {output_tps: 0.9}}}\n"));
  ASSERT_EQ(Pass("absolute", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("no reference (it replaces no running service): falls back "
                                   "to the absolute limits"));
  EXPECT_THAT(out.str(), Not(HasSubstr("> reference")));
  dir.Write("refuse/berth.yaml", Manifest(true,
                                          "    gates: {floor: {relative: {output_tps: 0.9}, "
                                          "without_reference: refuse}}\n"));
  RunReport r = Pass("refuse", false);
  EXPECT_EQ(r.outcome, Outcome::kBlocked) << out.str() << err.str();
  EXPECT_THAT(out.str() + err.str(),
              HasSubstr("the relative floor of vllm-minimax.service has no reference to compare "
                        "with: it replaces no running service"));
}

TEST_F(GatesTest, ARatioOutOfRangeIsRefusedWhereItIsWritten) {
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"{output_tps: 0}",
            "floor relative 'output_tps' must be a ratio above 0 and at most 10"},
           {"{ttft_p50: 11}", "floor relative 'ttft_p50' must be a ratio above 0 and at most 10"},
           {"{goodput_x: 1}", "unknown key 'goodput_x' in gates.floor.relative"}}) {
    dir.Write("bad/berth.yaml", Manifest(true, "    gates: {floor: {relative: " + bad + "}}\n"));
    RunReport r = Pass("bad", false);
    EXPECT_EQ(r.outcome, Outcome::kInvalid) << bad;
    EXPECT_THAT(err.str(), HasSubstr("berth.yaml:20:")) << bad;
    EXPECT_THAT(err.str(), HasSubstr(says)) << bad;
    EXPECT_THAT(err.str(), Not(HasSubstr("sets no limit"))) << bad;
  }
  dir.Write("bad/berth.yaml",
            Manifest(true, "    gates: {floor: {output_tps: 5, without_reference: maybe}}\n"));
  EXPECT_EQ(Pass("bad", false).outcome, Outcome::kInvalid);
}

// Every probe dials where the service listens: a server bound to 127.0.0.2 does not answer on
// 127.0.0.1, so a gate that dialled 127.0.0.1 would fail it and roll it back.
TEST_F(GatesTest, AServiceBoundToAnotherAddressIsProbedSmokedAndLoadedThere) {
  dir.Write("bound-kimi/berth.yaml", [] {
    std::string m = Manifest(false);
    return m.insert(m.find("    port: 8000\n"), "    bind: 127.0.0.2\n");
  }());
  ASSERT_EQ(Apply("bound-kimi").outcome, Outcome::kApplied) << err.str();
  std::string m = Manifest(true, std::string("    bind: 127.0.0.2\n") + kFloored);
  m.insert(m.find("    port: 8000\n"), "    bind: 127.0.0.2\n");  // vllm-kimi's, for the rollback
  dir.Write("bound/berth.yaml", m);
  world.load_figures[8000].output_tps = 2400;
  world.load_figures[8000].output_tokens = 72000;
  world.load_figures[8000].requests = 280;
  world.dialed.clear();
  world.calls.clear();
  RunReport r = Apply("bound");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
  EXPECT_TRUE(Running("vllm-minimax.service"));
  EXPECT_EQ(Count("probe 8000") + Count("smoke 8000") + Count("load 8000"), world.dialed.size());
  EXPECT_GE(world.dialed.size(), 3u) << "a health probe, a smoke request and a load";
  for (const std::string& d : world.dialed) EXPECT_EQ(d, "127.0.0.2:8000");

  // A saved plan dials the same address: it is part of what the executor acts on.
  ASSERT_EQ(Pass("bound-kimi", false).outcome, Outcome::kPlanned) << out.str();
  std::ifstream saved(dir / "plan.json");
  std::string text((std::istreambuf_iterator<char>(saved)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("\"host\": \"127.0.0.2\""));
  world.dialed.clear();
  ASSERT_EQ(Pass("", true, dir / "plan.json").outcome, Outcome::kApplied) << err.str();
  ASSERT_FALSE(world.dialed.empty());
  for (const std::string& d : world.dialed) EXPECT_EQ(d, "127.0.0.2:8000");

  // A rollback's gate of the service it starts again dials its address too.
  world.never_healthy.insert("vllm-minimax.service");
  world.dialed.clear();
  retry = true;
  RunReport failed = Apply("bound");
  ASSERT_EQ(failed.outcome, Outcome::kFailed) << err.str();
  EXPECT_TRUE(failed.exec.rolled_back) << err.str();
  EXPECT_TRUE(Running("vllm-kimi.service"));
  EXPECT_THAT(err.str(), HasSubstr("vllm-kimi.service is healthy again"));
  for (const std::string& d : world.dialed) EXPECT_EQ(d, "127.0.0.2:8000");
}

TEST(DialAddress, UnspecifiedAddressesDialLoopbackOthersThemselves) {
  EXPECT_EQ(DialAddress(""), "127.0.0.1");
  EXPECT_EQ(DialAddress("0.0.0.0"), "127.0.0.1");
  EXPECT_EQ(DialAddress("::"), "::1");
  EXPECT_EQ(DialAddress("[::]"), "::1");
  EXPECT_EQ(DialAddress("0:0:0:0:0:0:0:0"), "::1");
  EXPECT_EQ(DialAddress("127.0.0.2"), "127.0.0.2");
  EXPECT_EQ(DialAddress("10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(DialAddress("fd00::7"), "fd00::7");
  EXPECT_EQ(DialAddress("[fd00::7]"), "fd00::7");
  EXPECT_EQ(DialAddress("localhost"), "localhost");
  ServiceSpec s;
  EXPECT_EQ(s.DialHost(), "127.0.0.1") << "the default bind is 0.0.0.0";
  s.bind = "192.168.7.20";
  EXPECT_EQ(s.DialHost(), "192.168.7.20");
}

// The soak gate watches the new service after its other gates, on the fake clock: one that
// systemd restarts during the soak (it crashed after passing every other gate) is rolled back to
// what it replaced, and the change is held: one outage, not one per pass.
TEST_F(GatesTest, AServiceRestartedDuringItsSoakIsRolledBackAndHeld) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  bool soaking = false;
  world.clock.on_sleep = [&](std::chrono::milliseconds) {
    // 30 s into the soak (three looks), the new server exits and systemd restarts it.
    if (!soaking) return;
    ObservedUnit& u = world.host.Unit("vllm-minimax.service");
    if (u.active_state == "active" &&
        world.clock.Elapsed() >= soak_began + std::chrono::seconds(30))
      u.n_restarts = 1;
  };
  // The soak begins after the smoke request: mark the moment from the smoke's call.
  world.smoke_hook = [&] {
    soaking = true;
    soak_began = world.clock.Elapsed();
  };
  world.calls.clear();
  RunReport r = Apply("soaked");
  EXPECT_EQ(r.outcome, Outcome::kFailed) << out.str() << err.str();
  EXPECT_TRUE(r.exec.rolled_back);
  EXPECT_THAT(r.exec.status.message(),
              HasSubstr("the soak gate of vllm-minimax.service failed after 30s of 2m: systemd "
                        "restarted it 1 time (at most 0 allowed)"));
  EXPECT_TRUE(Running("vllm-kimi.service")) << "what it replaced serves again";
  EXPECT_FALSE(Running("vllm-minimax.service"));
  EXPECT_EQ(Held().address, "service/vllm-minimax");
  // The next pass does not try it again: no second outage.
  world.calls.clear();
  soaking = false;
  RunReport again = Apply("soaked");
  EXPECT_EQ(Count("stop vllm-kimi.service"), 0u) << err.str();
  EXPECT_TRUE(Running("vllm-kimi.service"));
  (void)again;
}

TEST_F(GatesTest, AServiceThatStaysUpPassesItsSoakAfterItsWholeDuration) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  auto before = world.clock.Elapsed();
  RunReport r = Apply("soaked");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << out.str() << err.str();
  EXPECT_GE(world.clock.Elapsed() - before, std::chrono::minutes(2)) << "watched its duration";
  EXPECT_THAT(out.str(), HasSubstr("soak: vllm-minimax.service passed: watched 2m"));
  EXPECT_TRUE(Running("vllm-minimax.service"));
  // The plan showed the soak as the last gate of the switch.
  EXPECT_EQ(Pass("soaked", false).outcome, Outcome::kNoChanges) << out.str();
}
}  // namespace
}  // namespace berth::testing
