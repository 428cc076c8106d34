// The loader's diagnostics for the engine sections (sglang:, llama_server:, trtllm:, served_name,
// args that name a flag berth renders): exact FILE:LINE:COL and message, as in
// diagnostics_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "manifests/loader.h"
#include "tests/manifests/test_util.h"

namespace berth {
namespace {

using ::berth::testing::kBase;
using ::berth::testing::Problems;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(Diagnostics, SglangCountsDataParallelReplicasAndDpAttentionByItsOwnRule) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: sglang
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    port: 30000
    sglang: {tp_size: 4, dp_size: 2}
  b:
    model: m
    engine: sglang
    gpus: [0, 1, 2, 3]
    port: 30001
    sglang: {tp_size: 4, dp_size: 2}
  c:
    model: m
    engine: sglang
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    port: 30002
    sglang: {tp_size: 8, dp_size: 8, enable_dp_attention: true, ep_size: 8}
  d:
    model: m
    engine: sglang
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    port: 30003
    sglang: {tp_size: 8, dp_size: 3, enable_dp_attention: true}
)"),
              ElementsAre("berth.yaml:15:13: tp_size 4 × dp_size 2 = 8, but gpus lists 4 devices "
                          "(make tp_size × dp_size equal the number of GPUs)",
                          "berth.yaml:27:13: dp_size 3 does not divide tp_size 8: with "
                          "enable_dp_attention the attention groups live within tp (make dp_size "
                          "a divisor of tp_size)"));
}

TEST(Diagnostics, SglangParsersAndDtypesAreSglangsOwnSpellings) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: sglang
    gpus: [0]
    port: 30000
    sglang:
      tool_call_parser: minimax_m2
      reasoning_parser: minimax_m2_append_think
      kv_cache_dtype: fp8
      speculative: {algorithm: eagle3, num_steps: 0}
)"),
              ElementsAre("berth.yaml:10:25: 'tool_call_parser' 'minimax_m2' is not one of "
                          "sglang's tool-call parsers (did you mean 'minimax-m2'?)",
                          "berth.yaml:11:25: 'reasoning_parser' 'minimax_m2_append_think' is not "
                          "one of sglang's reasoning parsers (did you mean "
                          "'minimax-append-think'?)",
                          "berth.yaml:12:23: 'kv_cache_dtype' 'fp8' is not one of sglang's "
                          "KV-cache dtypes (did you mean 'fp8_e4m3'?)",
                          "berth.yaml:13:32: 'algorithm' 'eagle3' is not one of sglang's "
                          "speculative algorithms (did you mean 'EAGLE3'?)",
                          "berth.yaml:13:51: 'num_steps' must be at least 1, got 0"));
}

TEST(Diagnostics, AnSglangDraftModelIsAModelOfTheManifest) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}, eagle-head: {source: hf://a/eagle}}
services:
  a:
    model: m
    engine: sglang
    gpus: [0]
    port: 30000
    sglang:
      speculative: {algorithm: EAGLE3, draft_model: eagle-haed}
  b:
    model: m
    engine: sglang
    gpus: [1]
    port: 30001
    sglang:
      speculative: {algorithm: STANDALONE}
  c:
    model: m
    engine: sglang
    gpus: [2]
    port: 30002
    sglang:
      speculative: {algorithm: NGRAM, draft_model: eagle-head}
)"),
              ElementsAre("berth.yaml:10:53: draft model 'eagle-haed' is not defined in models "
                          "(did you mean 'eagle-head'?)",
                          "berth.yaml:17:7: speculative algorithm STANDALONE needs 'draft_model' "
                          "(name the draft model's key of models:, e.g. draft_model: "
                          "my-eagle3-head)",
                          "berth.yaml:24:52: speculative algorithm NGRAM loads no draft model "
                          "(remove draft_model)"));
}

