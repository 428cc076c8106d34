// berth tune end to end (issue 40, point 4): the seed example's MiniMax-M2.5 service on an
// 8-GPU host (the fake NVML) in the sandboxed systemd, served by the fake vLLM with a
// deterministic speed per configuration (FAKE_VLLM_SPEED_MODEL: tp4 200 tok/s, tp8 400, tp8 with
// expert parallelism 800, anything else 40). Each sweep switches the service to each candidate
// through its gates, measures it with berth bench's load and ends on the declared configuration.
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kGiB = 1ull << 30;
const std::string kService = "vllm-minimax-m25";
const std::string kUnit = kService + ".service";
const std::string kCommit(40, 'c'), kNextCommit(40, 'd');
// The measured speeds: tokens/s of all streams together, per configuration.
const std::string kSpeeds = "tp=4:200;tp=8:400;tp=8,ep:800;default:40";
// berth bench's load, small: 16 requests of 16 tokens on 4 streams (0.3 to 1.3 s a candidate).
const std::string kLoad =
    "load: {concurrency: 4, num_prompts: 16, max_tokens: 16, prompt_tokens: 8}\n";
const std::string kTp8 = "{gpus: [0, 1, 2, 3, 4, 5, 6, 7], vllm.tensor_parallel_size: 8}";
const std::string kTp8Ep =
    "{gpus: [0, 1, 2, 3, 4, 5, 6, 7], vllm.tensor_parallel_size: 8, "
    "vllm.enable_expert_parallel: true}";

