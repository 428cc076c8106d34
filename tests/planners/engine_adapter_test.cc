// The engine adapters: each engine's command line, and the flags `args` may not name.
#include "planners/servers/adapter.h"

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
  s.vllm.max_num_seqs = 64;
  EXPECT_EQ(at({"--enforce-eager", "--max-num-seqs", "128"})->set_by, "vllm.max_num_seqs");
  EXPECT_EQ(at({"--max_num_seqs=128"})->set_by, "vllm.max_num_seqs");
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
  s.vllm.max_num_seqs = 64;
  s.vllm.trust_remote_code = true;
  s.vllm.kv_cache_dtype = "fp8";
  s.vllm.tool_call_parser = "hermes";
  s.vllm.reasoning_parser = "deepseek_r1";
  s.vllm.speculative = VllmSpeculative{"eagle3", 3, "eagle", 1, {}, {}};
  RenderContext c = Ctx("vllm");
  c.draft_snapshot_path = "/models/models--y--EAGLE3/snapshots/def";
  EXPECT_THAT(After(ServiceArgv(s, c), "--tensor-parallel-size"),
              ElementsAre("--tensor-parallel-size", "2", "--pipeline-parallel-size", "1",
                          "--data-parallel-size", "2", "--gpu-memory-utilization", "0.9",
                          "--max-num-seqs", "64", "--trust-remote-code", "--kv-cache-dtype", "fp8",
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

namespace berth {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// The words of argv from `flag` on, `n` of them.
std::vector<std::string> From(const std::vector<std::string>& argv, const std::string& flag,
                              size_t n = 2) {
  auto at = std::find(argv.begin(), argv.end(), flag);
  if (at == argv.end()) return {};
  return {at, at + static_cast<std::ptrdiff_t>(std::min<size_t>(n, argv.end() - at))};
}

TEST(SglangAdapter, MiniMaxsGuideKeysRenderInSglangsSpelling) {
  ServiceSpec s = Sglang();
  s.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  SglangOptions& o = s.sglang;
  o.tp_size = 8;
  o.trust_remote_code = true;
  o.tool_call_parser = "minimax-m2";
  o.reasoning_parser = "minimax-append-think";
  o.kv_cache_dtype = "fp8_e4m3";
  std::vector<std::string> a = ServiceArgv(s, Ctx("python3"));
  EXPECT_THAT(a, Contains("--trust-remote-code"));
  EXPECT_THAT(From(a, "--tool-call-parser"), ElementsAre("--tool-call-parser", "minimax-m2"));
  EXPECT_THAT(From(a, "--reasoning-parser"),
              ElementsAre("--reasoning-parser", "minimax-append-think"));
  EXPECT_THAT(From(a, "--kv-cache-dtype"), ElementsAre("--kv-cache-dtype", "fp8_e4m3"));
  // Sizes at SGLang's defaults are not rendered.
  EXPECT_THAT(a, Not(Contains("--dp-size")));
  EXPECT_THAT(a, Not(Contains("--ep-size")));
  EXPECT_THAT(a, Not(Contains("--speculative-algorithm")));
}

TEST(SglangAdapter, DataAndExpertParallelAndSpeculativeDecodingRender) {
  ServiceSpec s = Sglang();
  s.draft_model = "eagle";
  SglangOptions& o = s.sglang;
  o.tp_size = 4;
  o.dp_size = 2;
  o.ep_size = 4;
  o.speculative = {"EAGLE3", 3, 1, 4, "eagle"};
  RenderContext c = Ctx("python3");
  c.draft_snapshot_path = "/models/models--o--eagle/snapshots/def";
  std::vector<std::string> a = ServiceArgv(s, c);
  EXPECT_THAT(From(a, "--dp-size"), ElementsAre("--dp-size", "2"));
  EXPECT_THAT(From(a, "--ep-size"), ElementsAre("--ep-size", "4"));
  EXPECT_THAT(From(a, "--speculative-algorithm", 10),
              ElementsAre("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                          "/models/models--o--eagle/snapshots/def", "--speculative-num-steps", "3",
                          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"));
  // What berth renders, args may not say again.
  EXPECT_EQ(FindOwnedFlag(s, {"--dp", "4"})->set_by, "sglang.dp_size");
  EXPECT_EQ(FindOwnedFlag(s, {"--speculative-num-steps=5"})->set_by, "sglang.speculative");
  EXPECT_FALSE(FindOwnedFlag(s, {"--tool-call-parser", "qwen25"}));
  s.sglang.tool_call_parser = "minimax-m2";
  EXPECT_EQ(FindOwnedFlag(s, {"--tool-call-parser", "qwen25"})->set_by, "sglang.tool_call_parser");
}

// server_args.py: replicas of tp GPUs each; with DP attention the groups live within tp.
TEST(SglangAdapter, TheGpuCountIsTpTimesDpOrTpAloneWithDpAttention) {
  const EngineAdapter& sg = AdapterFor(EngineKind::kSglang);
  ServiceSpec s = Sglang();
  s.sglang.tp_size = 4;
  s.sglang.dp_size = 2;
  EXPECT_FALSE(sg.GpuCountProblem(s, 8));
  ASSERT_TRUE(sg.GpuCountProblem(s, 4));
  EXPECT_EQ(sg.GpuCountProblem(s, 4)->message,
            "tp_size 4 × dp_size 2 = 8, but gpus lists 4 devices");
  WeightSplit w = *sg.Split(s);
  EXPECT_EQ(w.ways, 4);
  EXPECT_EQ(w.replicas, 2);

  s.sglang.tp_size = 8;
  s.sglang.dp_size = 8;
  s.sglang.enable_dp_attention = true;
  EXPECT_FALSE(sg.GpuCountProblem(s, 8));
  EXPECT_THAT(sg.GpuCountProblem(s, 64)->message, HasSubstr("tp_size 8 (DP attention within it)"));
  EXPECT_EQ(sg.Split(s)->replicas, 1);
  s.sglang.dp_size = 3;
  EXPECT_THAT(sg.GpuCountProblem(s, 8)->message, HasSubstr("dp_size 3 does not divide tp_size 8"));
  s.sglang.dp_size = 1;
  EXPECT_THAT(sg.GpuCountProblem(s, 8)->message, HasSubstr("needs dp_size above 1"));

  s.sglang.enable_dp_attention = false;
  s.sglang.ep_size = 3;
  EXPECT_THAT(sg.GpuCountProblem(s, 8)->message, HasSubstr("ep_size 3 does not divide tp_size 8"));
  s.sglang.ep_size = 8;
  EXPECT_FALSE(sg.GpuCountProblem(s, 8));
}

TEST(LlamaServerAdapter, TheModelFileAndEveryKeyRender) {
  ServiceSpec s = Sglang();
  s.engine = EngineKind::kLlamaServer;
  s.llama.model_file = "Q4_K_M/m-00001-of-00002.gguf";
  std::vector<std::string> a = ServiceArgv(s, Ctx("/opt/llama/bin/llama-server"));
  EXPECT_THAT(
      From(a, "--model"),
      ElementsAre("--model", "/models/models--o--m/snapshots/abc/Q4_K_M/m-00001-of-00002.gguf"));
  // Every layer on the GPUs unless the manifest says otherwise: llama.cpp's own default (auto)
  // fits what happens to be free, and a model that silently runs partly on the CPU is slow
  // without failing any gate.
  EXPECT_THAT(From(a, "--n-gpu-layers"), ElementsAre("--n-gpu-layers", "all"));
  EXPECT_THAT(a, Not(Contains("--jinja")));

  s.llama.n_gpu_layers = "auto";
  s.llama.jinja = true;
  s.llama.parallel = 4;
  s.llama.cache_type_k = "q8_0";
  s.llama.cache_type_v = "q4_0";
  s.llama.split_mode = "row";
  s.llama.threads = 16;
  s.llama.batch_size = 4096;
  s.llama.ubatch_size = 1024;
  a = ServiceArgv(s, Ctx("llama-server"));
  EXPECT_THAT(From(a, "--n-gpu-layers"), ElementsAre("--n-gpu-layers", "auto"));
  EXPECT_THAT(a, Contains("--jinja"));
  EXPECT_THAT(From(a, "--parallel"), ElementsAre("--parallel", "4"));
  EXPECT_THAT(From(a, "--cache-type-k"), ElementsAre("--cache-type-k", "q8_0"));
  EXPECT_THAT(From(a, "--cache-type-v"), ElementsAre("--cache-type-v", "q4_0"));
  EXPECT_THAT(From(a, "--split-mode"), ElementsAre("--split-mode", "row"));
  EXPECT_THAT(From(a, "--threads"), ElementsAre("--threads", "16"));
  EXPECT_THAT(From(a, "--batch-size"), ElementsAre("--batch-size", "4096"));
  EXPECT_THAT(From(a, "--ubatch-size"), ElementsAre("--ubatch-size", "1024"));
  EXPECT_EQ(FindOwnedFlag(s, {"-t", "8"})->set_by, "llama_server.threads");
  EXPECT_EQ(FindOwnedFlag(s, {"-b", "512"})->set_by, "llama_server.batch_size");
  EXPECT_EQ(FindOwnedFlag(s, {"-ub", "256"})->set_by, "llama_server.ubatch_size");
  EXPECT_EQ(FindOwnedFlag(s, {"-np", "8"})->set_by, "llama_server.parallel");
  EXPECT_EQ(FindOwnedFlag(s, {"-ctv", "f16"})->set_by, "llama_server.cache_type_v");
  EXPECT_EQ(FindOwnedFlag(s, {"-sm", "layer"})->set_by, "llama_server.split_mode");
}

ServiceSpec Trtllm() {
  ServiceSpec s = Sglang();
  s.name = "trt";
  s.engine = EngineKind::kTrtllm;
  s.gpus = {0, 1, 2, 3};
  s.port = 8000;
  s.trtllm.tp_size = 4;
  return s;
}

TEST(TrtllmAdapter, TrtllmServeGetsItsUnderscoreFlags) {
  ServiceSpec s = Trtllm();
  s.trtllm.ep_size = 4;
  s.trtllm.backend = "pytorch";
  s.trtllm.trust_remote_code = true;
  s.trtllm.max_seq_len = 32768;
  s.trtllm.extra_llm_api_options = "/etc/berth/trt.yaml";
  EXPECT_THAT(
      ServiceArgv(s, Ctx("/opt/trt/bin/trtllm-serve")),
      ElementsAre("/opt/trt/bin/trtllm-serve", "serve", "/models/models--o--m/snapshots/abc",
                  "--host", "0.0.0.0", "--port", "8000", "--tp_size", "4", "--pp_size", "1",
                  "--ep_size", "4", "--backend", "pytorch", "--max_seq_len", "32768",
                  "--trust_remote_code", "--extra_llm_api_options", "/etc/berth/trt.yaml"));
  EXPECT_EQ(AdapterFor(EngineKind::kTrtllm).DefaultExecutable(), "trtllm-serve");
  EXPECT_EQ(FindOwnedFlag(s, {"--tensor_parallel_size", "8"})->set_by, "trtllm.tp_size");
  EXPECT_EQ(FindOwnedFlag(s, {"--config", "/x.yaml"})->set_by, "trtllm.extra_llm_api_options");
  EXPECT_FALSE(FindOwnedFlag(s, {"--kv_cache_free_gpu_memory_fraction", "0.8"}));
  // Its model is positional (trtllm-serve has no --model); port and host are berth's.
  EXPECT_EQ(FindOwnedFlag(s, {"--port", "9"})->set_by, "port");
  EXPECT_EQ(FindOwnedFlag(s, {"--host", "::"})->set_by, "bind");
}

// openai_server.py lists a local model folder under its name: for a Hub snapshot, the commit.
TEST(TrtllmAdapter, ItReportsTheSnapshotFoldersNameNotTheServiceName) {
  const EngineAdapter& trt = AdapterFor(EngineKind::kTrtllm);
  EXPECT_EQ(trt.ReportedName(Trtllm(), Ctx("trtllm-serve")), "abc");
  EXPECT_EQ(trt.ReportedName(Trtllm(), RenderContext{}), "");
  // The others report what berth tells them.
  ServiceSpec s = Sglang();
  s.sglang.served_model_name = "chat";
  EXPECT_EQ(AdapterFor(EngineKind::kSglang).ReportedName(s, Ctx("python3")), "chat");
}

TEST(TrtllmAdapter, TheGpuCountIsTpTimesPpAndEpDividesTp) {
  const EngineAdapter& trt = AdapterFor(EngineKind::kTrtllm);
  ServiceSpec s = Trtllm();
  s.trtllm.tp_size = 2;
  s.trtllm.pp_size = 2;
  EXPECT_FALSE(trt.GpuCountProblem(s, 4));
  EXPECT_EQ(trt.GpuCountProblem(s, 8)->message,
            "tp_size 2 × pp_size 2 = 4, but gpus lists 8 devices");
  EXPECT_EQ(trt.Split(s)->ways, 4);
  s.trtllm.ep_size = 4;
  EXPECT_THAT(trt.GpuCountProblem(s, 4)->message, HasSubstr("ep_size 4 does not divide tp_size 2"));
}

TEST(CommandAdapter, ItReportsTheServedNameTheManifestGivesAndNothingElse) {
  ServiceSpec s = Sglang();
  s.engine = EngineKind::kCommand;
  s.command = {"/usr/bin/tgi"};
  EXPECT_EQ(AdapterFor(EngineKind::kCommand).ReportedName(s, RenderContext{}), "");
  s.served_name = "tgi/model";
  EXPECT_EQ(AdapterFor(EngineKind::kCommand).ReportedName(s, RenderContext{}), "tgi/model");
  EXPECT_EQ(s.ServedName(), "tgi/model");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

// The draft model's snapshot path comes from the manifest's store, which need not be UTF-8: the
// speculative config is still rendered (the byte as \xNN), never an exception.
TEST(VllmAdapter, ADraftPathThatIsNotUtf8IsRenderedNotThrown) {
  ServiceSpec s;
  s.name = "v";
  s.has_engine = true;
  s.engine = EngineKind::kVllm;
  s.model = "m";
  s.port = 8000;
  s.vllm.speculative = VllmSpeculative{"eagle3", 3, "d", {}, {}, {}};
  s.draft_model = "d";
  RenderContext c;
  c.executable = "vllm";
  c.snapshot_path = "/models/m";
  c.draft_snapshot_path = "/mod\xffls/models--o--d/snapshots/def";
  std::vector<std::string> argv;
  ASSERT_NO_THROW(argv = ServiceArgv(s, c));
  auto at = std::find(argv.begin(), argv.end(), "--speculative-config");
  ASSERT_NE(at, argv.end());
  ASSERT_NE(at + 1, argv.end());
  EXPECT_NE((at + 1)->find("snapshots/def"), std::string::npos) << *(at + 1);
}

}  // namespace
}  // namespace berth
