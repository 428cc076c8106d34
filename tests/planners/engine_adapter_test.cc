// The engine adapters: each engine's command line, and the flags `args` may not name.
#include "planners/engines/adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsSupersetOf;

ServiceSpec Sglang() {
  ServiceSpec s;
  s.name = "sg";
  s.has_engine = true;
  s.engine = EngineKind::kSglang;
  s.model = "m";
  s.gpus = {0};
  s.port = 30000;
  return s;
}

RenderContext Ctx(std::string executable) {
  RenderContext c;
  c.snapshot_path = "/models/models--o--m/snapshots/abc";
  c.executable = std::move(executable);
  return c;
}

// The words before --model-path: what launches SGLang.
std::vector<std::string> Launcher(const std::vector<std::string>& argv) {
  auto at = std::find(argv.begin(), argv.end(), "--model-path");
  return {argv.begin(), at};
}

TEST(SglangAdapter, EveryPythonInterpreterGetsTheLaunchModule) {
  for (std::string exe : {"python3", "/opt/sglang/bin/python", "/opt/sglang/bin/python3",
                          "/usr/bin/python3.12", "python"})
    EXPECT_THAT(Launcher(ServiceArgv(Sglang(), Ctx(exe))),
                ElementsAre(exe, "-m", "sglang.launch_server"))
        << exe;
}

TEST(SglangAdapter, TheSglangConsoleScriptGetsItsServeSubcommand) {
  EXPECT_THAT(Launcher(ServiceArgv(Sglang(), Ctx("/opt/sglang/bin/sglang"))),
              ElementsAre("/opt/sglang/bin/sglang", "serve"));
  // A wrapper of the operator's own is run as it is.
  EXPECT_THAT(Launcher(ServiceArgv(Sglang(), Ctx("/usr/local/bin/run-sglang"))),
              ElementsAre("/usr/local/bin/run-sglang"));
  EXPECT_THAT(Launcher(ServiceArgv(Sglang(), Ctx("/opt/pythonista/bin/serve"))),
              ElementsAre("/opt/pythonista/bin/serve"));
}

TEST(EngineAdapter, ArgsNamingAFlagBerthRendersAreFoundInEverySpelling) {
  ServiceSpec s = Sglang();
  s.engine = EngineKind::kVllm;
  auto at = [&](std::vector<std::string> args) { return FindOwnedFlag(s, args); };
  ASSERT_TRUE(at({"--port", "9000"}));
  EXPECT_EQ(at({"--port", "9000"})->set_by, "port");
  EXPECT_EQ(at({"--enforce-eager", "--port=9000"})->index, 1u);
  EXPECT_EQ(at({"-tp", "4"})->set_by, "vllm.tensor_parallel_size");
  EXPECT_EQ(at({"--served-model-name", "x"})->set_by, "vllm.served_model_name");
  EXPECT_FALSE(at({"--enforce-eager", "--max-num-seqs", "64"}));
  // Every spelling vLLM's parser reads as the same flag.
  EXPECT_EQ(at({"--served_model_name", "x"})->set_by, "vllm.served_model_name");
  EXPECT_EQ(at({"--tensor-parallel", "4"})->set_by, "vllm.tensor_parallel_size")
      << "argparse takes a unique prefix";
  // The GPU rule counts data_parallel_size: args cannot change it behind the rule's back.
  EXPECT_EQ(at({"--data-parallel-size", "2"})->set_by, "vllm.data_parallel_size");
  EXPECT_EQ(at({"--max-num-batched-tokens", "8192"}), std::nullopt);
  EXPECT_EQ(at({"--no-enable-expert-parallel"})->set_by, "vllm.enable_expert_parallel");
  // A value that looks like a flag of another engine is not one of this engine's.
  EXPECT_FALSE(at({"--model-path", "x"}));
  // Flags berth renders only when their key is set are free otherwise.
  EXPECT_FALSE(at({"--max-model-len", "8192"}));
  s.vllm.max_model_len = 4096;
  EXPECT_TRUE(at({"--max-model-len", "8192"}));
}

TEST(EngineAdapter, EveryEngineOwnsItsPortHostAndServedName) {
  for (EngineKind e : {EngineKind::kVllm, EngineKind::kSglang, EngineKind::kLlamaServer}) {
    ServiceSpec s = Sglang();
    s.engine = e;
    std::vector<std::string> keys;
    for (const OwnedFlag& f : AdapterFor(e).OwnedFlags(s)) keys.push_back(f.set_by);
    EXPECT_THAT(keys, IsSupersetOf({"port", "bind", "model"})) << EngineName(e);
  }
  ServiceSpec c = Sglang();
  c.engine = EngineKind::kCommand;
  EXPECT_TRUE(AdapterFor(EngineKind::kCommand).OwnedFlags(c).empty());
}

ServiceSpec Vllm() {
  ServiceSpec s = Sglang();
  s.name = "v";
  s.engine = EngineKind::kVllm;
  s.port = 8000;
  s.gpus = {0, 1, 2, 3};
  s.vllm.tensor_parallel_size = 4;
  return s;
}

// The words after berth's own fixed ones (executable serve snapshot --served-model-name v
// --host 0.0.0.0 --port 8000 -tp N -pp 1).
std::vector<std::string> After(const std::vector<std::string>& argv, const std::string& flag) {
  auto at = std::find(argv.begin(), argv.end(), flag);
  return {at, argv.end()};
}