class TuneE2eTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = (tmp_ / "store").string();
    state_ = (tmp_ / "state").string();
    // MiniMax-M2.5 as vLLM sees it: its architecture, and model_type minimax_m2 (no MTP layers).
    std::string snap = MakeModel(store_, "MiniMaxAI/MiniMax-M2.5", kCommit);
    nlohmann::json config = nlohmann::json::parse(ReadAll(snap + "/config.json"));
    config["architectures"] = {"MiniMaxM2ForCausalLM"};
    config["model_type"] = "minimax_m2";
    std::ofstream(snap + "/config.json") << config.dump(2) << "\n";
    // A newer checkpoint whose architecture this vLLM's registry does not have.
    snap = MakeModel(store_, "MiniMaxAI/MiniMax-Next", kNextCommit);
    config["architectures"] = {"MiniMaxM3ForCausalLM"};
    std::ofstream(snap + "/config.json") << config.dump(2) << "\n";
    // The fake vllm package on the unit's PYTHONPATH, for berth's engine check of each start.
    env_file_ = (tmp_ / "engine.env").string();
    std::ofstream(env_file_) << "PYTHONPATH=" << SourceDir() << "/tests/fake_vllm/pkg\n";
    // Eight 96 GiB GPUs, nothing on them.
    nvml_ = (tmp_ / "nvml.conf").string();
    std::ofstream nvml(nvml_);
    for (int i = 0; i < 8; ++i)
      nvml << "device " << i << " GPU-tune-" << i << " " << 96 * kGiB << " 0 0 NVIDIA B200\n";
    nvml.close();
    ::setenv("FAKE_NVML_CONFIG", nvml_.c_str(), 1);
    port_ = FreePort();
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_CONFIG");
    SandboxSuite::TearDown();
  }

  // The seed example's service (manifests/examples/blackwell-8x/berth.yaml) declared on GPUs 0-3
  // at tensor parallel 4, on the fake vLLM; `extra`: more of its keys (indented).
  std::string Manifest(const std::string& extra = "") {
    std::ostringstream m;
    m << "# The seed scenario's MiniMax-M2.5, on four of the eight GPUs.\n"
      << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "models:\n  minimax-m25:\n    source: hf://MiniMaxAI/MiniMax-M2.5\n    revision: "
      << kCommit
      << "\n  minimax-next: {source: hf://MiniMaxAI/MiniMax-Next, revision: " << kNextCommit
      << "}\nservices:\n  " << kService << ":\n"
      << "    model: minimax-m25\n    engine: vllm\n    gpus: [0, 1, 2, 3]\n    port: " << port_
      << "\n    bind: 127.0.0.1\n"
      << "    # What MiniMax's vLLM guide runs, on four GPUs.\n"
      << "    vllm: {tensor_parallel_size: 4, gpu_memory_utilization: 0.90,\n"
      << "           served_model_name: MiniMax-M2.5, trust_remote_code: true,\n"
      << "           tool_call_parser: minimax_m2, reasoning_parser: minimax_m2_append_think}\n"
      << "    env: {FAKE_VLLM_SPEED_MODEL: \"" << kSpeeds << "\"}\n"
      << "    env_file: " << env_file_ << "\n"
      << "    health: {path: /health, timeout: 30s, interval: 100ms}\n"
      << extra;
    std::string path = (tmp_ / "berth.yaml").string();
    std::ofstream(path) << m.str();
    return path;
  }
  // A tune file of the service: `body` after its first two lines, then the load.
  std::string TuneFile(const std::string& body, const std::string& load = kLoad) {
    std::string path = (tmp_ / "tune.yaml").string();
    std::ofstream(path) << "berth_tune: 1\nservice: " << kService << "\n" << body << load;
    return path;
  }
  HostAccess Access() {
    HostAccess a;
    a.bus_address = sandbox_->system_bus_address();
    a.journal_dir = sandbox_->journal_dir();
    a.nvml_library = FAKE_NVML_FULL;
    return a;
  }
  int Apply(const std::string& manifest) { return ApplyIn(manifest, out_, err_, FAKE_NVML_FULL); }
  int Plan(const std::string& manifest) {
    PlanCommand cmd;
    cmd.manifest_path = manifest;
    cmd.host = Access();
    cmd.state_dir = state_;
    cmd.detailed_exitcode = true;
    out_.str("");
    err_.str("");
    return RunPlan(cmd, out_, err_);
  }
  // `berth tune -f MANIFEST TUNEFILE` in this process; `plan`: --plan.
  int Tune(const std::string& manifest, const std::string& tune_file, bool plan = false,
           bool resume = false) {
    TuneCommand cmd;
    cmd.manifest_path = manifest;
    cmd.tune_file = tune_file;
    cmd.plan_only = plan;
    cmd.resume = resume;
    cmd.host = Access();
    cmd.state_dir = state_;
    out_.str("");
    err_.str("");
    return RunTuneCommand(cmd, out_, err_);
  }
  std::string Results(const std::string& name) {
    return ReadAll(state_ + "/tune/" + kService + "/" + name);
  }
  nlohmann::json Report() { return nlohmann::json::parse(Results("report.json"), nullptr, false); }
  // The outcome of candidate `name` in report.json (null: none).
  nlohmann::json Outcome(const nlohmann::json& report, const std::string& name) {
    if (report.contains("outcomes"))
      for (const auto& o : report["outcomes"])
        if (o["candidate"].value("name", "") == name) return o;
    return nlohmann::json();
  }
  double Tps(const nlohmann::json& outcome) {
    return outcome.contains("figures") && outcome["figures"].is_object()
               ? outcome["figures"].value("output_tokens_per_second", -1.0)
               : -1.0;
  }
  // What the server on the port says of itself: the speed rule its command line matched.
  std::string SpeedRule() {
    CommandResult r =
        RunCommand({"/usr/bin/python3", "-c",
                    "import json, urllib.request; print(json.load(urllib.request.urlopen("
                    "'http://127.0.0.1:" +
                        std::to_string(port_) + "/_fake/pacing', timeout=5))['speed_rule'])"});
    return r.ok() ? r.output.substr(0, r.output.find('\n')) : "ERROR: " + r.output + r.error;
  }
  std::string Unit() { return ReadAll(sandbox_->units_dir() + "/" + kUnit); }
  // The unit's InvocationID and MainPID: both change when it is stopped or restarted.
  std::string Invocation() {
    auto p = systemd_->GetUnits({kUnit});
    return p.ok() && !p->empty()
               ? (*p)[0].invocation_id + " pid " + std::to_string((*p)[0].main_pid)
               : "";
  }
  // `berth tune -f MANIFEST TUNEFILE` (`berth` is BERTH_BIN or BERTH_FAULTY_BIN) as a process of
  // its own, on this test's state and GPUs, `env` added to its environment; its output goes to
  // ProcessLog().
  pid_t TuneProcess(const char* berth, const std::string& manifest, const std::string& tune_file,
                    const std::vector<std::string>& env) {
    std::vector<std::string> args = {berth,
                                     "tune",
                                     tune_file,
                                     "-f",
                                     manifest,
                                     "--bus",
                                     sandbox_->system_bus_address(),
                                     "--journal-dir",
                                     sandbox_->journal_dir(),
                                     "--state-dir",
                                     state_,
                                     "--nvml-library",
                                     FAKE_NVML_FULL};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string log = ProcessLog();
    pid_t pid = ::fork();
    if (pid == 0) {
      for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(berth, argv.data());
      ::_exit(127);
    }
    return pid;
  }
  // The manifest with the service at tensor parallel 8 on all eight GPUs (tp8's settings), in a
  // file of its own.
  std::string Tp8Manifest() {
    std::string text = ReadAll(Manifest());
    auto set = [&](const std::string& from, const std::string& to) {
      text.replace(text.find(from), from.size(), to);
    };
    set("gpus: [0, 1, 2, 3]", "gpus: [0, 1, 2, 3, 4, 5, 6, 7]");
    set("tensor_parallel_size: 4", "tensor_parallel_size: 8");
    std::string path = (tmp_ / "tp8.yaml").string();
    std::ofstream(path) << text;
    return path;
  }
  // The host runs the declared configuration: tp 4 on GPUs 0-3, and nothing is left to do.
  void ExpectDeclared() {
    EXPECT_EQ(ActiveState(kUnit), "active");
    EXPECT_THAT(Unit(), HasSubstr("\"--tensor-parallel-size\" \"4\""));
    EXPECT_THAT(Unit(), Not(HasSubstr("--enable-expert-parallel")));
    EXPECT_THAT(Unit(), HasSubstr("CUDA_VISIBLE_DEVICES=0,1,2,3"));
    EXPECT_EQ(SpeedRule(), "tp=4") << "the server running is the declared one";
    EXPECT_EQ(Plan(Manifest()), kExitOk) << out_.str() << err_.str();
  }

  std::string store_, state_, env_file_, nvml_;
  int port_ = 0;
  std::ostringstream out_, err_;
};

