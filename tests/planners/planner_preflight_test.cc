// Preflight at plan time (config.json, weights against the GPUs), the preflight action before
// anything goes dark, and the smoke gate after the health gate.
#include "engine/core/model_config.h"
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

TEST_F(PreflightTest, MtpOnAModelTypeWithAnMtpDraftPasses) {
  ServiceSpec& s = InStoreWithConfig(ParseModelConfig(
      R"({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"})"));
  s.vllm.speculative = VllmSpeculative{"mtp", 1, "", {}, {}, {}};
  EXPECT_FALSE(PlanNow().blocked()) << Problems(PlanNow());
}

// Other methods do not depend on the model type.
TEST_F(PreflightTest, NgramOnAnyModelTypePasses) {
  ServiceSpec& t = InStoreWithConfig(ParseModelConfig(
      R"({"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2"})"));
  t.vllm.speculative = VllmSpeculative{"ngram", 4, "", {}, {}, {}};
  EXPECT_FALSE(PlanNow().blocked()) << Problems(PlanNow());
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
  s.preflight = PreflightSpec{{"/opt/vllm/bin/check-arch", "MiniMaxM2ForCausalLM"}, 120'000};
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
  EXPECT_THAT(pre.argv, ElementsAre("/opt/vllm/bin/check-arch", "MiniMaxM2ForCausalLM"));
  EXPECT_EQ(pre.timeout_ms, 120'000u);
  EXPECT_THAT(pre.detail, HasSubstr("must exit 0 before anything is stopped"));
  const Action& smoke = p.actions[7];
  EXPECT_EQ(smoke.api, "chat");
  EXPECT_EQ(smoke.port, 8000);
  EXPECT_EQ(smoke.served_name, "vllm-minimax-m25");
  EXPECT_EQ(smoke.max_tokens, 8);
  EXPECT_EQ(smoke.timeout_ms, 30'000u);
  EXPECT_THAT(smoke.detail, HasSubstr("POST /v1/chat/completions"));
  // The port is dark from the stop until the health gate; the smoke gate does not extend it.
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].from_step, 5);
  EXPECT_EQ(p.disruptions[0].until_step, 7);
  Converge();
}

TEST_F(PreflightTest, ServicesWithSmokeGatesStillStartSideBySide) {
  Gpus(2, GiB(80));
  Model("a", "org/a").revision = Commit("a");
  InStore("org/a", Commit("a"), 1000);
  Vllm("one", "a", {0}, 8000).gates.smoke = SmokeSpec{};
  Vllm("two", "a", {1}, 8001).gates.smoke = SmokeSpec{};
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::vector<ParallelGroup> groups = ParallelStarts(p);
  ASSERT_EQ(groups.size(), 1u) << ::testing::PrintToString(Steps(p));
  ASSERT_EQ(groups[0].chains.size(), 2u);
  // Each chain: start, wait-healthy, smoke, enable.
  EXPECT_EQ(groups[0].chains[0].second - groups[0].chains[0].first, 3u);
  EXPECT_EQ(p.actions[groups[0].chains[0].first + 2].kind, ActionKind::kSmoke);
}

}  // namespace
}  // namespace berth::testing