TEST(VllmAdapter, LeftOutTheNewKeysRenderNothing) {
  EXPECT_THAT(
      ServiceArgv(Vllm(), Ctx("vllm")),
      ElementsAre("vllm", "serve", "/models/models--o--m/snapshots/abc", "--served-model-name", "v",
                  "--host", "0.0.0.0", "--port", "8000", "--tensor-parallel-size", "4",
                  "--pipeline-parallel-size", "1", "--gpu-memory-utilization", "0.9"));
}

TEST(VllmAdapter, EveryKeyRendersItsFlags) {
  ServiceSpec s = Vllm();
  s.vllm.tensor_parallel_size = 2;
  s.vllm.data_parallel_size = 2;
  s.vllm.trust_remote_code = true;
  s.vllm.kv_cache_dtype = "fp8";
  s.vllm.tool_call_parser = "hermes";
  s.vllm.reasoning_parser = "deepseek_r1";
  s.vllm.speculative = VllmSpeculative{"eagle3", 3, "eagle", 1, {}, {}};
  RenderContext c = Ctx("vllm");
  c.model_snapshots = {{"m", c.snapshot_path},
                       {"eagle", "/models/models--y--EAGLE3/snapshots/def"}};
  EXPECT_THAT(After(ServiceArgv(s, c), "--tensor-parallel-size"),
              ElementsAre("--tensor-parallel-size", "2", "--pipeline-parallel-size", "1",
                          "--data-parallel-size", "2", "--gpu-memory-utilization", "0.9",
                          "--trust-remote-code", "--kv-cache-dtype", "fp8",
                          // cli_args.py: auto tool choice needs both.
                          "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                          "--reasoning-parser", "deepseek_r1", "--speculative-config",
                          R"({"method":"eagle3","model":"/models/models--y--EAGLE3/snapshots/def",)"
                          R"("num_speculative_tokens":3,"draft_tensor_parallel_size":1})"));
}

TEST(VllmAdapter, MtpAndNgramRenderNoModel) {
  ServiceSpec s = Vllm();
  s.vllm.speculative = VllmSpeculative{"mtp", 1, "", {}, {}, {}};
  EXPECT_THAT(
      After(ServiceArgv(s, Ctx("vllm")), "--speculative-config"),
      ElementsAre("--speculative-config", R"({"method":"mtp","num_speculative_tokens":1})"));
  s.vllm.speculative = VllmSpeculative{"ngram", 4, "", {}, 2, 4};
  EXPECT_THAT(After(ServiceArgv(s, Ctx("vllm")), "--speculative-config"),
              ElementsAre("--speculative-config",
                          R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,)"
                          R"("prompt_lookup_max":4})"));
}

TEST(VllmAdapter, TheGpuRuleIsTpTimesPpTimesDp) {
  ServiceSpec s = Vllm();
  s.vllm.tensor_parallel_size = 2;
  s.vllm.data_parallel_size = 2;
  const EngineAdapter& v = AdapterFor(EngineKind::kVllm);
  EXPECT_FALSE(v.GpuCountProblem(s, 4));
  ASSERT_TRUE(v.GpuCountProblem(s, 2));
  EXPECT_EQ(v.GpuCountProblem(s, 2)->message,
            "tensor_parallel_size 2 × pipeline_parallel_size 1 × data_parallel_size 2 = 4, but "
            "gpus lists 2 devices");
  // The weights: one copy split two ways, two replicas of it.
  std::optional<WeightSplit> split = v.Split(s);
  ASSERT_TRUE(split);
  EXPECT_EQ(split->ways, 2);
  EXPECT_EQ(split->replicas, 2);
  s.vllm.enable_expert_parallel = true;
  EXPECT_EQ(v.Split(s)->ways, 4);
  EXPECT_EQ(v.Split(s)->replicas, 2);
}

TEST(VllmAdapter, ArgsMayNotNameTheNewKeysFlagsSpeltEitherWay) {
  ServiceSpec s = Vllm();
  auto at = [&](std::vector<std::string> args) {
    std::optional<ArgConflict> c = FindOwnedFlag(s, args);
    return c ? c->set_by : std::string();
  };
  EXPECT_EQ(at({"-dp", "2"}), "vllm.data_parallel_size");
  EXPECT_EQ(at({"--data-parallel-size=2"}), "vllm.data_parallel_size");
  EXPECT_EQ(at({"--data_parallel_size", "2"}), "vllm.data_parallel_size");
  EXPECT_EQ(at({"--trust-remote-code"}), "vllm.trust_remote_code");
  EXPECT_EQ(at({"--enable-auto-tool-choice"}), "vllm.tool_call_parser");
  EXPECT_EQ(at({"--tool_call_parser=hermes"}), "vllm.tool_call_parser");
  EXPECT_EQ(at({"--reasoning-parser", "x"}), "vllm.reasoning_parser");
  EXPECT_EQ(at({"--kv-cache-dtype", "fp8"}), "vllm.kv_cache_dtype");
  EXPECT_EQ(at({"--speculative_config", "{}"}), "vllm.speculative");
  EXPECT_EQ(at({"--enable_expert_parallel"}), "vllm.enable_expert_parallel");
  EXPECT_EQ(at({"--compilation-config", "{}", "--max-num-seqs", "8"}), "");
}

}  // namespace
}  // namespace berth