// The seed example's configurations: declared tp4 on GPUs 0-3, then tp8, then tp8 with expert
// parallelism. The fastest (tp8-ep) wins; the host ends on the declared tp4; the manifest, kept
// in git, takes the winner's patch with `git apply`.
TEST_F(TuneE2eTest, ASweepOfTheSeedConfigurationsPicksTp8WithExpertParallelAndGoesBack) {
  CommandResult git = RunCommand({"/usr/bin/git", "init", "-q", tmp_.string()});
  ASSERT_TRUE(git.ok()) << git.output << git.error;
  const std::string manifest = Manifest();
  ASSERT_EQ(Apply(manifest), kExitOk) << out_.str() << err_.str();
  const std::string declared_text = ReadAll(manifest);
  std::string tune = TuneFile("candidates:\n  - {name: tp8, set: " + kTp8 +
                              "}\n  - {name: tp8-ep, set: " + kTp8Ep + "}\n");
  ASSERT_EQ(Tune(manifest, tune), kExitOk) << out_.str() << err_.str();

  nlohmann::json report = Report();
  ASSERT_TRUE(report.is_object()) << Results("report.json");
  double declared = Tps(Outcome(report, "declared")), tp8 = Tps(Outcome(report, "tp8")),
         tp8_ep = Tps(Outcome(report, "tp8-ep"));
  EXPECT_EQ(Outcome(report, "declared").value("verdict", ""), "measured");
  EXPECT_EQ(Outcome(report, "tp8").value("verdict", ""), "measured");
  EXPECT_EQ(Outcome(report, "tp8-ep").value("verdict", ""), "measured");
  // The speed model's order, with room for a busy machine: 200 < 400 < 800 tok/s.
  EXPECT_GT(declared, 100);
  EXPECT_GT(tp8, declared * 1.4) << "tp8 " << tp8 << " against declared " << declared;
  EXPECT_GT(tp8_ep, tp8 * 1.4) << "tp8-ep " << tp8_ep << " against tp8 " << tp8;
  EXPECT_EQ(report.value("winner", -1), 2);
  EXPECT_EQ(report.value("ended_on", ""), "declared");
  EXPECT_EQ(ReadAll(manifest), declared_text) << "the manifest on disk is not touched";

  // The winner as the smallest change of the manifest: two values replaced where they are
  // written, one key added to the flow map; comments and the rest as they were.
  EXPECT_EQ(Results("winner.patch"),
            "--- a/berth.yaml\n"
            "+++ b/berth.yaml\n"
            "@@ -13,13 +13,13 @@\n"
            "   vllm-minimax-m25:\n"
            "     model: minimax-m25\n"
            "     engine: vllm\n"
            "-    gpus: [0, 1, 2, 3]\n"
            "+    gpus: [0, 1, 2, 3, 4, 5, 6, 7]\n"
            "     port: " +
                std::to_string(port_) +
                "\n"
                "     bind: 127.0.0.1\n"
                "     # What MiniMax's vLLM guide runs, on four GPUs.\n"
                "-    vllm: {tensor_parallel_size: 4, gpu_memory_utilization: 0.90,\n"
                "+    vllm: {tensor_parallel_size: 8, gpu_memory_utilization: 0.90,\n"
                "            served_model_name: MiniMax-M2.5, trust_remote_code: true,\n"
                "-           tool_call_parser: minimax_m2, reasoning_parser: "
                "minimax_m2_append_think}\n"
                "+           tool_call_parser: minimax_m2, reasoning_parser: "
                "minimax_m2_append_think, enable_expert_parallel: true}\n"
                "     env: {FAKE_VLLM_SPEED_MODEL: \"" +
                kSpeeds +
                "\"}\n"
                "     env_file: " +
                env_file_ +
                "\n"
                "     health: {path: /health, timeout: 30s, interval: 100ms}\n");
  const std::string text = Results("report.txt");
  EXPECT_THAT(text, HasSubstr("best: tp8-ep, "));
  EXPECT_THAT(text, HasSubstr("the host runs the declared configuration"));
  for (const char* name : {"declared", "tp8", "tp8-ep"}) {
    EXPECT_THAT(text, HasSubstr(std::string("\n") + name + " ")) << text;
    EXPECT_THAT(Results("plot.svg"), HasSubstr(std::string("<title>") + name + ": "));
  }
  ExpectDeclared();

  // The patch as committed: `git apply` in the manifest's repository.
  git = RunCommand({"/usr/bin/git", "-C", tmp_.string(), "apply",
                    state_ + "/tune/" + kService + "/winner.patch"});
  ASSERT_TRUE(git.ok()) << git.output << git.error;
  std::string winner = declared_text;
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"gpus: [0, 1, 2, 3]", "gpus: [0, 1, 2, 3, 4, 5, 6, 7]"},
           {"tensor_parallel_size: 4", "tensor_parallel_size: 8"},
           {"minimax_m2_append_think}", "minimax_m2_append_think, enable_expert_parallel: true}"}})
    winner.replace(winner.find(from), from.size(), to);
  EXPECT_EQ(ReadAll(manifest), winner);
}

