// Preflight at plan time (config.json, weights against the GPUs), the preflight action before
// anything goes dark, and the smoke gate after the health gate.
#include "core/gguf_header.h"
#include "core/model_config.h"
#include "tests/planners/planner_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class PreflightTest : public PlannerTest {
 protected:
  // MiniMax (230 GB of safetensors on the Hub) wanted on `gpus` GPUs of 80 GiB.
  ServiceSpec& MinimaxOn(int gpus) {
    Gpus(gpus, GiB(80));
    Model("minimax-m25", "MiniMaxAI/MiniMax-M2.5");
    Hub("MiniMaxAI/MiniMax-M2.5", "main", Commit("b"), 230'000'000'000);
    std::vector<int> list;
    for (int i = 0; i < gpus; ++i) list.push_back(i);
    return Vllm("vllm-minimax-m25", "minimax-m25", list, 8000);
  }
  // Model "a" complete in the store with `config` and 10 GB of weights.
  ServiceSpec& InStoreWithConfig(ModelConfig config) {
    Gpus(1, GiB(80));
    Model("a", "org/a").revision = Commit("a");
    ObservedRevision& rev = InStore("org/a", Commit("a"), 10'000'000'000);
    rev.config = std::move(config);
    rev.weights_bytes = 10'000'000'000;
    return Vllm("svc", "a", {0}, 8000);
  }
};

TEST_F(PreflightTest, WeightsThatDoNotFitTwoGpusBlockWithFigures) {
  MinimaxOn(2);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  const Problem& x = p.problems[0];
  EXPECT_EQ(x.resource, "gpu 0,1");
  EXPECT_EQ(x.needed, 115'000'000'000u);
  EXPECT_EQ(x.available, static_cast<uint64_t>(0.9 * GiB(80)));
  EXPECT_THAT(x.message, HasSubstr("service/vllm-minimax-m25 cannot load model/minimax-m25"));
  EXPECT_THAT(x.message, HasSubstr("its weights are 230 GB (*.safetensors on the Hub)"));
  EXPECT_THAT(x.message, HasSubstr("107.1 GiB per GPU over tensor_parallel_size 2 × "
                                   "pipeline_parallel_size 1"));
  EXPECT_THAT(x.message, HasSubstr("claims 72.0 GiB of GPU 0 (gpu_memory_utilization 0.9 of "
                                   "80.0 GiB): short by 35.1 GiB"));
}

TEST_F(PreflightTest, TheSameWeightsFitFourGpus) {
  MinimaxOn(4);
  Plan p = PlanNow();
  EXPECT_FALSE(p.blocked()) << Problems(p);
}

TEST_F(PreflightTest, WeightsInTheStoreCountOverTheHub) {
  ServiceSpec& s = InStoreWithConfig({{"LlamaForCausalLM"}, ""});
  s.vllm.gpu_memory_utilization = 0.1;  // 8 GiB claimed, 10 GB of weights
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_THAT(p.problems[0].message, HasSubstr("10 GB (*.safetensors in the store)"));
}

TEST_F(PreflightTest, AMissingConfigJsonBlocksNamingTheFile) {
  InStoreWithConfig({{}, "is missing from the snapshot"});
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "model/a");
  EXPECT_THAT(p.problems[0].message,
              HasSubstr("service/svc cannot start on model/a: config.json of org/a@aaaaaaa is "
                        "missing from the snapshot"));
}

TEST_F(PreflightTest, AGarbageConfigJsonBlocks) {
  InStoreWithConfig(ParseModelConfig("{not json"));
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Problems(p), HasSubstr("config.json of org/a@aaaaaaa is not JSON"));
}

TEST_F(PreflightTest, AConfigJsonWithoutArchitecturesBlocks) {
  InStoreWithConfig(ParseModelConfig(R"({"model_type": "llama"})"));
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Problems(p), HasSubstr("config.json of org/a@aaaaaaa names no architectures"));
}

TEST_F(PreflightTest, AGoodConfigAndWeightsPass) {
  InStoreWithConfig(ParseModelConfig(R"({"architectures": ["LlamaForCausalLM"]})"));
  EXPECT_FALSE(PlanNow().blocked());
}