TEST(Diagnostics, LlamaServerKeysTakeLlamaCppsValues) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: llama-server
    port: 8080
    llama_server:
      model_file: m.gguf
      n_gpu_layers: everything
      cache_type_k: q8
      cache_type_v: fp8
      split_mode: column
      parallel: 0
      threads: 0
      batch_size: -1
      ubatch_size: 0
)"),
              ElementsAre("berth.yaml:10:21: 'n_gpu_layers' must be a number of layers, 'auto' or "
                          "'all', got 'everything'",
                          "berth.yaml:11:21: 'cache_type_k' 'q8' is not one of llama-server's "
                          "KV-cache types (did you mean 'q8_0'?)",
                          "berth.yaml:12:21: 'cache_type_v' 'fp8' is not one of llama-server's "
                          "KV-cache types (one of: f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1)",
                          "berth.yaml:13:19: 'split_mode' 'column' is not one of llama-server's "
                          "split modes (one of: none layer row tensor)",
                          "berth.yaml:14:17: 'parallel' must be at least 1, got 0",
                          "berth.yaml:15:16: 'threads' must be at least 1, got 0",
                          "berth.yaml:16:19: 'batch_size' must be at least 1, got -1",
                          "berth.yaml:17:20: 'ubatch_size' must be at least 1, got 0"));
}

TEST(Diagnostics, TrtllmServeKeysAndItsGpuRule) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: trtllm-serve
    gpus: [0, 1, 2, 3]
    port: 8000
    trtllm: {tp_size: 2, extra_llm_api_options: trt.yaml, backend: torch}
  b:
    model: m
    engine: trtllm-serve
    gpus: [0, 1]
    port: 8001
    trtllm: {tp_size: 2, ep_size: 4}
  c:
    model: m
    engine: trtllm-serve
    port: 8002
    served_name: x
    args: [--tp_size, "2"]
)"),
              ElementsAre("berth.yaml:9:13: tp_size 2 × pp_size 1 = 2, but gpus lists 4 devices "
                          "(make tp_size × pp_size equal the number of GPUs)",
                          "berth.yaml:9:49: 'extra_llm_api_options' must be an absolute path, got "
                          "'trt.yaml'",
                          "berth.yaml:9:68: 'backend' 'torch' is not one of trtllm-serve's "
                          "backends (did you mean 'pytorch'?)",
                          "berth.yaml:15:13: ep_size 4 does not divide tp_size 2: TensorRT-LLM "
                          "splits the experts within tp (make ep_size a divisor of tp_size)",
                          "berth.yaml:16:3: engine trtllm-serve needs 'gpus'",
                          "berth.yaml:20:5: 'served_name' does not apply to engine trtllm-serve "
                          "(trtllm-serve lists its model folder's name; berth's gates ask for "
                          "that)",
                          "berth.yaml:21:12: --tp_size is set by `trtllm.tp_size:`; args cannot "
                          "set it (remove it from args, and change `trtllm.tp_size:` instead)"));
}

TEST(Diagnostics, ServedNameBelongsToEngineCommand) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: vllm
    gpus: [0]
    port: 8000
    served_name: chat
  b:
    engine: command
    command: [/usr/bin/tgi]
    port: 8001
    served_name: ""
)"),
              ElementsAre("berth.yaml:9:5: 'served_name' does not apply to engine vllm (use "
                          "vllm.served_model_name)",
                          "berth.yaml:14:18: 'served_name' must not be empty (remove it: the "
                          "health gate then checks the health path alone)"));
}

TEST(Diagnostics, ArgsThatNameAFlagBerthRendersAreRefusedWhereTheyAreWritten) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: vllm
    gpus: [0]
    port: 8000
    args: [--enforce-eager, --port, "9000"]
  b:
    model: m
    engine: sglang
    gpus: [0]
    port: 8001
    args: ["--served-model-name=other"]
  c:
    model: m
    engine: llama-server
    port: 8002
    llama_server: {model_file: m.gguf}
    args: [-ngl, "10"]
  d:
    engine: command
    command: [/usr/bin/server]
    args: [--port, "9000"]
)"),
              ElementsAre("berth.yaml:9:29: --port is set by `port:`; args cannot set it (remove "
                          "it from args, and change `port:` instead)",
                          "berth.yaml:15:12: --served-model-name is set by "
                          "`sglang.served_model_name:`; args cannot set it (remove it from args, "
                          "and change `sglang.served_model_name:` instead)",
                          "berth.yaml:21:12: -ngl is set by `llama_server.n_gpu_layers:`; args "
                          "cannot set it (remove it from args, and change "
                          "`llama_server.n_gpu_layers:` instead)"));
}

}  // namespace
}  // namespace berth