// MiniMax-M2.5 (model_type minimax_m2) has no MTP layers: a candidate with speculative mtp is
// refused by the plan (berth reads the model type in the store) in vLLM's words. A candidate
// serving a checkpoint of an architecture this vLLM lacks is refused by the engine check (vLLM's
// own engine config, run before anything stops: only the engine knows its architectures). Both are
// listed as infeasible by --plan and by the sweep, and skipped: the server the sweep found is the
// one still running after it.
TEST_F(TuneE2eTest, CandidatesTheModelOrVllmRefuseAreInfeasibleAndNothingStopsForThem) {
  const std::string manifest = Manifest();
  ASSERT_EQ(Apply(manifest), kExitOk) << out_.str() << err_.str();
  const std::string before = Invocation();
  ASSERT_FALSE(before.empty());
  std::string tune = TuneFile(
      "candidates:\n"
      "  - {name: mtp, set: {vllm.speculative: {method: mtp, num_speculative_tokens: 1}}}\n"
      "  - {name: next, set: {model: minimax-next}}\n");

  ASSERT_EQ(Tune(manifest, tune, /*plan=*/true), kExitOk) << out_.str() << err_.str();
  const std::string plan = out_.str();
  EXPECT_THAT(plan, HasSubstr("infeasible (refused before anything stops):"));
  EXPECT_THAT(plan, HasSubstr("\n  mtp: "));
  EXPECT_THAT(plan, HasSubstr("Unsupported speculative method: 'mtp'"));
  EXPECT_THAT(plan, HasSubstr("\n  next: "));
  EXPECT_THAT(plan, HasSubstr("Model architectures ['MiniMaxM3ForCausalLM'] are not supported"));
  EXPECT_THAT(plan, HasSubstr("1 of 3 feasible"));
  // And as the sweep finds them, before any switch.
  EXPECT_THAT(plan, HasSubstr("berth tune: mtp: infeasible: "));
  EXPECT_THAT(plan, HasSubstr("berth tune: next: infeasible: "));
  EXPECT_FALSE(std::filesystem::exists(state_ + "/tune")) << "--plan measures nothing";
  EXPECT_EQ(Invocation(), before);

  ASSERT_EQ(Tune(manifest, tune), kExitOk) << out_.str() << err_.str();
  nlohmann::json report = Report();
  nlohmann::json mtp = Outcome(report, "mtp"), next = Outcome(report, "next");
  EXPECT_EQ(mtp.value("verdict", ""), "infeasible") << mtp.dump(2);
  EXPECT_THAT(mtp.value("why", ""), HasSubstr("Unsupported speculative method: 'mtp'"));
  EXPECT_THAT(mtp.value("why", ""), HasSubstr("minimax_m2"));
  EXPECT_EQ(next.value("verdict", ""), "infeasible") << next.dump(2);
  EXPECT_THAT(next.value("why", ""),
              HasSubstr("Model architectures ['MiniMaxM3ForCausalLM'] are not supported"));
  EXPECT_EQ(Outcome(report, "declared").value("verdict", ""), "measured");
  EXPECT_EQ(report.value("winner", -1), 0) << "the declared configuration is the best left";
  EXPECT_FALSE(std::filesystem::exists(state_ + "/tune/" + kService + "/winner.patch"));
  EXPECT_EQ(Invocation(), before) << "the server was never stopped or restarted";
  const std::string passes = Results("passes.log");
  EXPECT_THAT(passes, Not(HasSubstr("] restart "))) << passes;
  EXPECT_THAT(passes, Not(HasSubstr("] write-unit "))) << passes;
  ExpectDeclared();
}