TEST_F(PreflightTest, ARunningServiceThatNeedsNoStartIsNotChecked) {
  InStoreWithConfig(ParseModelConfig(R"({"architectures": ["LlamaForCausalLM"]})"));
  Converge();
  o.store.repos[0].revisions[0].config = ModelConfig{{}, "is not JSON"};
  Plan p = PlanNow();
  EXPECT_FALSE(p.blocked()) << Problems(p);
  EXPECT_TRUE(p.empty());
}

// vLLM drafts method mtp with the model's own MTP layers only for the model types
// vllm/config/speculative.py maps to an MTP draft; MiniMax-M2.5's minimax_m2 is not one, and the
// server would exit at start ("Unsupported speculative method: 'mtp'") after the stop.
TEST_F(PreflightTest, MtpOnAModelTypeWithoutAnMtpDraftBlocksBeforeAnythingGoesDark) {
  ServiceSpec& s = InStoreWithConfig(ParseModelConfig(
      R"({"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2"})"));
  s.vllm.speculative = VllmSpeculative{"mtp", 3, "", {}, {}, {}};
  s.loc = {"berth.yaml", 20, 3};
  ForeignService("old.service", {0}, GiB(70), 8000);
  StateOnly("old", ServiceState::kStopped);
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].resource, "model/a");
  EXPECT_EQ(p.problems[0].message,
            "service/svc (berth.yaml:20:3) cannot start on model/a (org/a@aaaaaaa): "
            "vllm.speculative.method mtp needs a model whose config.json model_type vLLM maps to "
            "an MTP draft (vllm/config/speculative.py, SpeculativeConfig.hf_config_override), "
            "and 'minimax_m2' is not one: vLLM would exit at start with \"Unsupported "
            "speculative method: 'mtp'\". Remove vllm.speculative, or choose a method this model "
            "has (an eagle3 draft model, ngram)");
}

// Passing the check: no problem, and the start is planned with the method on its command line.
TEST_F(PreflightTest, MtpOnAModelTypeWithAnMtpDraftPasses) {
  ServiceSpec& s = InStoreWithConfig(ParseModelConfig(
      R"({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"})"));
  s.vllm.speculative = VllmSpeculative{"mtp", 1, "", {}, {}, {}};
  Plan p = PlanNow();
  EXPECT_THAT(Problems(p), IsEmpty());
  EXPECT_THAT(At(p, "write-unit unit/svc.service unit_missing").As<UnitFileStep>().content,
              HasSubstr(R"(--speculative-config" "{\"method\":\"mtp\")"));
}

// Other methods do not depend on the model type: the minimax_m2 config that refuses mtp (above)
// takes ngram.
TEST_F(PreflightTest, NgramOnAnyModelTypePasses) {
  ServiceSpec& t = InStoreWithConfig(ParseModelConfig(
      R"({"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2"})"));
  t.vllm.speculative = VllmSpeculative{"mtp", 1, "", {}, {}, {}};
  ASSERT_TRUE(PlanNow().blocked()) << "the model type is read";
  t.vllm.speculative = VllmSpeculative{"ngram", 4, "", {}, {}, {}};
  Plan p = PlanNow();
  EXPECT_THAT(Problems(p), IsEmpty());
  EXPECT_THAT(At(p, "write-unit unit/svc.service unit_missing").As<UnitFileStep>().content,
              HasSubstr(R"(--speculative-config" "{\"method\":\"ngram\")"));
}

