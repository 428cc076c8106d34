// The manifest loader on in-memory files: what a valid manifest becomes (values and defaults),
// the digest, and how a diagnostic prints. The mistakes are in diagnostics_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "core/hash.h"
#include "manifests/loader.h"
#include "tests/manifests/test_util.h"

namespace berth {
namespace {

using ::berth::testing::kBase;
using ::berth::testing::Load;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(Loader, TheDesignScenarioLoadsIntoDesired) {
  LoadResult r = Load(R"(berth: 1
host:
  match: {hostname: "gpu-*"}
  store: /shared/models
  reserve: 100GiB
  unit_dir: /run/systemd/system
  executables: {vllm: /opt/vllm/bin/vllm}
models:
  kimi-k25-nvfp4:
    source: hf://nvidia/Kimi-K2.5-NVFP4
    keep: true
  minimax-m25:
    source: hf://MiniMaxAI/MiniMax-M2.5
    include: ["*.safetensors", "*.json"]
    exclude: "*.bin"
    size: 230GB
services:
  vllm-kimi-k25:
    state: stopped
  vllm-minimax-m25:
    model: minimax-m25
    engine: vllm
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    port: 8000
    vllm: {tensor_parallel_size: 8, enable_expert_parallel: true, gpu_memory_utilization: 0.90}
    args: ["--compilation-config", '{"cudagraph_mode": "PIECEWISE"}', 3, true]
    env: {SAFETENSORS_FAST_GPU: "1", NCCL_P2P_LEVEL: 4}
    health: {path: /v1/models, timeout: 30m, interval: 2s}
    strategy: stop-first
)");
  ASSERT_THAT(testing::ToStrings(r), IsEmpty());
  const Desired& d = r.desired;
  EXPECT_EQ(d.host.match.at("hostname"), "gpu-*");
  EXPECT_EQ(d.host.store, "/shared/models");
  EXPECT_EQ(d.host.reserve_bytes, 100ull << 30);
  EXPECT_EQ(d.host.unit_dir, "/run/systemd/system");
  EXPECT_EQ(d.host.loc.ToString(), "berth.yaml:2:1");
  EXPECT_EQ(d.executables.at("vllm"), "/opt/vllm/bin/vllm");

  const ModelSpec& m = d.models.at("minimax-m25");
  EXPECT_EQ(m.repo_id, "MiniMaxAI/MiniMax-M2.5");
  EXPECT_THAT(m.include, ElementsAre("*.safetensors", "*.json"));
  EXPECT_THAT(m.exclude, ElementsAre("*.bin"));
  EXPECT_EQ(m.size_hint, 230000000000ull);
  EXPECT_EQ(m.loc.ToString(), "berth.yaml:12:3");

  const ServiceSpec& kimi = d.services.at("vllm-kimi-k25");
  EXPECT_FALSE(kimi.has_engine);
  EXPECT_EQ(kimi.state, ServiceState::kStopped);

  const ServiceSpec& s = d.services.at("vllm-minimax-m25");
  EXPECT_TRUE(s.has_engine);
  EXPECT_EQ(s.engine, EngineKind::kVllm);
  EXPECT_EQ(s.model, "minimax-m25");
  EXPECT_THAT(s.gpus, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(s.port, 8000);
  EXPECT_EQ(s.vllm.tensor_parallel_size, 8);
  EXPECT_TRUE(s.vllm.enable_expert_parallel);
  EXPECT_DOUBLE_EQ(s.vllm.gpu_memory_utilization, 0.90);
  EXPECT_THAT(s.args, ElementsAre("--compilation-config", R"({"cudagraph_mode": "PIECEWISE"})", "3",
                                  "true"));
  EXPECT_EQ(s.env.at("SAFETENSORS_FAST_GPU"), "1");
  EXPECT_EQ(s.env.at("NCCL_P2P_LEVEL"), "4");
  EXPECT_EQ(s.health.path, "/v1/models");
  EXPECT_EQ(s.health.timeout_ms, 30u * 60 * 1000);
  EXPECT_EQ(s.health.interval_ms, 2000u);
  EXPECT_EQ(s.strategy, Strategy::kStopFirst);
  EXPECT_EQ(s.loc.ToString(), "berth.yaml:20:3");
}

TEST(Loader, DefaultsApplyWhereNothingIsWritten) {
  LoadResult r = Load(R"(berth: 1
models:
  m:
    source: hf://org/name
services:
  s:
    model: m
    engine: vllm
    gpus: [3]
    port: 8000
)");
  ASSERT_THAT(testing::ToStrings(r), IsEmpty());
  const ModelSpec& m = r.desired.models.at("m");
  EXPECT_EQ(m.revision, "main");
  EXPECT_TRUE(m.keep);
  EXPECT_TRUE(m.include.empty());
  EXPECT_FALSE(m.size_hint.has_value());
  const ServiceSpec& s = r.desired.services.at("s");
  EXPECT_EQ(s.state, ServiceState::kRunning);
  EXPECT_EQ(s.bind, "0.0.0.0");
  EXPECT_EQ(s.executable, "");
  EXPECT_EQ(s.vllm.tensor_parallel_size, 1);
  EXPECT_EQ(s.vllm.pipeline_parallel_size, 1);
  EXPECT_DOUBLE_EQ(s.vllm.gpu_memory_utilization, 0.9);
  EXPECT_EQ(s.health.path, "/health");
  EXPECT_EQ(s.health.timeout_ms, 30u * 60 * 1000);
  EXPECT_EQ(s.health.interval_ms, 5000u);
  EXPECT_EQ(s.strategy, Strategy::kAuto);
  EXPECT_FALSE(s.adopt);
  EXPECT_EQ(r.desired.host.unit_dir, "/etc/systemd/system");
  EXPECT_TRUE(r.desired.host.match.empty());
  EXPECT_EQ(r.desired.version, 1);
}

TEST(Loader, OtherEnginesLoadTheirOptions) {
  LoadResult r = Load(R"(berth: 1
models:
  m:
    source: hf://org/name
    revision: 2024
  g:
    source: hf://org/gguf
    revision: 0123456789abcdef0123456789abcdef01234567
services:
  sg:
    model: m
    engine: sglang
    gpus: [0, 1]
    port: 30000
    sglang: {tp_size: 2, mem_fraction_static: 0.8, context_length: 65536, served_model_name: chat}
  ll:
    model: g
    engine: llama-server
    port: 8080
    gpu_memory: 12GiB
    llama_server: {n_gpu_layers: auto, ctx_size: 8192, model_file: Q4/m.gguf, alias: small}
  tool:
    engine: command
    command: [/usr/bin/python3, -m, tool]
    port: 9000
    env_file: /etc/berth/tool.env
    adopt: true
)");
  ASSERT_THAT(testing::ToStrings(r), IsEmpty());
  EXPECT_EQ(r.desired.models.at("m").revision, "2024");  // a YAML number, taken as written
  EXPECT_EQ(r.desired.models.at("g").revision, "0123456789abcdef0123456789abcdef01234567");
  const ServiceSpec& sg = r.desired.services.at("sg");
  EXPECT_EQ(sg.sglang.tp_size, 2);
  EXPECT_EQ(sg.sglang.context_length, 65536u);
  EXPECT_EQ(sg.ServedName(), "chat");
  const ServiceSpec& ll = r.desired.services.at("ll");
  EXPECT_EQ(ll.engine, EngineKind::kLlamaServer);
  EXPECT_EQ(ll.llama.n_gpu_layers, "auto");
  EXPECT_EQ(ll.llama.model_file, "Q4/m.gguf");
  EXPECT_EQ(ll.gpu_memory, 12ull << 30);
  const ServiceSpec& tool = r.desired.services.at("tool");
  EXPECT_EQ(tool.engine, EngineKind::kCommand);
  EXPECT_EQ(tool.model, "");
  EXPECT_THAT(tool.command, ElementsAre("/usr/bin/python3", "-m", "tool"));
  EXPECT_EQ(tool.env_file, "/etc/berth/tool.env");
  EXPECT_TRUE(tool.adopt);
}

TEST(Loader, TheEnginesFirstClassKeysLoad) {
  LoadResult r = Load(R"(berth: 1
models:
  m: {source: hf://MiniMaxAI/MiniMax-M2.5}
  head: {source: hf://org/eagle3, keep: false}
  g: {source: hf://org/gguf}
services:
  sg:
    model: m
    engine: sglang
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    port: 30000
    sglang:
      tp_size: 4
      dp_size: 2
      ep_size: 4
      trust_remote_code: true
      tool_call_parser: minimax-m2
      reasoning_parser: minimax-append-think
      kv_cache_dtype: fp8_e4m3
      speculative: {algorithm: EAGLE3, num_steps: 3, eagle_topk: 1, num_draft_tokens: 4,
                    draft_model: head}
  ll:
    model: g
    engine: llama-server
    port: 8080
    llama_server: {model_file: q4.gguf, n_gpu_layers: 40, jinja: true, parallel: 4, threads: 8,
                   batch_size: 4096, ubatch_size: 1024, cache_type_k: q8_0, cache_type_v: q8_0,
                   split_mode: row}
  trt:
    model: m
    engine: trtllm-serve
    gpus: [0, 1]
    port: 8001
    state: stopped
    trtllm: {tp_size: 2, ep_size: 2, backend: pytorch, max_seq_len: 8192, trust_remote_code: true,
             extra_llm_api_options: /etc/berth/trt.yaml}
  tgi:
    engine: command
    command: [/usr/bin/text-generation-launcher]
    port: 8002
    served_name: meta-llama/Llama-3.1-8B-Instruct
)");
  ASSERT_THAT(testing::ToStrings(r), IsEmpty());
  const ServiceSpec& sg = r.desired.services.at("sg");
  EXPECT_EQ(sg.sglang.dp_size, 2);
  EXPECT_EQ(sg.sglang.ep_size, 4);
  EXPECT_TRUE(sg.sglang.trust_remote_code);
  EXPECT_EQ(sg.sglang.tool_call_parser, "minimax-m2");
  EXPECT_EQ(sg.sglang.reasoning_parser, "minimax-append-think");
  EXPECT_EQ(sg.sglang.kv_cache_dtype, "fp8_e4m3");
  EXPECT_EQ(sg.sglang.speculative.algorithm, "EAGLE3");
  EXPECT_EQ(sg.sglang.speculative.num_draft_tokens, 4);
  EXPECT_EQ(sg.draft_model, "head");
  const ServiceSpec& ll = r.desired.services.at("ll");
  EXPECT_EQ(ll.llama.n_gpu_layers, "40");
  EXPECT_TRUE(ll.llama.jinja);
  EXPECT_EQ(ll.llama.parallel, 4);
  EXPECT_EQ(ll.llama.threads, 8);
  EXPECT_EQ(ll.llama.batch_size, 4096);
  EXPECT_EQ(ll.llama.ubatch_size, 1024);
  EXPECT_EQ(ll.llama.split_mode, "row");
  const ServiceSpec& trt = r.desired.services.at("trt");
  EXPECT_EQ(trt.engine, EngineKind::kTrtllm);
  EXPECT_EQ(trt.trtllm.tp_size, 2);
  EXPECT_EQ(trt.trtllm.ep_size, 2);
  EXPECT_EQ(trt.trtllm.extra_llm_api_options, "/etc/berth/trt.yaml");
  EXPECT_EQ(r.desired.services.at("tgi").served_name, "meta-llama/Llama-3.1-8B-Instruct");
}

TEST(Loader, TheEngineCheckIsOnUnlessPreflightTurnsItOff) {
  LoadResult r = Load(R"(berth: 1
models:
  m:
    source: hf://org/name
services:
  plain: {model: m, engine: vllm, gpus: [0], port: 8000}
  off: {model: m, engine: vllm, gpus: [1], port: 8001, preflight: {engine: off}}
  both:
    model: m
    engine: vllm
    gpus: [2]
    port: 8002
    preflight: {engine: on, command: [/bin/true], timeout: 2m}
)");
  ASSERT_THAT(testing::ToStrings(r), IsEmpty());
  EXPECT_FALSE(r.desired.services.at("plain").preflight.has_value());  // on by default
  const ServiceSpec& off = r.desired.services.at("off");
  ASSERT_TRUE(off.preflight.has_value());
  EXPECT_FALSE(off.preflight->engine_check);
  EXPECT_TRUE(off.preflight->command.empty());
  const ServiceSpec& both = r.desired.services.at("both");
  ASSERT_TRUE(both.preflight.has_value());
  EXPECT_TRUE(both.preflight->engine_check);
  EXPECT_THAT(both.preflight->command, ElementsAre("/bin/true"));
  EXPECT_EQ(both.preflight->timeout_ms, 2u * 60 * 1000);
}

TEST(Loader, AStateOnlyServiceMayDeclareWhereItServesAndWhatItHolds) {
  LoadResult r = Load(R"(berth: 1
services:
  vllm-kimi-k25:
    state: running
    port: 8000
    gpus: [0, 1]
    gpu_memory: 70GiB
    health: {path: /ready, timeout: 10m}
)");
  ASSERT_THAT(testing::ToStrings(r), IsEmpty());
  const ServiceSpec& k = r.desired.services.at("vllm-kimi-k25");
  EXPECT_FALSE(k.has_engine);
  EXPECT_EQ(k.port, 8000);
  EXPECT_THAT(k.gpus, ElementsAre(0, 1));
  EXPECT_EQ(k.gpu_memory, 70ull << 30);
  EXPECT_EQ(k.health.path, "/ready");
  EXPECT_EQ(k.health.timeout_ms, 10u * 60 * 1000);
}

TEST(Loader, FilesAndDigestCoverEveryFileInOrder) {
  LoadResult r = LoadManifestTexts({{"a.yaml", "berth: 1\n"}, {"b.yaml", kBase}});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r.desired.files, ElementsAre("a.yaml", "b.yaml"));
  EXPECT_EQ(r.desired.digest, Sha256Hex(std::string("a.yaml") + '\0' + "berth: 1\n" + '\0' +
                                        "b.yaml" + '\0' + kBase + '\0'));
  LoadResult changed = LoadManifestTexts({{"a.yaml", "berth: 1 \n"}, {"b.yaml", kBase}});
  EXPECT_NE(changed.desired.digest, r.desired.digest);
}

TEST(Loader, DiagnosticToStringLeavesOutAnEmptyHint) {
  Diagnostic d{SourceLoc{"x.yaml", 3, 5}, "bad thing", ""};
  EXPECT_EQ(d.ToString(), "x.yaml:3:5: bad thing");
  d.hint = "try this";
  EXPECT_EQ(d.ToString(), "x.yaml:3:5: bad thing (try this)");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

TEST(HostGpus, InventoryIsReadAndBothFieldsAreNeeded) {
  LoadResult ok =
      LoadManifestTexts({{"m.yaml", "berth: 1\nhost:\n  gpus: {count: 8, memory: 96GiB}\n"}});
  ASSERT_TRUE(ok.ok()) << (ok.diagnostics.empty() ? "" : ok.diagnostics[0].ToString());
  ASSERT_TRUE(ok.desired.host.gpus.has_value());
  EXPECT_EQ(ok.desired.host.gpus->count, 8);
  EXPECT_EQ(ok.desired.host.gpus->memory_bytes, 96ull << 30);
  LoadResult bad = LoadManifestTexts({{"m.yaml", "berth: 1\nhost:\n  gpus: {count: 8}\n"}});
  ASSERT_EQ(bad.diagnostics.size(), 1u);
  EXPECT_EQ(bad.diagnostics[0].ToString(),
            "m.yaml:3:3: 'gpus' needs both count and memory, e.g. {count: 8, memory: 96GiB}");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

TEST(Secrets, AreRefusedInEnvAndPointedToEnvFile) {
  LoadResult r = LoadManifestTexts(
      {{"m.yaml",
        "berth: 1\nmodels:\n  m: {source: hf://o/m}\nservices:\n  s:\n    model: m\n"
        "    engine: vllm\n    gpus: [0]\n    port: 8000\n    env: {HF_TOKEN: hf_x, LOG: "
        "info}\n"}});
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].ToString(),
            "m.yaml:10:11: 'HF_TOKEN' looks like a secret; berth never writes secrets into unit "
            "files (put it in a file readable only by root and name it with env_file:)");
}

TEST(Secrets, AreWholeWordsOfTheNameNotAnyPartOfIt) {
  auto refused = [](const std::string& name) {
    LoadResult r = LoadManifestTexts(
        {{"m.yaml",
          "berth: 1\nmodels:\n  m: {source: hf://o/m}\nservices:\n  s:\n    model: m\n"
          "    engine: vllm\n    gpus: [0]\n    port: 8000\n    env: {" +
              name + ": x}\n"}});
    return !r.diagnostics.empty();
  };
  for (const char* secret : {"HF_TOKEN", "TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "AWS_SECRET",
                             "MY_SECRET_VALUE", "hf_token", "GCP_CREDENTIALS", "PRIVATE_KEY"})
    EXPECT_TRUE(refused(secret)) << secret;
  for (const char* plain : {"MAX_TOKENS_PER_SECOND", "VLLM_MAX_TOKENS", "TOKENIZERS_PARALLELISM",
                            "SECRETARY", "KEYBOARD"})
    EXPECT_FALSE(refused(plain)) << plain;
}

}  // namespace
}  // namespace berth