// A candidate whose server dies at its start fails its switch, which is rolled back; the sweep
// records the failure in the health gate's words and goes on to the next candidate.
TEST_F(TuneE2eTest, ACandidateThatCannotStartIsRolledBackAndTheSweepGoesOn) {
  const std::string manifest = Manifest();
  ASSERT_EQ(Apply(manifest), kExitOk) << out_.str() << err_.str();
  std::string tune = TuneFile(
      "candidates:\n"
      "  - {name: crash, set: {vllm.tensor_parallel_size: 8, gpus: [0, 1, 2, 3, 4, 5, 6, 7], "
      "env.FAKE_VLLM_EXIT_AFTER: \"0\"}}\n"
      "  - {name: tp8-ep, set: " +
      kTp8Ep + "}\n");
  ASSERT_EQ(Tune(manifest, tune), kExitOk) << out_.str() << err_.str();
  nlohmann::json report = Report();
  nlohmann::json crash = Outcome(report, "crash");
  EXPECT_EQ(crash.value("verdict", ""), "failed") << crash.dump(2);
  const std::string why = crash.value("why", "");
  EXPECT_THAT(why.substr(0, why.find('\n')),
              HasSubstr(kUnit + " exited (Result=exit-code, exit status 1) and systemd is "
                                "restarting it instead of it becoming healthy (rolled back: "
                                "the previous configuration runs)"));
  EXPECT_THAT(why, HasSubstr("FAKE_VLLM_EXIT_AFTER=0: exiting with status 1"))
      << "the server's last words, from its journal";
  EXPECT_EQ(Outcome(report, "tp8-ep").value("verdict", ""), "measured");
  EXPECT_GT(Tps(Outcome(report, "tp8-ep")), 400);
  EXPECT_EQ(report.value("winner", -1), 2);
  EXPECT_THAT(Results("report.txt"), HasSubstr("crash"));
  ExpectDeclared();
}