// Data parallel: each replica holds a whole copy split tp × pp ways.
TEST_F(PreflightTest, EachDataParallelReplicaHoldsAWholeCopy) {
  ServiceSpec& s = MinimaxOn(4);  // 4 × 72 GiB claimed; 230 GB of weights
  s.vllm.tensor_parallel_size = 2;
  s.vllm.data_parallel_size = 2;
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  ASSERT_EQ(p.problems.size(), 1u) << Problems(p);
  EXPECT_EQ(p.problems[0].needed, 115'000'000'000u);
  EXPECT_THAT(p.problems[0].message,
              HasSubstr("107.1 GiB per GPU over tensor_parallel_size 2 × pipeline_parallel_size "
                        "1 in each of data_parallel_size 2 replicas (each holds a whole copy)"));
}

// With expert parallelism the experts are spread over every GPU of every replica: berth counts
// every weight as an expert and refuses only what cannot fit.
TEST_F(PreflightTest, WithExpertParallelTheExpertsSpreadOverEveryReplica) {
  ServiceSpec& s = MinimaxOn(4);
  s.vllm.tensor_parallel_size = 2;
  s.vllm.data_parallel_size = 2;
  s.vllm.enable_expert_parallel = true;
  EXPECT_FALSE(PlanNow().blocked()) << Problems(PlanNow());
}

TEST_F(PreflightTest, WithExpertParallelWhatCannotFitEvenSpreadIsRefused) {
  ServiceSpec& t = MinimaxOn(2);
  t.vllm.tensor_parallel_size = 1;
  t.vllm.data_parallel_size = 2;
  t.vllm.enable_expert_parallel = true;
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Problems(p),
              HasSubstr("over tensor_parallel_size 1 × pipeline_parallel_size 1 × "
                        "data_parallel_size 2 (enable_expert_parallel spreads the experts over "
                        "all 2 GPUs; every weight counted as an expert)"));
}

TEST(ModelConfigTest, ParsesArchitecturesAndSaysWhatIsWrong) {
  EXPECT_EQ(ParseModelConfig(R"({"architectures": ["MiniMaxM2ForCausalLM"]})").architectures,
            std::vector<std::string>{"MiniMaxM2ForCausalLM"});
  EXPECT_EQ(ParseModelConfig("").problem, "is not JSON");
  EXPECT_EQ(ParseModelConfig("[1]").problem, "is JSON but not an object (array)");
  EXPECT_THAT(ParseModelConfig(R"({"architectures": []})").problem,
              HasSubstr("names no architectures"));
  EXPECT_THAT(ParseModelConfig(R"({"architectures": "X"})").problem, HasSubstr("wrong type"));
  EXPECT_THAT(ParseModelConfig(R"({"architectures": [1]})").problem, HasSubstr("not a name"));
  EXPECT_THAT(ParseModelConfig(std::string(100, '{')).problem, "is not JSON");
  // model_type: kept when it is a short name, else left out (it then decides nothing).
  EXPECT_EQ(ParseModelConfig(R"({"architectures": ["X"], "model_type": "minimax_m2"})").model_type,
            "minimax_m2");
  EXPECT_EQ(ParseModelConfig(R"({"architectures": ["X"]})").model_type, "");
  EXPECT_EQ(ParseModelConfig(R"({"architectures": ["X"], "model_type": 3})").model_type, "");
  EXPECT_EQ(ParseModelConfig(R"({"architectures": ["X"], "model_type": "a b\n"})").model_type, "");
  EXPECT_EQ(ParseModelConfig(R"({"architectures": ["X"], "model_type": ")" + std::string(101, 'a') +
                             R"("})")
                .model_type,
            "");
}