// The service's throughput floor gates every candidate's switch: one too slow for it (tp2 on
// two GPUs: 40 tok/s against a floor of 100) fails in the floor's words and is rolled back.
TEST_F(TuneE2eTest, ACandidateBelowTheServicesFloorFailsWithTheFloorsFigures) {
  const std::string floor =
      "    gates: {floor: {concurrency: 4, duration: 1s, output_tps: 100, max_tokens: 16}}\n";
  const std::string manifest = Manifest(floor);
  ASSERT_EQ(Apply(manifest), kExitOk) << out_.str() << err_.str();
  std::string tune = TuneFile(
      "candidates:\n  - {name: tp2, set: {gpus: [0, 1], vllm.tensor_parallel_size: 2}}\n"
      "  - {name: tp8-ep, set: " +
      kTp8Ep + "}\n");
  ASSERT_EQ(Tune(manifest, tune), kExitOk) << out_.str() << err_.str();
  nlohmann::json report = Report();
  nlohmann::json slow = Outcome(report, "tp2");
  EXPECT_EQ(slow.value("verdict", ""), "failed") << slow.dump(2);
  EXPECT_THAT(slow.value("why", ""), HasSubstr("the floor gate of " + kUnit + " failed: output "));
  EXPECT_THAT(slow.value("why", ""), HasSubstr("tok/s is below the floor of 100"));
  EXPECT_THAT(slow.value("why", ""), HasSubstr("rolled back"));
  nlohmann::json fast = Outcome(report, "tp8-ep");
  EXPECT_EQ(fast.value("verdict", ""), "measured") << fast.dump(2);
  EXPECT_EQ(report.value("winner", -1), 2);
  EXPECT_EQ(ActiveState(kUnit), "active");
  EXPECT_EQ(SpeedRule(), "tp=4");
  EXPECT_EQ(Plan(manifest), kExitOk) << out_.str() << err_.str();
}

// berth killed -9 in the middle of a candidate's switch (tp8's health gate, after its restart):
// the host runs the candidate, the manifest on disk is the declared one, so one `berth apply`
// converges back; `berth tune --resume` then measures only what the killed sweep had not.
TEST_F(TuneE2eTest, ASweepKilledMidSwitchIsUndoneByOneApplyAndResumed) {
  const std::string manifest = Manifest();
  ASSERT_EQ(Apply(manifest), kExitOk) << out_.str() << err_.str();
  // The step as berth_faulty numbers it (it has no engine check beside it: no preflight step).
  CommandResult plan = RunCommand(
      {BERTH_FAULTY_BIN, "plan", "-f", Tp8Manifest(), "--bus", sandbox_->system_bus_address(),
       "--state-dir", state_, "--nvml-library", FAKE_NVML_FULL},
      {}, std::chrono::seconds(60));
  int k = StepOf(plan.output, "wait-healthy", "service/" + kService);
  ASSERT_GT(k, 0) << plan.exit_code << plan.output << plan.error;
  std::string tune = TuneFile("candidates:\n  - {name: tp8, set: " + kTp8 +
                              "}\n  - {name: tp8-ep, set: " + kTp8Ep + "}\n");
  int status = Wait(TuneProcess(BERTH_FAULTY_BIN, manifest, tune,
                                {"BERTH_FAULT_KILL_AT_STEP=" + std::to_string(k)}));
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status << "\n"
                                                                  << ReadAll(ProcessLog());
  EXPECT_THAT(ReadAll(ProcessLog()), HasSubstr("tp8: switching"));
  EXPECT_THAT(Unit(), HasSubstr("\"--tensor-parallel-size\" \"8\"")) << "killed mid-switch";
  nlohmann::json killed = Report();
  EXPECT_EQ(Outcome(killed, "declared").value("verdict", ""), "measured") << killed.dump(2);
  EXPECT_EQ(Outcome(killed, "tp8").value("verdict", ""), "not_run");

  ASSERT_EQ(Plan(manifest), kExitChanges) << out_.str() << err_.str();
  int applied = Wait(ApplyProcess(BERTH_BIN, manifest, {},
                                  {"--state-dir", state_, "--nvml-library", FAKE_NVML_FULL}));
  ASSERT_EQ(applied, 0) << ReadAll(ProcessLog());
  ExpectDeclared();

  ASSERT_EQ(Tune(manifest, tune, /*plan=*/false, /*resume=*/true), kExitOk)
      << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("declared: measured by the earlier sweep; not run again"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("declared: switching")));
  nlohmann::json resumed = Report();
  EXPECT_TRUE(Outcome(resumed, "declared").value("resumed", false)) << resumed.dump(2);
  EXPECT_EQ(Outcome(resumed, "declared").value("figures", nlohmann::json()),
            Outcome(killed, "declared").value("figures", nlohmann::json()));
  EXPECT_FALSE(Outcome(resumed, "tp8").value("resumed", true));
  EXPECT_EQ(Outcome(resumed, "tp8").value("verdict", ""), "measured");
  EXPECT_EQ(Outcome(resumed, "tp8-ep").value("verdict", ""), "measured");
  EXPECT_EQ(resumed.value("winner", -1), 2);
  ExpectDeclared();
}

// A sweep holds berth's state lock from its first pass to its last: an apply of the declared
// manifest meanwhile (which would undo the candidate) changes nothing and names the sweep.
TEST_F(TuneE2eTest, AnApplyWhileASweepRunsIsRefusedWithTheSweepsName) {
  const std::string manifest = Manifest();
  ASSERT_EQ(Apply(manifest), kExitOk) << out_.str() << err_.str();
  // tp8 measured with 1,024 tokens at 400 tok/s: 2.5 s in which the host stays as it is.
  std::string tune =
      TuneFile("baseline: false\ncandidates:\n  - {name: tp8, set: " + kTp8 + "}\n",
               "load: {concurrency: 4, num_prompts: 16, max_tokens: 64, prompt_tokens: 8}\n");
  pid_t pid = TuneProcess(BERTH_BIN, manifest, tune, {});
  if (!WaitFor([&] { return SpeedRule() == "tp=8"; }, std::chrono::seconds(30))) {
    Wait(pid, std::chrono::seconds(1));
    FAIL() << "the sweep never switched to tp8:\n" << ReadAll(ProcessLog());
  }
  const std::string candidate = Invocation(), unit = Unit();
  EXPECT_EQ(ApplyIn(manifest, out_, err_, FAKE_NVML_FULL), kExitError) << out_.str();
  EXPECT_THAT(err_.str(), HasSubstr("another berth holds " + state_ + "/lock"));
  EXPECT_THAT(err_.str(), HasSubstr("(berth tune " + kService + ")"));
  EXPECT_EQ(Invocation(), candidate) << "the candidate still runs";
  EXPECT_EQ(Unit(), unit);
  EXPECT_EQ(SpeedRule(), "tp=8");
  ASSERT_EQ(Wait(pid), 0) << ReadAll(ProcessLog());
  EXPECT_EQ(Outcome(Report(), "tp8").value("verdict", ""), "measured");
  ExpectDeclared();
}