TEST_F(PreflightTest, ThePreflightCommandRunsBeforeAnythingGoesDarkAndSmokeAfterHealth) {
  // Kimi by hand on 8 GPUs; MiniMax replaces it with a preflight and a smoke gate.
  Gpus(8, GiB(96));
  Model("minimax-m25", "MiniMaxAI/MiniMax-M2.5");
  Hub("MiniMaxAI/MiniMax-M2.5", "main", Commit("b"), 230'000'000'000);
  ForeignService("vllm-kimi-k25.service", {0, 1, 2, 3, 4, 5, 6, 7}, GiB(73.7), 8000);
  StateOnly("vllm-kimi-k25", ServiceState::kStopped);
  ServiceSpec& s = Vllm("vllm-minimax-m25", "minimax-m25", {0, 1, 2, 3, 4, 5, 6, 7}, 8000);
  s.preflight = PreflightSpec{{"/opt/vllm/bin/check-arch", "MiniMaxM2ForCausalLM"}, 120'000, true};
  s.gates.smoke = SmokeSpec{"chat", "Say hello.", 8, 30'000};
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("download model/minimax-m25 model_missing",
                                    "preflight service/vllm-minimax-m25 preflight",
                                    "write-unit unit/vllm-minimax-m25.service unit_missing",
                                    "daemon-reload systemd unit_files_changed",
                                    "stop service/vllm-kimi-k25 frees_resources",
                                    "start service/vllm-minimax-m25 not_running",
                                    "wait-healthy service/vllm-minimax-m25 health_gate",
                                    "smoke service/vllm-minimax-m25 smoke_gate",
                                    "enable unit/vllm-minimax-m25.service not_enabled"));
  const Action& pre = p.actions[1];
  EXPECT_THAT(pre.As<PreflightStep>().argv,
              ElementsAre("/opt/vllm/bin/check-arch", "MiniMaxM2ForCausalLM"));
  EXPECT_EQ(pre.As<PreflightStep>().timeout_ms, 120'000u);
  EXPECT_THAT(pre.detail, HasSubstr("must exit 0 before anything is stopped"));
  const Action& smoke = p.actions[7];
  EXPECT_EQ(smoke.As<SmokeStep>().api, "chat");
  EXPECT_EQ(smoke.As<SmokeStep>().port, 8000);
  EXPECT_EQ(smoke.As<SmokeStep>().served_name, "vllm-minimax-m25");
  EXPECT_EQ(smoke.As<SmokeStep>().max_tokens, 8);
  EXPECT_EQ(smoke.As<SmokeStep>().timeout_ms, 30'000u);
  EXPECT_THAT(smoke.detail, HasSubstr("POST /v1/chat/completions"));
  // The port is dark from the stop until the health gate; the smoke gate does not extend it.
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].from_step, 4u);
  EXPECT_EQ(p.disruptions[0].until_step, 6u);
  Converge();
}

// The engine check: vLLM's own validation of what the unit will run, before the first step that
// takes anything down (and before the service's own preflight command).
class EngineCheckTest : public PreflightTest {
 protected:
  static constexpr char kDir[] = "/usr/libexec/berth/engine-check";
  Plan PlanWithChecks(std::optional<std::string> dir = std::string(kDir)) {
    PlanOptions options;
    options.engine_check_dir = std::move(dir);
    return MakePlan(d, o, options);
  }
  // Kimi by hand on 8 GPUs; MiniMax replaces it.
  ServiceSpec& MinimaxReplacesKimi() {
    Gpus(8, GiB(96));
    Model("minimax-m25", "MiniMaxAI/MiniMax-M2.5");
    Hub("MiniMaxAI/MiniMax-M2.5", "main", Commit("b"), 230'000'000'000);
    ForeignService("vllm-kimi-k25.service", {0, 1, 2, 3, 4, 5, 6, 7}, GiB(73.7), 8000);
    StateOnly("vllm-kimi-k25", ServiceState::kStopped);
    ServiceSpec& s = Vllm("vllm-minimax-m25", "minimax-m25", {0, 1, 2, 3, 4, 5, 6, 7}, 8000);
    s.env["PYTHONPATH"] = "/opt/extra";
    s.env_file = "/etc/berth/minimax.env";
    s.args = {"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 3})"};
    return s;
  }
  static std::vector<std::string> EngineWarnings(const Plan& p) {
    std::vector<std::string> out;
    for (const std::string& w : p.warnings)
      if (w.find("engine check") != std::string::npos) out.push_back(w);
    return out;
  }
  static const Action* Find(const Plan& p, Reason r) {
    for (const Action& a : p.actions)
      if (a.reason == r) return &a;
    return nullptr;
  }
};

TEST_F(EngineCheckTest, TheCheckRunsBeforeTheStopWithTheUnitsArgvAndEnvironment) {
  ServiceSpec& s = MinimaxReplacesKimi();
  s.preflight = PreflightSpec{{"/opt/vllm/bin/check-arch"}, 120'000, true};
  Plan p = PlanWithChecks();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("download model/minimax-m25 model_missing",
                                    "preflight service/vllm-minimax-m25 engine_check",
                                    "preflight service/vllm-minimax-m25 preflight",
                                    "write-unit unit/vllm-minimax-m25.service unit_missing",
                                    "daemon-reload systemd unit_files_changed",
                                    "stop service/vllm-kimi-k25 frees_resources",
                                    "start service/vllm-minimax-m25 not_running",
                                    "wait-healthy service/vllm-minimax-m25 health_gate",
                                    "enable unit/vllm-minimax-m25.service not_enabled"));
  const Action& check = p.actions[1];
  EXPECT_EQ(check.kind, ActionKind::kPreflight);
  EXPECT_EQ(check.As<PreflightStep>().engine, "vllm");
  EXPECT_EQ(check.As<PreflightStep>().check_program, "vllm_check.py");
  EXPECT_EQ(check.As<PreflightStep>().timeout_ms,
            120'000u);  // preflight: timeout bounds both checks
  // Exactly the unit's ExecStart, word for word.
  const std::string& unit = p.actions[3].As<UnitFileStep>().content;
  EXPECT_EQ(check.As<PreflightStep>().argv[0], "vllm");
  EXPECT_EQ(check.As<PreflightStep>().argv[1], "serve");
  EXPECT_EQ(check.As<PreflightStep>().argv.back(),
            R"({"method": "mtp", "num_speculative_tokens": 3})");
  EXPECT_THAT(unit, HasSubstr("--speculative-config"));
  // The environment the unit's Environment= lines give, in their order, and its env file.
  EXPECT_THAT(
      check.As<PreflightStep>().env,
      ElementsAre("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", "HF_HUB_OFFLINE=1",
                  "HF_HUB_CACHE=/models", "VLLM_CACHE_ROOT=/var/cache/berth/vllm/vllm-minimax-m25",
                  "PYTHONPATH=/opt/extra"));
  for (const std::string& e : check.As<PreflightStep>().env)
    EXPECT_THAT(unit, HasSubstr("Environment=\"" + e + "\"\n"));
  EXPECT_EQ(check.As<PreflightStep>().env_file, "/etc/berth/minimax.env");
  EXPECT_THAT(unit, HasSubstr("EnvironmentFile=/etc/berth/minimax.env"));
  EXPECT_THAT(check.detail,
              HasSubstr("engine check: vLLM's own argument parser and engine config for this "
                        "argv (engine-check/vllm_check.py run by the "
                        "interpreter of vllm), loading no weights"));
  EXPECT_THAT(check.detail, HasSubstr("must pass before anything is stopped"));
}

TEST_F(EngineCheckTest, EngineOffLeavesTheCheckOut) {
  ServiceSpec& s = MinimaxReplacesKimi();
  s.preflight = PreflightSpec{};
  s.preflight->engine_check = false;
  Plan p = PlanWithChecks();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_EQ(Find(p, Reason::kEngineCheck), nullptr) << ::testing::PrintToString(Steps(p));
  EXPECT_EQ(Find(p, Reason::kPreflight), nullptr) << "no command: no preflight command";
  EXPECT_THAT(EngineWarnings(p), IsEmpty());
}

TEST_F(EngineCheckTest, ARestartIsCheckedAndARunningServiceThatStaysIsNot) {
  Gpus(2, GiB(80));
  Model("a", "org/a").revision = Commit("a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("one", "a", {0}, 8000);
  Vllm("two", "a", {1}, 8001);
  Converge();
  d.services.at("one").args = {"--max-num-seqs", "8"};  // one restarts, two stays
  Plan p = PlanWithChecks();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::vector<std::string> steps = Steps(p);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps[0], "preflight service/one engine_check");
  for (size_t i = 1; i < steps.size(); ++i)
    EXPECT_THAT(steps[i], ::testing::Not(HasSubstr("engine_check"))) << steps[i];
  EXPECT_EQ(p.actions[0].As<PreflightStep>().argv.back(), "8");
}

TEST_F(EngineCheckTest, ChecksNotFoundNextToBerthAreAWarningNotAStep) {
  MinimaxReplacesKimi();
  Plan p = PlanWithChecks("");
  EXPECT_EQ(Find(p, Reason::kEngineCheck), nullptr);
  std::vector<std::string> warned = EngineWarnings(p);
  ASSERT_EQ(warned.size(), 1u) << ::testing::PrintToString(p.warnings);
  EXPECT_THAT(warned[0], HasSubstr("no engine check for service/vllm-minimax-m25"));
  EXPECT_THAT(warned[0], HasSubstr("preflight: {engine: off}"));
  // A caller that plans no engine (the default options): neither.
  Plan q = PlanWithChecks(std::nullopt);
  EXPECT_EQ(Find(q, Reason::kEngineCheck), nullptr);
  EXPECT_THAT(EngineWarnings(q), IsEmpty());
}

TEST_F(EngineCheckTest, OtherEnginesGetTheirOwnCheck) {
  Gpus(2, GiB(80));
  Model("a", "org/a").revision = Commit("a");
  InStore("org/a", Commit("a"), 1000);
  ServiceSpec& sg = Vllm("sg", "a", {0}, 30000);
  sg.engine = EngineKind::kSglang;
  ServiceSpec& ll = Vllm("ll", "a", {1}, 8080);
  ll.engine = EngineKind::kLlamaServer;
  Plan p = PlanWithChecks();
  const Action* sg_check = nullptr;
  const Action* ll_check = nullptr;
  for (const Action& a : p.actions)
    if (a.reason == Reason::kEngineCheck) (a.address == "service/sg" ? sg_check : ll_check) = &a;
  ASSERT_NE(sg_check, nullptr) << ::testing::PrintToString(Steps(p));
  ASSERT_NE(ll_check, nullptr);
  EXPECT_EQ(sg_check->As<PreflightStep>().engine, "sglang");
  EXPECT_EQ(sg_check->As<PreflightStep>().check_program, "sglang_check.py");
  EXPECT_EQ(ll_check->As<PreflightStep>().engine, "llama-server");
  EXPECT_EQ(ll_check->As<PreflightStep>().check_program, "");
  EXPECT_THAT(ll_check->detail, HasSubstr("llama-server ... --help), then llama-fit-params"));
}

std::string Gguf(uint32_t version, const std::string& arch) {
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& x) { return u64(x.size()) + x; };
  // A first key berth skips (an array of strings), then general.architecture.
  return "GGUF" + u32(version) + u64(0) + u64(2) + str("tokenizer.ggml.tokens") + u32(9) + u32(8) +
         u64(2) + str("a") + str("bc") + str("general.architecture") + u32(8) + str(arch);
}

TEST(GgufHeaderTest, MagicVersionAndArchitectureOfUntrustedBytes) {
  EXPECT_EQ(ParseGgufHeader(Gguf(3, "qwen3moe")), (GgufHeader{3, "qwen3moe", "", {}}));
  EXPECT_EQ(ParseGgufHeader(Gguf(2, "llama")).architecture, "llama");
  EXPECT_THAT(ParseGgufHeader(Gguf(1, "llama")).problem, HasSubstr("GGUF version 1"));
  EXPECT_THAT(ParseGgufHeader(Gguf(9, "llama")).problem, HasSubstr("version 9"));
  EXPECT_THAT(ParseGgufHeader("{\"not\": \"gguf\"}").problem,
              HasSubstr("is not a GGUF file (it starts with '{\"no'"));
  EXPECT_THAT(ParseGgufHeader("GGUF").problem, HasSubstr("is cut short"));
  EXPECT_THAT(ParseGgufHeader("").problem, HasSubstr("is not a GGUF file (it starts with ''"));
  EXPECT_THAT(ParseGgufHeader(Gguf(3, "x").substr(0, 12)).problem, HasSubstr("cut short"));
  // Cut anywhere past the counts: no architecture, no crash, no problem (the header is GGUF).
  const std::string full = Gguf(3, "llama");
  for (size_t n = 24; n < full.size(); ++n) {
    GgufHeader h = ParseGgufHeader(full.substr(0, n));
    EXPECT_EQ(h.problem, "") << n;
    EXPECT_EQ(h.architecture, "") << n;
  }
  // Counts that claim more than the bytes hold.
  std::string lying = full;
  lying[24] = '\xff';  // the first key's length: huge
  EXPECT_EQ(ParseGgufHeader(lying).architecture, "");
}

TEST_F(PreflightTest, ALlamaServerModelFileThatIsNotGgufBlocks) {
  Gpus(1, GiB(80));
  Model("g", "org/g").revision = Commit("a");
  ObservedRevision& rev = InStore("org/g", Commit("a"), 1000);
  rev.gguf = std::map<std::string, GgufHeader>{
      {"Q4/m.gguf", {3, "llama", "", {}}},
      {"broken.gguf", {0, "", "is not a GGUF file (it starts with '<htm', not 'GGUF')", {}}}};
  ServiceSpec& s = Vllm("ll", "g", {0}, 8080);
  s.engine = EngineKind::kLlamaServer;
  s.llama.model_file = "Q4/m.gguf";
  EXPECT_FALSE(PlanNow().blocked()) << Problems(PlanNow());
  s.llama.model_file = "broken.gguf";
  Plan p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Problems(p), HasSubstr("service/ll cannot start: broken.gguf of org/g@aaaaaaa is "
                                     "not a GGUF file (it starts with '<htm', not 'GGUF'), so "
                                     "llama-server cannot load it"));
  s.llama.model_file = "Q8/m.gguf";
  EXPECT_THAT(Problems(PlanNow()),
              HasSubstr("its model_file Q8/m.gguf is not a .gguf file of org/g@aaaaaaa (its "
                        ".gguf files: Q4/m.gguf, broken.gguf)"));
}

TEST_F(PreflightTest, ServicesWithSmokeGatesStillStartSideBySide) {
  Gpus(2, GiB(80));
  Model("a", "org/a").revision = Commit("a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("one", "a", {0}, 8000).gates.smoke = SmokeSpec{};
  Vllm("two", "a", {1}, 8001).gates.smoke = SmokeSpec{};
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  const std::vector<ParallelGroup>& groups = p.groups;
  ASSERT_EQ(groups.size(), 1u) << ::testing::PrintToString(Steps(p));
  ASSERT_EQ(groups[0].chains.size(), 2u);
  // Each chain: start, wait-healthy, smoke, enable.
  EXPECT_EQ(groups[0].chains[0].last - groups[0].chains[0].start, 3u);
  EXPECT_EQ(p.actions[groups[0].chains[0].start + 2].kind, ActionKind::kSmoke);
}

}  // namespace
}  // namespace berth::testing

namespace berth::testing {
namespace {

// The soak is the switch's last gate: after the smoke and the floor, before the enable; the
// replaced service of a start-first switch stops only after it.
TEST_F(PreflightTest, TheSoakGateIsTheSwitchsLastGateWithItsLimits) {
  Gpus(8, GiB(96));
  Model("minimax-m25", "MiniMaxAI/MiniMax-M2.5");
  Hub("MiniMaxAI/MiniMax-M2.5", "main", Commit("b"), 230'000'000'000);
  ServiceSpec& s = Vllm("vllm-minimax-m25", "minimax-m25", {0, 1, 2, 3, 4, 5, 6, 7}, 8000);
  s.gates.smoke = SmokeSpec{"chat", "Say hello.", 8, 30'000};
  SoakSpec soak;
  soak.duration_ms = 600'000;
  soak.max_restarts = 1;
  s.gates.soak = soak;
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_THAT(Steps(p), ElementsAre("download model/minimax-m25 model_missing",
                                    "write-unit unit/vllm-minimax-m25.service unit_missing",
                                    "daemon-reload systemd unit_files_changed",
                                    "start service/vllm-minimax-m25 not_running",
                                    "wait-healthy service/vllm-minimax-m25 health_gate",
                                    "smoke service/vllm-minimax-m25 smoke_gate",
                                    "soak service/vllm-minimax-m25 soak_gate",
                                    "enable unit/vllm-minimax-m25.service not_enabled"));
  const Action& a = p.actions[6];
  const SoakStep& g = a.As<SoakStep>();
  EXPECT_EQ(g.port, 8000);
  EXPECT_EQ(g.path, "/health");
  EXPECT_EQ(g.duration_ms, 600'000u);
  EXPECT_EQ(g.max_restarts, 1);
  EXPECT_TRUE(g.front_socket.empty()) << "not behind a front";
  EXPECT_THAT(a.detail, HasSubstr("watched for 10m: at most 1 restart,"));
  ASSERT_EQ(p.switches.size(), 1u);
  EXPECT_EQ(p.switches[0].gates.back(), 6u) << "the soak is one of the switch's gates";
  EXPECT_TRUE(IsGate(ActionKind::kSoak));
}

}  // namespace
}  // namespace berth::testing