// --keep-winner: the sweep ends on the best candidate (tp8 with expert parallelism) instead of
// the declared tp4. The manifest on disk is untouched, so its plan would switch back until the
// winner is committed; the manifest written with the winner's settings (by hand here) has an
// empty plan: the host runs exactly that.
TEST_F(TuneE2eTest, KeepWinnerEndsOnTheBestCandidateWhichIsWhatItsManifestDeclares) {
  const std::string manifest = Manifest();
  ASSERT_EQ(Apply(manifest), kExitOk) << out_.str() << err_.str();
  TuneCommand cmd;
  cmd.manifest_path = manifest;
  cmd.tune_file = TuneFile("candidates:\n  - {name: tp8, set: " + kTp8 +
                           "}\n  - {name: tp8-ep, set: " + kTp8Ep + "}\n");
  cmd.keep_winner = true;
  cmd.host = Access();
  cmd.state_dir = state_;
  out_.str("");
  err_.str("");
  ASSERT_EQ(RunTuneCommand(cmd, out_, err_), kExitOk) << out_.str() << err_.str();
  EXPECT_EQ(Report().value("ended_on", ""), "winner");
  EXPECT_THAT(out_.str(), HasSubstr("back to the winner (tp8-ep)"));
  EXPECT_EQ(SpeedRule(), "tp=8,ep");
  EXPECT_THAT(Unit(), HasSubstr("--enable-expert-parallel"));
  EXPECT_EQ(Plan(manifest), kExitChanges) << "the declared tp4 is not what runs";

  std::string text = ReadAll(manifest);
  auto set = [&](const std::string& from, const std::string& to) {
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
  };
  set("gpus: [0, 1, 2, 3]", "gpus: [0, 1, 2, 3, 4, 5, 6, 7]");
  set("tensor_parallel_size: 4", "tensor_parallel_size: 8");
  set("minimax_m2_append_think}", "minimax_m2_append_think, enable_expert_parallel: true}");
  const std::string winner = (tmp_ / "winner.yaml").string();
  std::ofstream(winner) << text;
  EXPECT_EQ(Plan(winner), kExitOk) << out_.str() << err_.str();
}

// Ctrl-C in the middle of a candidate's switch (tp8, slow to load): the sweep stops, still goes
// back to the declared configuration, and exits 1; tp8-ep is never tried.
TEST_F(TuneE2eTest, CtrlCMidSweepStillEndsOnTheDeclaredConfiguration) {
  const std::string manifest = Manifest();
  ASSERT_EQ(Apply(manifest), kExitOk) << out_.str() << err_.str();
  std::string tune = TuneFile(
      "baseline: false\ncandidates:\n"
      "  - {name: tp8, set: {gpus: [0, 1, 2, 3, 4, 5, 6, 7], vllm.tensor_parallel_size: 8, "
      "env: {FAKE_VLLM_SPEED_MODEL: \"" +
      kSpeeds +
      "\", FAKE_VLLM_STARTUP_DELAY: \"3\"}}}\n"
      "  - {name: tp8-ep, set: " +
      kTp8Ep + "}\n");
  pid_t pid = TuneProcess(BERTH_BIN, manifest, tune, {});
  if (!WaitFor([&] { return ReadAll(ProcessLog()).find("tp8: switching") != std::string::npos; },
               std::chrono::seconds(30))) {
    Wait(pid, std::chrono::seconds(1));
    FAIL() << "the sweep never began tp8:\n" << ReadAll(ProcessLog());
  }
  ::kill(pid, SIGINT);
  int status = Wait(pid);
  ASSERT_TRUE(WIFEXITED(status)) << status << ReadAll(ProcessLog());
  EXPECT_EQ(WEXITSTATUS(status), kExitError) << ReadAll(ProcessLog());
  const std::string log = ReadAll(ProcessLog());
  EXPECT_THAT(log, HasSubstr("back to the declared configuration")) << log;
  EXPECT_THAT(log, Not(HasSubstr("tp8-ep: switching"))) << log;
  EXPECT_EQ(Outcome(Report(), "tp8-ep").value("verdict", ""), "not_run");
  EXPECT_EQ(Report().value("ended_on", ""), "declared");
  ExpectDeclared();
}

}  // namespace
}  // namespace berth::testing
